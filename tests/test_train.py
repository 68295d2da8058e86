"""dflash.train on a tiny random target: data generation, blocks that match the engine's view,
a few steps that lower the loss, a checkpoint that loads and runs in the engine, resume."""

import json

import mlx.core as mx
import numpy as np
import pytest

from dflash import train as T
from dflash.config import GenerationConfig
from dflash.drafter import Drafter, load_drafter
from dflash.engine import stream
from dflash.load import Pair
from dflash.target import Target
from dflash.train.loop import _Run, _split, _start
from tests.tiny import CONFIGS, EOS, VOCAB, FakeTokenizer, tiny_model


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    model = tiny_model("llama")
    tok = FakeTokenizer()
    prompts = [("a", "hello there"), ("b", "what is up"), ("a", "tell me more"), ("b", "x"),
               ("a", "abc def"), ("b", "qrs tuv wxy"), ("a", "one two"), ("b", "zzz")] * 2
    ds = T.generate_data(model, tok, prompts, tmp / "data.npz", max_new_tokens=24, batch_size=8,
                         progress=lambda s: None)
    return tmp, model, tok, ds


def cfg_for(out, **kw):
    base = dict(out=str(out), layers=2, intermediate_size=64, taps=[0, 2], block_size=8,
                mask_token_id=VOCAB - 1, init="random", batch_seqs=4, anchors=4, steps=30,
                lr=3e-3, warmup=0.1, val_frac=0.25, save_every=15, log_every=5, compile=False)
    return T.TrainConfig(**{**base, **kw})


def test_data_is_prompt_plus_greedy_answer(setup):
    tmp, model, tok, ds = setup
    assert len(ds) == 16 and ds.meta["complete"]
    again = T.Dataset.load(tmp / "data.npz")
    np.testing.assert_array_equal(again.tokens, ds.tokens)
    assert list(ds.seq(0)[: ds.prompt_lens[0]]) == tok.encode("hello there")  # no chat template
    # every row of the left-padded lockstep batch is that prompt's own greedy answer, alone
    pair = Pair(Target(model, "llama", []), None, tok, "tiny", None)
    assert len(set(ds.prompt_lens.tolist())) > 3  # rows really were padded
    check_greedy_rows(ds, pair, stop=EOS)


def test_rows_stop_at_their_own_stop_token(setup, tmp_path):
    """With a stop token the tiny target really emits, rows end at different steps."""
    _, model, _, ds = setup
    tok = FakeTokenizer()
    tok.eos_token_ids = {int(ds.seq(0)[ds.prompt_lens[0] + 5])}
    prompts = [("a", p) for p in ("hello there", "what is up", "x", "qrs tuv wxy", "one two", "zzz")]
    again = T.generate_data(model, tok, prompts, tmp_path / "d.npz", 24, 4, progress=lambda s: None)
    pair = Pair(Target(model, "llama", []), None, tok, "tiny", None)
    stopped = check_greedy_rows(again, pair, stop=min(tok.eos_token_ids))
    assert 0 < stopped < len(again)


def test_partial_file_read_by_two_trainers(setup, tmp_path, monkeypatch):
    """Two trainers given one partial token file and no time to generate (the GPU runs, one per
    GPU) both read it; neither may write it (they raced on one temporary file: a crash)."""
    _, model, tok, _ = setup
    prompts = [("a", p) for p in ("hello there", "what is up", "x", "qrs tuv wxy")]
    path = tmp_path / "d.npz"
    part = T.generate_data(model, tok, prompts[:2], path, 24, 2, progress=lambda s: None)
    part.meta["complete"] = False  # as a run stopped at its time limit leaves it
    part.save(path)
    before = path.read_bytes()

    def refuse(self, p):
        raise AssertionError(f"rewrote {p}")

    with monkeypatch.context() as m:
        m.setattr(T.Dataset, "save", refuse)
        ds = T.generate_data(model, tok, prompts, path, 24, 2, time_limit=0, progress=lambda s: None)
    assert len(ds) == 2 and not ds.meta["complete"] and path.read_bytes() == before
    done = T.generate_data(model, tok, prompts, path, 24, 2, progress=lambda s: None)  # resumes
    assert len(done) == 4 and T.Dataset.load(path).meta["complete"]
    assert not list(tmp_path.glob("*.tmp.npz"))


def check_greedy_rows(ds, pair, stop: int) -> int:
    stopped = 0
    for i in range(len(ds)):
        prompt, answer = ds.seq(i)[: ds.prompt_lens[i]], ds.seq(i)[ds.prompt_lens[i] :].tolist()
        *_, t = stream(pair, prompt.tolist(), GenerationConfig(mode="target", max_tokens=24))
        if answer[-1] == stop:  # the stop token is kept in the data, not emitted by the engine
            answer, stopped = answer[:-1], stopped + 1
        assert answer == list(t.token_ids), i
    return stopped


def test_sampled_openings_then_greedy(setup, tmp_path):
    """--opening: each answer opens with 1..N sampled tokens that the token file counts as prompt;
    after them the answer is the target's own greedy continuation (the only tokens training learns)."""
    _, model, tok, ds = setup
    prompts = [("a", p) for p in ("hello there", "what is up", "x", "qrs tuv wxy", "one two", "zzz")] * 2

    def gen(name, seed):
        return T.generate_data(model, tok, prompts, tmp_path / name, 24, 4, progress=lambda s: None,
                               opening=3, temperature=1.5, seed=seed)

    a, again, other = gen("a.npz", 1), gen("b.npz", 1), gen("c.npz", 2)
    np.testing.assert_array_equal(a.tokens, again.tokens)  # seeded: a resumed file draws the same
    assert not np.array_equal(a.tokens, other.tokens)
    assert a.meta["opening"] == 3 and a.meta["complete"]
    pair = Pair(Target(model, "llama", []), None, tok, "tiny", None)
    n_open = []
    for i in range(len(a)):
        prompt = tok.encode(prompts[a.prompt_index[i]][1])
        seq = a.seq(i).tolist()
        k = int(a.prompt_lens[i]) - len(prompt)
        assert seq[: len(prompt)] == prompt and 1 <= k <= 3
        assert EOS not in seq[len(prompt) : len(prompt) + k]  # a stop token is never sampled
        rest = seq[a.prompt_lens[i]:]
        *_, t = stream(pair, seq[: a.prompt_lens[i]], GenerationConfig(mode="target", max_tokens=24 - k))
        assert (rest[:-1] if rest[-1] == EOS else rest) == list(t.token_ids), i
        n_open.append(k)
    assert len(set(n_open)) > 1
    # the openings really were sampled: some differ from the greedy answers of `setup`
    greedy = {tuple(ds.seq(j)[: ds.prompt_lens[j]]): ds.seq(j) for j in range(len(ds))}
    differ = [not np.array_equal(a.seq(i)[: a.prompt_lens[i]],
                                 greedy[tuple(tok.encode(prompts[a.prompt_index[i]][1]))][: a.prompt_lens[i]])
              for i in range(len(a))]
    assert any(differ)


def test_split_keeps_a_prompt_on_one_side(setup):
    _, _, _, ds = setup
    two = T.Dataset.concat([ds, ds])  # every prompt answered twice
    groups = np.concatenate([ds.prompt_index, ds.prompt_index])
    tr, va = _split(two, 0.25, 0, groups)
    assert len(va) and set(groups[tr]).isdisjoint(groups[va])
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(len(two)))
    assert not set(groups[_split(two, 0.25, 0)[0]]).isdisjoint(groups[_split(two, 0.25, 0)[1]])


@pytest.mark.parametrize("window", [None, 5, 12])
def test_training_forward_matches_the_engine_view(setup, window):
    """A training row (anchor a, context < a) gives the same logits as the engine's drafter
    after prefilling the first a tokens; with sliding layers (a window shorter than the block,
    one crossing the context) too."""
    _, model, tok, ds = setup
    target = Target(model, "llama", [0, 2])
    args = T.drafter_args_for(target, tok, cfg_for("x"))
    if window:
        args.layer_types, args.sliding_window = ["sliding_attention", "full_attention"], window
    drafter = Drafter(args)
    drafter.set_dtype(mx.float32)
    b = T.sample_blocks(ds, np.array([0, 1]), np.random.default_rng(0), 64, 8, 3, VOCAB - 1, 0)
    feats = T.target_features(target, mx.array(b["ids"]))
    h = T.drafter_forward(drafter, T.FrozenIO(target), feats, mx.array(b["block"]), mx.array(b["anchors"]),
                          mx.array(b["rows"]))
    for r in (0, 4):
        a, s = int(b["anchors"][r]), int(b["rows"][r])
        cache = drafter.make_cache()
        _, f, _ = target.forward(mx.array(b["ids"][s : s + 1, :a]), target.make_cache())
        drafter.extend_context(f, cache)
        ref = drafter(target.embed(mx.array(b["block"][r : r + 1])), cache)
        np.testing.assert_allclose(np.array(h[r]), np.array(ref[0]), atol=1e-4)


def test_train_lowers_loss_saves_loads_and_resumes(setup):
    tmp, model, tok, ds = setup
    out = tmp / "run"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(out, steps=20), progress=lambda s: None)
    log = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines()]
    train_losses = [r["loss"] for r in log if "split" not in r]
    assert train_losses[-1] < train_losses[0]
    assert len(log[0]["acc"]) == 7 and 1 <= log[0]["tau_est"] <= 8

    drafter = load_drafter(out)  # the exported checkpoint, float16
    assert drafter.args.target_layer_ids == [0, 2] and drafter.mask_token_id == VOCAB - 1
    pair = Pair(Target(model, "llama", [0, 2]), drafter, tok, "tiny", str(out))
    *_, d = stream(pair, [5, 6, 7], GenerationConfig(max_tokens=20))
    *_, t = stream(pair, [5, 6, 7], GenerationConfig(mode="target", max_tokens=20))
    assert d.token_ids == t.token_ids and d.tau >= 1

    # 10 steps + resume for 10 more == 20 steps in one go
    part = tmp / "part"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(part, steps=20, stop_after=10),
            progress=lambda s: None)
    assert json.loads((part / T.CKPT_DIR / "state.json").read_text())["step"] == 10
    T.train(Target(model, "llama", []), tok, ds, cfg_for(part, steps=0), resume=True,
            progress=lambda s: None)
    a, b = (mx.load(str(d / T.CKPT_DIR / "weights.safetensors")) for d in (out, part))
    for k in a:
        np.testing.assert_allclose(np.array(a[k]), np.array(b[k]), atol=1e-6, err_msg=k)


def test_bf16_with_cached_features(setup):
    tmp, model, tok, ds = setup
    out = tmp / "bf16"
    T.train(Target(model, "llama", []), tok, ds,
            cfg_for(out, steps=20, dtype="bfloat16", cache_features=True), progress=lambda s: None)
    log = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines() if "split" not in l]
    assert log[-1]["loss"] < log[0]["loss"]
    w = mx.load(str(out / T.CKPT_DIR / "weights.safetensors"))
    assert all(v.dtype == mx.float32 for v in w.values())  # master weights


def test_evaluate_and_cli_eval(setup, tmp_path):
    _, model, tok, ds = setup
    out = tmp_path / "run"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(out, steps=4), progress=lambda s: None)
    pair = Pair(Target(model, "llama", [0, 2]), load_drafter(out), tok, "tiny", str(out))
    res = T.evaluate(pair, [("chat", "hi"), ("code", "def"), ("code", "abc")], 16,
                     progress=lambda s: None)
    assert set(res["categories"]) == {"chat", "code"}
    assert res["overall"]["identical"] == 3 and res["overall"]["tau"] >= 1
    assert [r["category"] for r in res["per_prompt"]] == ["chat", "code", "code"]
    code = res["categories"]["code"]
    assert sum(r["cycles"] for r in res["per_prompt"][1:]) == code["cycles"]
    assert 1 + sum(r["accepted"] for r in res["per_prompt"][1:]) / code["cycles"] == code["tau"]
    assert "tau" in T.format_eval(res)


def test_lr_schedule_and_parser():
    c = T.TrainConfig(out="x", lr=1.0, warmup=0.1, min_lr_ratio=0.1)
    assert T.lr_at(c, 0, 100) == pytest.approx(0.01)
    assert T.lr_at(c, 10, 100) == pytest.approx(1.0)
    assert T.lr_at(c, 100, 100) == pytest.approx(0.1)
    a = T.build_parser().parse_args(["--out", "o", "--taps", "1,7", "--eval"])
    assert a.taps == [1, 7] and a.eval.endswith("eval.jsonl")


def test_training_needs_prompt_files(tmp_path, capsys):
    """No default prompt set ships with the product: training without --prompts is a usage error
    (exit 2, before any target loads), evaluation is not."""
    with pytest.raises(SystemExit) as e:
        T.main(["--out", str(tmp_path / "run")])
    assert e.value.code == 2 and "--prompts" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def tiny_model_dir(model_dir):
    """A tiny llama target saved as a model directory with a word-level tokenizer (t0..t63)."""
    from mlx.utils import tree_flatten
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model_dir.mkdir()
    mx.save_safetensors(str(model_dir / "model.safetensors"),
                        dict(tree_flatten(tiny_model("llama").parameters())))
    (model_dir / "config.json").write_text(json.dumps(dict(CONFIGS["llama"], eos_token_id=EOS)))
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=f"t{EOS}").save_pretrained(str(model_dir))


def test_cli_trains_and_evaluates_a_model_directory(tmp_path):
    model_dir, run = tmp_path / "model", str(tmp_path / "run")
    tiny_model_dir(model_dir)
    prompts, more = tmp_path / "p.jsonl", tmp_path / "more.jsonl"
    prompts.write_text("".join(json.dumps({"category": c, "prompt": p}) + "\n" for c, p in
                               [("a", "t5 t9"), ("b", "t7 t30 t31"), ("a", "t10"), ("b", "t11")] * 3))
    more.write_text("".join(json.dumps({"category": "c", "prompt": p}) + "\n" for p in ("t3 t4", "t12")))
    common = ["--target", str(model_dir), "--out", run, "--prompts", str(prompts), str(more)]
    assert T.main(common + ["--max-new-tokens", "16", "--layers", "1", "--block-size", "4",
                            "--mask-token-id", "63", "--taps", "0,2", "--steps", "5",
                            "--batch-seqs", "2", "--anchors", "2", "--no-compile"]) == 0
    # one token file per prompt file, trained on together
    parts = [T.Dataset.load(tmp_path / "run" / f"data-{n}.npz") for n in ("p", "more")]
    assert [len(d) for d in parts] == [12, 2] and all(d.meta["complete"] for d in parts)
    state = json.loads((tmp_path / "run" / T.CKPT_DIR / "state.json").read_text())
    assert [m["n_prompts"] for m in state["data"]["parts"]] == [12, 2]
    with pytest.raises(SystemExit):
        T.main(common + ["--data", str(tmp_path / "only-one.npz"), "--generate-only"])
    fu = tmp_path / "fu.jsonl"  # data reused; only answers that ended on a stop token get one
    assert T.main(common + ["--generate-only", "--write-follow-ups", str(fu)]) == 0
    ended = sum(int(d.seq(j)[-1]) == EOS and len(d.seq(j)) > d.prompt_lens[j] for d in parts
                for j in range(len(d)))
    recs = [json.loads(l) for l in fu.read_text().splitlines()]
    assert len(recs) == ended and all(r["messages"][-1]["role"] == "user" for r in recs)
    assert T.main(common + ["--eval", str(prompts), "--eval-limit", "1", "--eval-max-tokens", "8"]) == 0
    res = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert res["overall"]["prompts"] == 2 and res["overall"]["identical"] == 2


def test_cli_validates_on_its_own_prompt_file(tmp_path, capsys):
    """--val-prompts: validation is exactly the answers to that file, minus prompts training has."""
    from dflash.train.loop import _split

    model_dir, run = tmp_path / "model", tmp_path / "run"
    tiny_model_dir(model_dir)
    train_p, val_p = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    write = lambda path, ps: path.write_text("".join(json.dumps({"category": "a", "prompt": p}) + "\n"
                                                     for p in ps))
    write(train_p, ["t5 t9", "t7 t30 t31", "t10", "t11", "t12 t13", "t14", "t15 t16", "t17"])
    write(val_p, ["t20 t21", "T5, t9!", "t22", "t23 t24"])  # the second is a training prompt
    assert T.main(["--target", str(model_dir), "--out", str(run), "--prompts", str(train_p),
                   "--val-prompts", str(val_p), "--max-new-tokens", "12", "--layers", "1",
                   "--block-size", "4", "--mask-token-id", "63", "--taps", "0,2", "--steps", "2",
                   "--batch-seqs", "2", "--anchors", "2", "--no-compile"]) == 0
    data, val = T.Dataset.load(run / "data.npz"), T.Dataset.load(run / "val-v.npz")
    assert len(data) == 8 and len(val) == 3  # the repeated prompt left out
    usable = lambda d: int((d.lengths - d.prompt_lens >= 2).sum())
    assert f"{usable(data)} train / {usable(val)} val sequences" in capsys.readouterr().err
    ds = T.Dataset.concat([data, val])
    tr, va = _split(ds, 0.5, 0, None, np.arange(len(ds)) >= len(data))
    assert set(va) <= set(range(8, 11)) and set(tr) <= set(range(8))

    # a run that generates nothing more (--gen-time-limit 0) still answers the validation file
    common = ["--target", str(model_dir), "--prompts", str(train_p), "--data", str(run / "data.npz"),
              "--max-new-tokens", "12", "--layers", "1", "--block-size", "4", "--mask-token-id", "63",
              "--taps", "0,2", "--steps", "2", "--batch-seqs", "2", "--anchors", "2", "--no-compile",
              "--gen-time-limit", "0"]
    assert T.main(common + ["--out", str(tmp_path / "again"), "--val-prompts", str(val_p)]) == 0
    assert len(T.Dataset.load(tmp_path / "again" / "val-v.npz")) == 3
    # a validation file with nothing left to validate on is an error, not a random split
    write(val_p, ["t5 t9", "T10."])
    with pytest.raises(SystemExit, match="no answers to validate on"):
        T.main(common + ["--out", str(tmp_path / "none"), "--val-prompts", str(val_p)])


def test_cached_features_equal_computed_ones(setup):
    """The cache is kept in parts of S sequences; any sequence (last, partial part included)
    reads back the features a fresh pass computes."""
    _, model, _, ds = setup
    target = Target(model, "llama", [0, 2])
    cached = T.Features(target, ds, 64, 5, 0, cache=True, progress=lambda s: None)
    fresh = T.Features(target, ds, 64, 5, 0, cache=False, progress=lambda s: None)
    seqs = np.array([15, 0, 7, 4])
    ids = T.pad_ids(ds, seqs, 64, 0)
    np.testing.assert_allclose(np.array(cached(seqs, ids)), np.array(fresh(seqs, ids).astype(mx.float16)),
                               atol=1e-3)


def test_draft_vocab_is_the_most_frequent_answer_tokens(setup, tmp_path):
    _, model, tok, ds = setup
    ids = T.draft_vocab_from(ds, 5)
    answers = np.concatenate([ds.seq(i)[ds.prompt_lens[i]:] for i in range(len(ds))])
    counts = np.bincount(answers)
    assert len(ids) == 5 and counts[ids].min() >= np.sort(counts)[-5]
    assert counts[ids[0]] == counts.max()
    out = tmp_path / "run"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(out, steps=2, draft_vocab=5),
            progress=lambda s: None)
    assert load_drafter(out).vocab.ids.tolist() == ids.tolist()


def test_walk_replays_the_engine_cycles(setup, tmp_path):
    """Acceptance at every anchor, walked cycle by cycle, gives the engine's own acceptance
    lengths on the target's greedy answers; validation logs that tau(walk)."""
    _, model, tok, ds = setup
    out = tmp_path / "run"
    drafter = T.train(Target(model, "llama", []), tok, ds, cfg_for(out, steps=60, lr=1e-2),
                      progress=lambda s: None)
    val = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines() if '"val"' in l]
    assert val and all(1 <= r["tau_walk"] <= r["tau_est"] + 1e-9 for r in val)
    target = Target(model, "llama", [0, 2])
    io, seqs, L, accepted = T.FrozenIO(target), np.arange(len(ds)), 64, {}
    feats = T.target_features(target, mx.array(T.pad_ids(ds, seqs, L, 0)))
    for keys, b in T.every_anchor(ds, seqs, L, 8, 32, VOCAB - 1, 0):
        n = T.accept_lengths(drafter, io, feats, *[mx.array(b[k]) for k in
                                                   ("block", "labels", "valid", "anchors", "rows")])
        accepted.update(zip(keys, n.tolist()))
    pair = Pair(target, drafter, tok, "tiny", None)
    total = 0
    for i in seqs:
        answer = ds.seq(i)[ds.prompt_lens[i]:].tolist()
        n = len(answer) - (answer[-1] == EOS)  # the engine does not emit the stop token
        *_, d = stream(pair, ds.seq(i)[: ds.prompt_lens[i]].tolist(), GenerationConfig(max_tokens=n, block_size=drafter.block_size))
        w, e = T.walk(ds, i, accepted, L), list(d.acceptance_lengths)
        # the last cycle may accept drafts past the answer's end, which the data cannot show
        assert w[:-1] == e[:-1] and len(w) == len(e) and w[-1] <= e[-1], i
        total += sum(w)
    assert total > 0  # the drafter learned something: the comparison is not all zeros
    assert T.walk_tau(ds, seqs, accepted, L) == pytest.approx(
        1 + total / sum(len(T.walk(ds, i, accepted, L)) for i in seqs))


def test_init_from_a_drafter_directory(setup, tmp_path):
    """--init DIR starts from that drafter (architecture and weights), and refuses a misfit."""
    from mlx.utils import tree_flatten

    _, model, tok, ds = setup
    first = tmp_path / "first"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(first, steps=5, layers=1), progress=lambda s: None)
    cfg = cfg_for(tmp_path / "next", init=str(first))  # layers=2 in cfg: the directory's 1 wins
    drafter, *_ = _start(Target(model, "llama", []), tok, cfg, False, lambda s: None)
    src = dict(tree_flatten(load_drafter(first).parameters()))
    got = dict(tree_flatten(drafter.parameters()))
    assert len(drafter.layers) == 1 and got.keys() == src.keys()
    for k in src:
        assert got[k].dtype == mx.float32
        np.testing.assert_array_equal(np.array(got[k]), np.array(src[k].astype(mx.float32)))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps(dict(json.loads((first / "config.json").read_text()),
                                                     num_target_layers=9)))
    (bad / "model.safetensors").write_bytes((first / "model.safetensors").read_bytes())
    with pytest.raises(ValueError, match="does not fit"):
        _start(Target(model, "llama", []), tok, cfg_for(tmp_path / "n2", init=str(bad)), False,
                 lambda s: None)


def test_grow_drafts_as_before_then_trains_the_new_layers(setup, tmp_path):
    """--grow N appends N layers to a trained drafter: the grown one drafts the very tokens the
    trained one drafted, every cycle; training then moves the new layers, and the saved drafter
    loads with them."""
    from dflash.engine import Cycle

    _, model, tok, ds = setup
    first = tmp_path / "first"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(first, steps=5, layers=1), progress=lambda s: None)
    cfg = cfg_for(tmp_path / "grown", init=str(first), grow=2, steps=4, save_every=4)
    grown, *_ = _start(Target(model, "llama", []), tok, cfg, False, lambda s: None)
    assert len(grown.layers) == 3 and grown.args.num_hidden_layers == 3
    assert len(grown.args.layer_types or [None] * 3) == 3

    def drafts(drafter):
        pair = Pair(Target(model, "llama", [0, 2]), drafter, tok, "tiny", None)
        cycles = [e for e in stream(pair, [5, 6, 7], GenerationConfig(max_tokens=24, block_size=8))
                  if isinstance(e, Cycle)]
        return [c.drafted for c in cycles]

    before = drafts(load_drafter(first, dtype=mx.float32))
    assert sum(len(d) for d in before) > 0 and drafts(grown) == before

    T.train(Target(model, "llama", []), tok, ds, cfg, progress=lambda s: None)
    saved = load_drafter(tmp_path / "grown", dtype=mx.float32)
    assert len(saved.layers) == 3
    assert float(mx.abs(saved.layers[2].self_attn.o_proj.weight).max()) > 0  # it trained
    with pytest.raises(SystemExit):
        T.main(["--target", "x", "--out", str(tmp_path / "bad"), "--grow", "2", "--init", "target"])


def test_window_trains_and_ships_with_the_drafter(setup, tmp_path):
    """--window W gives every layer the context's last W positions in the training steps and in
    the saved config; the engine then drafts with it and stays lossless; 0 is the whole context."""
    _, model, tok, ds = setup
    first = tmp_path / "first"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(first, steps=3), progress=lambda s: None)
    out = tmp_path / "w"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(out, init=str(first), window=3, steps=3),
            progress=lambda s: None)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["sliding_window"] == 3 and cfg["layer_types"] == ["sliding_attention"] * 2
    drafter = load_drafter(out)
    assert [l.self_attn.window for l in drafter.layers] == [3, 3]
    pair = Pair(Target(model, "llama", [0, 2]), drafter, tok, "tiny", str(out))
    *_, d = stream(pair, [5, 6, 7, 8, 9, 10], GenerationConfig(max_tokens=20, block_size=8))
    *_, t = stream(pair, [5, 6, 7, 8, 9, 10], GenerationConfig(mode="target", max_tokens=20))
    assert d.text == t.text and d.cycles < 20  # it drafted, past its 3-position window
    for w, want in ((0, None), (5, 5)):  # what the training steps' masks read (blocks.context_mask)
        d, *_ = _start(Target(model, "llama", []), tok, cfg_for(tmp_path / f"w{w}", init=str(out), window=w),
                       False, lambda s: None)
        assert [l.self_attn.window for l in d.layers] == [want, want]


def test_follow_up_conversations(tmp_path):
    """A second user turn after each answer that ended on its own; the conversation reads back
    from a prompt file and encodes through the chat template with the answer's own tokens."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from dflash.load import encode_prompt

    wl = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = TokenizerWrapper(PreTrainedTokenizerFast(
        tokenizer_object=wl, eos_token=f"t{EOS}",
        chat_template="{% for m in messages %}t2 {{ m['content'] }} t3 {% endfor %}t2"))
    prompts = [("a", "t5 t9"), ("b", "t7")]
    ds = T.Dataset.from_lists([[2, 5, 9, 3, 2, 11, 12, EOS], [2, 7, 3, 2, 13, 14]], [5, 4], [0, 1],
                              ["a", "b"], {})
    recs = T.follow_ups(ds, prompts, tok)
    assert len(recs) == 1  # the second answer hit the length cap: no follow-up
    turns = recs[0]["messages"]
    assert recs[0]["category"] == "a" and [m["role"] for m in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"] == "t5 t9" and turns[1]["content"] == "t11 t12"
    assert turns[2]["content"] in T.FOLLOW_UPS
    path = tmp_path / "fu.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (cat, back), = T.read_prompts(path)
    assert cat == "a" and back == turns
    ids = encode_prompt(tok, [dict(m, content="t20") if m["role"] == "user" and i else m
                              for i, m in enumerate(back)])
    assert ids == [2, 5, 9, 3, 2, 11, 12, 3, 2, 20, 3, 2]
    with pytest.raises(ValueError, match="chat template"):
        encode_prompt(FakeTokenizer(), back)
    path.write_text(json.dumps({"category": "a", "messages": turns[:2]}) + "\n")
    with pytest.raises(ValueError, match="ending with a user turn"):
        T.read_prompts(path)


def test_prompt_lines_split_on_newlines_only(tmp_path):
    """A JSONL line ends at a newline: a raw U+2028 or U+0085 inside a prompt (JSON allows them
    unescaped; ShareGPT has them) stays in the prompt instead of splitting its line in two."""
    text = "first part\u2028second part\u0085third"
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"category": "c", "prompt": text}, ensure_ascii=False) + "\r\n"
                    + json.dumps({"prompt": "next"}) + "\n", encoding="utf-8")
    assert T.read_prompts(path) == [("c", text), ("default", "next")]


def test_rank_batches_split_each_epoch():
    ids = np.arange(100, 150)
    assert (T.rank_batch(ids, 3, 8, 0) == T.rank_batch(ids, 3, 8, 0, W=1, rank=0)).all()
    # 50 sequences, 2 processes x 8: 3 steps an epoch, 6 disjoint batches, then a new permutation
    seen = [T.rank_batch(ids, step, 8, 0, W=2, rank=r) for step in range(3) for r in range(2)]
    flat = np.concatenate(seen)
    assert all(len(b) == 8 for b in seen) and len(set(flat.tolist())) == 48
    assert set(flat.tolist()) <= set(ids.tolist())
    assert not (T.rank_batch(ids, 3, 8, 0, W=2, rank=0) == seen[0]).all()


_RANK = """
import json, sys
sys.path.insert(0, {root!r})
import mlx.core as mx
from dflash import train as T
from dflash.target import Target
from tests.test_train import cfg_for
from tests.tiny import FakeTokenizer, tiny_model
ds = T.Dataset.load({data!r})
cfg = cfg_for({out!r}, steps=8, save_every=4, compile=True, distributed="ring")
d = T.train(Target(tiny_model("llama"), "llama", []), FakeTokenizer(), ds, cfg, progress=print)
w = dict(__import__("mlx.utils", fromlist=["x"]).tree_flatten(d.parameters()))
print("SUM", json.dumps([float(w[k].astype(mx.float32).sum()) for k in sorted(w)]))
"""


@pytest.mark.slow
def test_data_parallel_over_two_processes(setup, tmp_path):
    """Two processes (mx.distributed's ring backend on this CPU) train one drafter: both end with
    the same weights, only rank 0 logs and writes, and the result is not the one-process run."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    tmp, model, tok, ds = setup
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in ports]))
    out = tmp_path / "dp"
    code = _RANK.format(root=str(Path(__file__).parents[1]), data=str(tmp / "data.npz"), out=str(out))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=dict(os.environ, MLX_RANK=str(r), MLX_HOSTFILE=str(hostfile)))
             for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sums = [json.loads(next(l for l in o.splitlines() if l.startswith("SUM"))[4:]) for o in outs]
    assert sums[0] == sums[1]
    assert "on each of 2 processes" in outs[0] and "done at step 8/8" in outs[0]
    assert "done at step" not in outs[1]  # rank 1 says nothing
    log = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines()]
    assert [r["step"] for r in log if "split" not in r] == [5, 8]  # one writer
    assert [r["step"] for r in log if r.get("split") == "val"] == [4, 8]
    assert json.loads((out / T.CKPT_DIR / "state.json").read_text())["processes"] == 2

    alone = tmp_path / "alone"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(alone, steps=8, save_every=4, compile=True),
            progress=lambda s: None)
    a, b = (mx.load(str(d / T.CKPT_DIR / "weights.safetensors")) for d in (out, alone))
    assert any(not np.allclose(np.array(a[k]), np.array(b[k])) for k in a)


def test_layer_forward_is_the_engines_layer_plus_dropout(setup):
    """--dropout's training forward must be the engine's DecoderLayer with drops added: p = 0 is
    the layer itself, and with the drops made identity it computes the same sums."""
    from dflash.train import blocks

    drafter = Drafter(T.drafter_args_for(Target(setup[1], "llama", [0, 2]), setup[2], cfg_for("x")))
    drafter.set_dtype(mx.float32)
    layer, H = drafter.layers[0], drafter.args.hidden_size
    mx.random.seed(3)
    h, ctx = mx.random.normal((2, 8, H)), mx.random.normal((1, 5, H))
    k, v = layer.self_attn.kv(ctx, 0)
    k, v, offset = mx.repeat(k, 2, 0), mx.repeat(v, 2, 0), mx.array([5, 3])
    mask = mx.concatenate([mx.arange(5)[None] < offset[:, None], mx.ones((2, 8), mx.bool_)], 1)
    mask = mask[:, None, None, :]
    ref = layer(h, k, v, offset, mask)
    assert mx.array_equal(blocks.layer_forward(layer, h, k, v, offset, mask, 0.0), ref)
    dropped = blocks.layer_forward(layer, h, k, v, offset, mask, 0.5)
    assert not mx.allclose(dropped, ref, atol=1e-3)
    orig = blocks.dropout
    try:
        blocks.dropout = lambda x, p: x
        assert mx.allclose(blocks.layer_forward(layer, h, k, v, offset, mask, 0.5), ref, atol=1e-6)
    finally:
        blocks.dropout = orig
    kept = np.array(blocks.dropout(mx.ones((200, 200)), 0.25))
    assert set(np.unique(kept)) == {0.0, np.float32(1 / 0.75)}
    assert abs((kept == 0).mean() - 0.25) < 0.02


def test_compiled_steps_draw_new_dropout_masks_and_validation_none(setup):
    """With --dropout the compiled step draws fresh masks every call (the random state is part of
    its state), and validation's loss is the drafter's own, the same every call."""
    import mlx.optimizers as optim

    from dflash.train.loop import _step_functions

    _, model, tok, ds = setup
    target = Target(model, "llama", [0, 2])
    cfg = cfg_for("x", dropout=0.3, compile=True)
    drafter = Drafter(T.drafter_args_for(target, tok, cfg))
    drafter.set_dtype(mx.float32)
    opt = optim.AdamW(learning_rate=0.0, weight_decay=0.0)
    opt.init(drafter.trainable_parameters())
    step_fn, eval_fn, _, _ = _step_functions(drafter, opt, T.FrozenIO(target), cfg, mx.float32)
    b = T.sample_blocks(ds, np.arange(4), np.random.default_rng(0), 64, 8, 4, VOCAB - 1, 0)
    batch = [T.target_features(target, mx.array(b["ids"]))] + [mx.array(b[k]) for k in T.BLOCK_KEYS]
    plain, _ = T.block_loss(drafter, T.FrozenIO(target), *batch, weights=T.position_weights(8, 7.0))
    evals = [eval_fn(*batch)[0].item() for _ in range(2)]
    assert evals[0] == evals[1] == pytest.approx(plain.item(), rel=1e-5)
    steps = [step_fn(*batch)[0].item() for _ in range(3)]  # lr 0: the weights stay
    assert len(set(steps)) == 3 and all(s != pytest.approx(plain.item(), rel=1e-4) for s in steps)


def test_train_with_dropout(setup, tmp_path):
    _, model, tok, ds = setup
    out = tmp_path / "drop"
    T.train(Target(model, "llama", []), tok, ds, cfg_for(out, steps=20, dropout=0.1, compile=True),
            progress=lambda s: None)
    log = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines()]
    train_losses = [r["loss"] for r in log if "split" not in r]
    assert train_losses[-1] < train_losses[0] and json.loads((out / T.CKPT_DIR / "state.json").read_text())["config"]["dropout"] == 0.1
    with pytest.raises(SystemExit) as e:
        T.main(["--out", str(tmp_path / "bad"), "--dropout", "1"])
    assert e.value.code == 2 and not (tmp_path / "bad").exists()


def test_revealed_prefixes_show_true_tokens_and_carry_no_loss(setup):
    """--reveal: a share of the blocks hold their first 1..(B-1)/2 labels in place of MASK, with no
    loss there and at least one label left; the others, and reveal 0, are the usual blocks."""
    _, model, tok, ds = setup
    seqs, mask = np.arange(8), VOCAB - 1
    plain = T.sample_blocks(ds, seqs, np.random.default_rng(5), 64, 8, 6, mask, 0)
    same = T.sample_blocks(ds, seqs, np.random.default_rng(5), 64, 8, 6, mask, 0, reveal=0.0)
    assert all(np.array_equal(plain[k], same[k]) for k in plain)
    b = T.sample_blocks(ds, seqs, np.random.default_rng(5), 64, 8, 6, mask, 0, reveal=0.6)
    assert np.array_equal(b["anchors"], plain["anchors"]) and np.array_equal(b["labels"], plain["labels"])
    shown = (b["block"][:, 1:] != mask).sum(1)
    assert 0 < (shown > 0).mean() < 1 and shown.max() <= 3  # (8 - 1) // 2
    for r in range(len(shown)):
        k = shown[r]
        assert np.array_equal(b["block"][r, 1 : k + 1], b["labels"][r, :k])  # a prefix, true tokens
        assert (b["block"][r, k + 1 :] == mask).all() and not b["valid"][r, :k].any()
        assert np.array_equal(b["valid"][r, k:], plain["valid"][r, k:]) and b["valid"][r].sum() >= 1


def test_train_with_revealed_prefixes(setup, tmp_path):
    _, model, tok, ds = setup
    out = tmp_path / "reveal"
    T.train(Target(model, "llama", [0, 2]), tok, ds, cfg_for(out, steps=20, reveal=0.5), progress=lambda s: None)
    log = [json.loads(l) for l in (out / T.LOG_FILE).read_text().splitlines()]
    train_losses = [r["loss"] for r in log if "split" not in r]
    assert train_losses[-1] < train_losses[0]
    assert json.loads((out / T.CKPT_DIR / "state.json").read_text())["config"]["reveal"] == 0.5
    # validation keeps the engine's all-MASK blocks whatever the training shows
    runs = [_Run(Target(model, "llama", [0, 2]), tok, ds, cfg_for(tmp_path / f"v{p}", reveal=p), False,
                 lambda s: None, None, None) for p in (0.0, 1.0)]
    assert runs[0].validate() == runs[1].validate()
    with pytest.raises(SystemExit) as e:
        T.main(["--out", str(tmp_path / "bad"), "--reveal", "1.5"])
    assert e.value.code == 2 and not (tmp_path / "bad").exists()


def test_a_batch_is_padded_to_its_own_length(setup, tmp_path, monkeypatch):
    """A batch pads to its longest sequence (rounded up to LENGTH_BUCKET), not to the data set's
    longest, and its loss is the one the data set's length gives: the padding is never seen."""
    from dflash.train import loop

    _, model, tok, ds = setup
    run = _Run(Target(model, "llama", [0, 2]), tok, ds, cfg_for(tmp_path), False, lambda s: None, None, None)
    lens = np.diff(ds.offsets)
    short = np.argsort(lens)[:4]
    assert lens[short].max() + 8 <= run.L  # room for a shorter pad
    monkeypatch.setattr(loop, "LENGTH_BUCKET", 8)
    own = run.length(short)
    assert own == -(-int(lens[short].max()) // 8) * 8 < run.L
    batches = {}
    for bucket in (8, 10**6):  # its own length, then the data set's (capped at L)
        monkeypatch.setattr(loop, "LENGTH_BUCKET", bucket)
        batches[bucket] = run.batch(short, np.random.default_rng(0))
    assert batches[8][0].shape[1] == own and batches[10**6][0].shape[1] == run.L
    for a, b in zip(batches[8][1:], batches[10**6][1:]):  # the same blocks, anchors and labels
        assert np.array_equal(np.array(a), np.array(b))
    losses = [run.eval_fn(*batches[k])[0].item() for k in (8, 10**6)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_grouped_batches_have_similar_lengths_and_cover_each_epoch():
    """--group-lengths: with one long answer in ten, random batches of 8 mostly hold a long one
    (each then pads to it); grouped, a step mixes long and short only where a sorted window
    turns, and an epoch still takes each sequence once, on disjoint ranks."""
    rng = np.random.default_rng(1)
    ids = np.arange(400)
    lengths = np.where(rng.random(400) < 0.1, 4000, 300)
    steps = len(ids) // 16  # S 8 x W 2

    def mixed(batches):
        return sum(len(set(lengths[b].tolist())) > 1 for b in batches)

    plain = [T.rank_batch(ids, s, 8, 0, W=2, rank=r) for s in range(steps) for r in range(2)]
    grouped = [T.rank_batch(ids, s, 8, 0, W=2, rank=r, lengths=lengths) for s in range(steps) for r in range(2)]
    from dflash.train.parallel import GROUP

    windows = -(-steps // GROUP)
    assert mixed(grouped) <= windows < mixed(plain)
    flat = np.concatenate(grouped)
    assert len(flat) == len(set(flat.tolist())) == steps * 16
    assert [b.tolist() for b in grouped] != [b.tolist() for b in plain]
    nxt = T.rank_batch(ids, steps, 8, 0, W=2, rank=0, lengths=lengths)  # a new epoch, a new order
    assert nxt.tolist() != grouped[0].tolist()


def test_train_with_grouped_lengths(setup, tmp_path):
    _, model, tok, ds = setup
    out = tmp_path / "grouped"
    T.train(Target(model, "llama", [0, 2]), tok, ds, cfg_for(out, steps=8, group_lengths=True), progress=lambda s: None)
    state = json.loads((out / T.CKPT_DIR / "state.json").read_text())
    assert state["step"] == 8 and state["config"]["group_lengths"] is True
    from dflash.train.cli import build_parser

    assert "--group-lengths" in build_parser().format_help()
