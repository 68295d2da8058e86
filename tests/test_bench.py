"""`python -m dflash bench` on a tiny pair through the loader hook: JSON schema, lossless flags,
medians, plot; the z-lab peer when its wheel can be fetched."""

import json

import pytest
from mlx_lm.tokenizer_utils import TokenizerWrapper

from dflash import bench, peer_zlab
from dflash.config import default_block_size
from dflash.drafter import save_drafter
from dflash.load import Pair
from dflash.target import Target
from tests.tiny import EOS, VOCAB, tiny_drafter, tiny_model


def word_tokenizer(eos: int = EOS) -> TokenizerWrapper:
    """A real (tiny) HF tokenizer: words t0..t63 are ids 0..63; both engines can detokenize it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=f"t{eos}", unk_token="t0")
    return TokenizerWrapper(hf, eos_token_ids=[eos])


@pytest.fixture
def setup(tmp_path):
    drafter = tiny_drafter()
    save_drafter(drafter, tmp_path / "drafter")
    tokenizer = word_tokenizer()
    models = []

    def load(model, draft, mode, **_):
        models.append(tiny_model("llama"))
        return Pair(Target(models[-1], "llama", drafter.target_layer_ids), drafter, tokenizer,
                    "tiny-llama", str(tmp_path / "drafter"))

    (tmp_path / "chat.jsonl").write_text('{"id": "a", "prompt": "t5 t9 t12"}\n'
                                         '{"id": "b", "prompt": "t7 t30 t31 t8"}\n')
    (tmp_path / "math.jsonl").write_text('{"id": "c", "prompt": "t10 t20"}\n{"id": "d", "prompt": "t11"}\n'
                                         '{"id": "e", "prompt": "t40 t41"}\n')
    return tmp_path, load, models


def run_bench(tmp_path, load, *extra):
    out = tmp_path / "res" / "r.json"
    argv = ["--prompts", str(tmp_path / "chat.jsonl"), str(tmp_path / "math.jsonl"), "--prompts-limit", "2",
            "--max-tokens", "12", "--repeat", "2", "--out", str(out), *extra]
    assert bench.main(argv, load=load) == 0
    return json.loads(out.read_text()), out


def test_bench_json_plot_and_profile(setup, capsys):
    tmp_path, load, _ = setup
    doc, out = run_bench(tmp_path, load, "--profile")
    assert doc["schema"] == bench.SCHEMA
    env = doc["environment"]
    for key in ("mlx", "backend", "default_device", "device_name", "cpu_count", "blas", "target_dtype",
                "git_commit", "date", "command"):
        assert key in env
    assert env["command"].startswith("python -m dflash bench --prompts")
    assert doc["settings"]["block_size"] == default_block_size(8) and doc["settings"]["repeat"] == 2
    ids = [(r["suite"], r["id"]) for r in doc["prompts"]]
    assert ids == [("chat", "a"), ("chat", "b"), ("math", "c"), ("math", "d")]
    for r in doc["prompts"]:
        assert r["identical"] and r["first_divergence"] is None
        assert len(r["target"]["decode_tok_s_runs"]) == 2
        assert r["speedup"] == pytest.approx(r["dflash"]["decode_tok_s"] / r["target"]["decode_tok_s"])
        assert 1.0 <= r["dflash"]["tau"] <= 8 and r["target"]["tau"] == 1.0
        for k in ("draft_ms", "verify_ms", "rollback_ms", "cycle_ms", "ttft_s"):
            assert r["dflash"][k] >= 0
        # the last run's passes by size (which shapes the default chose) commit every token but
        # the prefill's (the repeats' cycle counts may differ: the CPU planner follows timings)
        passes = r["dflash"]["passes"]
        committed = sum(p["cycles"] * p["tokens"] for p in passes.values())
        assert committed == pytest.approx(r["dflash"]["tokens"] - 1)
        assert all(1 <= int(k) <= 65 and p["ms"] > 0 for k, p in passes.items())
        assert list(r["target"]["passes"]) == ["1"] and r["target"]["passes"]["1"]["tokens"] == 1
    assert doc["overall"]["all_identical"] and doc["suites"]["math"]["prompts"] == 2
    prof = doc["profile"]
    assert set(prof["verify_ms"]) == {"1", "2", "4", "8", "16", str(doc["settings"]["block_size"])}
    assert prof["break_even_tau"] == pytest.approx(prof["model_cycle_ms"] / prof["target_step_ms"])
    # timed apart from the passes (comparing the two would test the host's load, not the code)
    assert 0 < prof["graph_build_ms"]["verify"] < 1e4 and 0 < prof["graph_build_ms"]["draft"] < 1e4
    assert 0 <= prof["engine_share"] < 1
    try:
        import plotly  # noqa: F401
        assert doc["plot"] == "r.html" and "plotly" in out.with_suffix(".html").read_text()
    except ImportError:
        assert doc["plot"] is None
    table = capsys.readouterr().out
    assert "(median)" in table and "profile" in table
    out.with_suffix(".html").unlink(missing_ok=True)
    assert bench.main(["--replot", str(out)]) == 0  # table + plot again from the saved JSON
    assert capsys.readouterr().out == table
    assert out.with_suffix(".html").exists() == (doc["plot"] is not None)


def test_aggregate_takes_medians_over_prompts():
    def row(speedup, tau, ident, peer=None):
        return {"speedup": speedup, "identical": ident, "peer": peer, "prompt_tokens": int(100 * tau),
                "target": {"decode_tok_s": 10.0, "ttft_s": 0.1, "cycle_ms": 100.0},
                "dflash": {"decode_tok_s": 10.0 * speedup, "ttft_s": 0.2, "tau": tau, "acceptance_rate": 0.5,
                           "draft_ms": 1.0, "verify_ms": 2.0, "rollback_ms": 0.5, "cycle_ms": 4.0}}

    a = bench.aggregate([row(1.0, 2.0, True), row(3.0, 5.0, False), row(2.0, 4.0, True),
                         row(10.0, 3.0, True, {"error": "x"})])
    assert a["speedup"] == 2.5 and a["tau"] == 3.5 and a["dflash_tok_s"] == 25.0
    assert a["speedup_min"] == 1.0 and a["prompt_tokens"] == 350  # the slowest prompt; the median context
    assert (a["prompts"], a["identical"], a["all_identical"]) == (4, 3, False)
    assert a["peer_speedup"] is None and "peer_identical" not in a
    assert bench._medians([{"x": 3.0}, {"x": 1.0}, {"x": 2.0}]) == {"x": 2.0}


def test_peer_failure_is_recorded_not_raised(setup):
    tmp_path, load, _ = setup

    def load_without_drafter_dir(*a, **k):
        pair = load(*a, **k)
        pair.draft_id = None
        return pair

    doc, _ = run_bench(tmp_path, load_without_drafter_dir, "--peer", "zlab")
    assert doc["peer"]["available"] is False and "drafter directory" in doc["peer"]["error"]
    assert all(r["peer"] is None and r["identical"] for r in doc["prompts"])


def test_mlx_lm_baseline_decodes_the_same_tokens(setup, capsys):
    tmp_path, load, _ = setup
    doc, _ = run_bench(tmp_path, load, "--baseline", "mlx-lm")
    assert doc["settings"]["baseline"] == "mlx-lm"
    for r in doc["prompts"]:
        m = r["mlx_lm"]
        # mlx-lm's stream_generate on the same model: the target's greedy tokens, stop token
        # excluded, as many as ours
        assert m["identical"] and m["first_divergence"] is None, r["id"]
        assert m["tokens"] == r["target"]["tokens"] and len(m["decode_tok_s_runs"]) == 2
        assert m["speedup"] == pytest.approx(r["dflash"]["decode_tok_s"] / m["decode_tok_s"])
        assert m["target_ratio"] == pytest.approx(r["target"]["decode_tok_s"] / m["decode_tok_s"])
    a = doc["overall"]
    assert a["mlx_lm_identical"] == 4 and a["speedup_vs_mlx_lm"] > 0
    assert "vs mlx" in capsys.readouterr().out
    plain, _ = run_bench(tmp_path, load)
    assert all(r["mlx_lm"] is None for r in plain["prompts"]) and "mlx_lm_identical" not in plain["overall"]


def test_mlx_lm_baseline_stops_where_target_only_does(setup):
    from dataclasses import replace

    from dflash import peer_mlx_lm
    from dflash.config import GenerationConfig
    from dflash.engine import stream

    _, load, _ = setup
    pair, ids = load(None, None, "dflash"), [5, 9, 12]
    *_, free = stream(pair, ids, GenerationConfig(mode="target", max_tokens=20))
    stop = next(t for i, t in enumerate(free.token_ids) if i >= 4 and t not in free.token_ids[:i])
    pair = replace(pair, tokenizer=word_tokenizer(eos=stop))  # the answer now stops inside 20 tokens
    *_, ref = stream(pair, ids, GenerationConfig(mode="target", max_tokens=20))
    assert ref.finish_reason == "stop" and stop not in ref.token_ids and len(ref.token_ids) >= 4
    for n in (1, 3, 20):  # max_tokens inside the answer, and past its stop token
        r = peer_mlx_lm.generate(pair, ids, n)
        assert r.token_ids == ref.token_ids[:n] and r.ttft_s > 0


def test_a_prompt_file_with_categories_is_one_suite_per_category(tmp_path):
    rows = [{"category": c, "prompt": f"{c} {i}"} for i in range(3) for c in ("chat", "code")]
    (tmp_path / "eval.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "mine.jsonl").write_text('{"prompt": "a"}\n{"id": "b", "prompt": "b"}\n')
    suites = bench.load_suites([], [str(tmp_path / "eval.jsonl"), str(tmp_path / "mine.jsonl")], limit=2)
    assert {k: [(r["id"], r["prompt"]) for r in v] for k, v in suites.items()} == {
        "chat": [("chat-1", "chat 0"), ("chat-2", "chat 1")],
        "code": [("code-1", "code 0"), ("code-2", "code 1")],
        "mine": [("mine-1", "a"), ("b", "b")]}
    (tmp_path / "bad.jsonl").write_text('{"category": 3, "prompt": "x"}\n')
    with pytest.raises(ValueError, match="category"):
        bench.load_suites([], [str(tmp_path / "bad.jsonl")])


def test_a_suite_row_may_be_a_conversation_and_the_long_suite_loads(tmp_path):
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "And now?"}]
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "c", "messages": chat}) + "\n")
    assert bench.load_suites([], [str(tmp_path / "c.jsonl")])["c"] == [{"id": "c", "prompt": chat}]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"messages": [{"role": "user"}]}) + "\n")
    with pytest.raises(ValueError, match="messages"):
        bench.load_suites([], [str(tmp_path / "bad.jsonl")])
    long = bench.load_suites([bench.LONG_SUITE])
    assert list(long) == ["0.5k", "1k", "2k", "4k", "7k"] and all(len(v) == 3 for v in long.values())


def test_replot_of_a_file_that_is_no_record_is_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("nope")
    (tmp_path / "list.json").write_text("[1, 2]")
    for name, says in (("missing.json", "cannot read"), ("bad.json", "is not JSON"), ("list.json", "not a bench record")):
        assert bench.main(["--replot", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and says in err and err.count("\n") == 1


def test_a_suite_row_with_a_lone_surrogate_is_refused(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"prompt": "\\ud800 x"}\n')
    with pytest.raises(ValueError, match="surrogate"):
        bench.load_suites([], [str(tmp_path / "s.jsonl")])


def test_bad_suite_lines_are_value_errors(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"id": "a"}\n')
    with pytest.raises(ValueError, match="prompt"):
        bench.load_suites([], [str(tmp_path / "x.jsonl")])
    with pytest.raises(ValueError, match="no prompt suite"):
        bench.load_suites(["nope"])


def test_first_divergence_is_the_earliest_over_all_outputs():
    ref = (1, 2, 3, 4)
    assert bench._first_divergence(ref, [ref, ref]) is None
    assert bench._first_divergence(ref, [(1, 2, 3, 9), (1, 7, 3, 4), ref]) == 1
    assert bench._first_divergence(ref, [(1, 2, 3, 4, 5), (1, 2, 3)]) == 3  # one ran on, one stopped


def test_peer_zlab_runs_on_the_same_pair(setup):
    """Runs z-lab's code fetched from PyPI (a package registry, at test time, never at collection);
    skipped only when that wheel cannot be fetched."""
    try:
        peer_zlab.fetch(progress=lambda m: None)
    except Exception as e:
        pytest.skip(f"z-lab peer wheel {peer_zlab.WHEEL_NAME}=={peer_zlab.WHEEL_VERSION} not fetchable: {e}")
    tmp_path, load, models = setup
    doc, _ = run_bench(tmp_path, load, "--peer", "zlab")
    assert doc["peer"]["available"] and doc["peer"]["error"] is None
    for r in doc["prompts"]:
        p = r["peer"]
        assert p["identical"] and p["tau"] >= 1.0 and p["decode_tok_s"] > 0
        assert p["speedup"] == pytest.approx(p["decode_tok_s"] / r["target"]["decode_tok_s"])
    # the peer wraps the tapped layers in hooks; they must be gone after each run
    assert not any(isinstance(l, peer_zlab.load_module(peer_zlab.source_path())._LayerHook)
                   for l in models[-1].model.layers)
    assert "_hidden_states" not in models[-1]


def test_profile_names_the_host_and_warns_when_dflash_cannot_pay(capsys):
    blas = {"openblas": "/usr/lib/libblas.so.3", "coretype": "SkylakeX", "row_tile": 8,
            "row_tiles": {"960x576 float32 (fused)": 2, "576x576 float32": 4},
            "cpu": "GenuineIntel Intel(R) Xeon(R)", "libraries": []}
    env = {"backend": "cpu", "device_name": "Intel(R) Xeon(R)", "blas": blas}
    for tau, warned in ((3.1, True), (4.6, False)):
        bench._print_host({"environment": env, "overall": {"tau": tau}}, {"break_even_tau": 4.5}, None)
        out = capsys.readouterr().out
        assert "GenuineIntel Intel(R) Xeon(R)" in out and "OpenBLAS SkylakeX kernels" in out
        assert "rows padded per shape (960x576 float32 (fused) 2, 576x576 float32 4)" in out
        assert ("cannot pay" in out) == warned


def test_host_overhead_only_against_the_profiled_chain():
    """A run whose planner took plain steps or trees is not the profiled chain's cycle."""
    for per_pass, expect in ((5.1, 20.0), (1.15, None), (None, 20.0)):
        prof = {"block_size": 5, "model_cycle_ms": 100.0, "target_step_ms": 50.0}
        row = {"dflash": {"cycle_ms": 120.0, "tokens_verified": per_pass, "rollback_ms": 1.0,
                          "untimed_ms": 0.5, "tau": 2.0}, "target": {"cycle_ms": 51.0}}
        if per_pass is None:
            del row["dflash"]["tokens_verified"]
        prof = bench._add_overheads(prof, row)
        assert prof["host_overhead_ms"] == (pytest.approx(expect) if expect else None)
        assert ("n/a" in bench._overhead(prof)) == (expect is None)


def test_cuda_command_buffer_defaults(monkeypatch):
    """On an MLX CUDA build backend.setup() sizes MLX's command buffers before mlx loads,
    unless the environment already says; on other builds it sets nothing."""
    from importlib import metadata

    from dflash.backends import cuda_env

    env = {"MLX_MAX_MB_PER_BUFFER": "40"}
    assert cuda_env.apply(env, cuda=True) == {"MLX_MAX_OPS_PER_BUFFER": "20"}
    assert env == {"MLX_MAX_OPS_PER_BUFFER": "20", "MLX_MAX_MB_PER_BUFFER": "40"}
    assert cuda_env.apply({}, cuda=False) == {}

    def installed(*names):
        def distribution(name):
            if name in names:
                return object()
            raise metadata.PackageNotFoundError(name)
        return distribution

    monkeypatch.setattr(metadata, "distribution", installed("mlx-cuda-13", "mlx"))
    assert cuda_env.mlx_is_cuda_build() and cuda_env.apply({}) == cuda_env.SETTINGS
    monkeypatch.setattr(metadata, "distribution", installed("mlx", "mlx-metal"))
    assert not cuda_env.mlx_is_cuda_build() and cuda_env.apply({}) == {}
