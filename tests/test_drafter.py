"""Drafter checkpoints: HF-layout round trip and every way a drafter can fail to fit."""

import json
import shutil

import mlx.core as mx
import pytest

from dflash.drafter import DrafterArgs, default_taps, load_drafter, save_drafter
from dflash.load import check_pair
from tests.tiny import VOCAB, tiny_drafter, tiny_pair


def draft_logits(drafter, target):
    cache = drafter.make_cache()
    _, feats, _ = target.forward(mx.array([[4, 5, 6, 7, 8]]), target.make_cache())
    drafter.extend_context(feats, cache)
    return drafter.propose(target, 9, drafter.block_size, cache)


def test_round_trip_same_logits(tmp_path):
    d = tiny_drafter(taps=(0, 2))
    pair = tiny_pair("qwen3", d)
    save_drafter(d, tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"] and cfg["block_size"] == 8
    assert cfg["dflash_config"] == {"mask_token_id": VOCAB - 1, "target_layer_ids": [0, 2]}
    names = set(mx.load(str(tmp_path / "model.safetensors")))
    assert {"fc.weight", "hidden_norm.weight", "norm.weight",
            "layers.0.self_attn.q_norm.weight", "layers.1.mlp.down_proj.weight"} <= names
    assert len(names) == 3 + 2 * 11  # 58 for a 5-layer drafter, as z-lab's
    again = load_drafter(tmp_path)
    assert mx.array_equal(draft_logits(d, pair.target), draft_logits(again, pair.target))


def test_short_verify_reads_the_whole_trained_block():
    """At a verify length k below the block size the drafter still fills its whole block (its
    positions attend to each other; training never saw a shorter block): the k-1 proposals are
    the first k-1 of the full block's, not those of a block cut to k."""
    d = tiny_drafter(taps=(0, 2))
    pair = tiny_pair("qwen3", d)
    t = pair.target
    _, feats, _ = t.forward(mx.array([[4, 5, 6, 7, 8]]), t.make_cache())

    def propose(k):
        cache = d.make_cache()
        d.extend_context(feats, cache)
        return d.propose(t, 9, k, cache)

    full = propose(d.block_size)
    short = propose(4)
    assert short.shape[0] == 3 and mx.array_equal(short, full[:3])
    cache = d.make_cache()
    d.extend_context(feats, cache)
    cut = t.logits(d(t.embed(mx.array([[9, d.mask_token_id, d.mask_token_id, d.mask_token_id]])), cache)[0, 1:])
    assert not mx.allclose(short, cut, atol=1e-4).item()


@pytest.mark.parametrize("host_draft", [True, False])
def test_a_windowed_cache_projects_only_what_a_draft_sees(host_draft, monkeypatch):
    """A drafter whose layers all have a window keeps (and projects) only the context's latest
    `window` positions, in one long extend or many short ones, and drafts what a cache of the
    whole context drafts, on the numpy and the MLX pass."""
    from dflash import backend
    from dflash.drafter import ContextCache

    if not host_draft:
        monkeypatch.setattr(backend, "uses", lambda name: name != "host_draft")
    d = tiny_drafter(taps=(0, 2), window=6)
    t = tiny_pair("qwen3", d).target
    _, feats, _ = t.forward(mx.array([list(range(3, 43))]), t.make_cache())  # 40 positions
    projected = []
    project = d.project
    d.project = lambda f: projected.append(f.shape[1]) or project(f)
    whole = [ContextCache() for _ in d.layers]  # keeps every position, as a full-attention drafter's
    d.extend_context(feats, whole)
    for cuts in ([40], [3, 30, 1, 6], [10, 2, 28]):
        cache, at = d.make_cache(), 0
        for n in cuts:
            d.extend_context(feats[:, at : at + n], cache)
            at += n
        assert [c.offset for c in cache] == [40, 40] and cache[0].keys_and_values()[0].shape[2] == 6
        assert mx.allclose(d.propose(t, 9, d.block_size, cache), d.propose(t, 9, d.block_size, whole),
                           atol=1e-5).item(), cuts
    from dflash.engine import DraftContext
    for cuts in ([40], [10, 20, 3, 7], [35, 5], [1] * 40):  # a prefill's chunks, plain steps
        context, at = DraftContext(d), 0
        for n in cuts:
            context.add(feats[:, at : at + n])
            at += n
        cache = context.cache()
        assert [c.offset for c in cache] == [40, 40] and cache[0].keys_and_values()[0].shape[2] == 6
        assert mx.allclose(d.propose(t, 9, d.block_size, cache), d.propose(t, 9, d.block_size, whole),
                           atol=1e-5).item(), cuts
    assert projected[1] == 6 and max(projected[1:]) <= 6  # never more rows than the window
    assert whole[0].keys_and_values()[0].shape[2] == 40


def test_default_taps_match_reference():
    assert default_taps(36, 5) == [1, 9, 17, 25, 33]


@pytest.mark.parametrize("change, message", [
    (dict(hidden_size=48), "hidden size"),
    (dict(vocab_size=VOCAB + 1), "vocab size"),
    (dict(num_target_layers=6), "6-layer target, this one has 4"),
    (dict(target_layer_ids=[0, 7]), r"target_layer_ids \[7\]"),
    (dict(mask_token_id=VOCAB + 5), "mask_token_id"),
])
def test_misfit_drafters_are_refused(change, message):
    d = tiny_drafter()
    for k, v in change.items():
        setattr(d.args, k, v)
    with pytest.raises(ValueError, match=message):
        check_pair(tiny_pair("llama").target, d)


def test_corrupt_or_missing_weights(tmp_path):
    save_drafter(tiny_drafter(), tmp_path / "ok")
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "ok", bad)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cannot read"):
        load_drafter(bad)

    (bad / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        load_drafter(bad)

    weights = mx.load(str(tmp_path / "ok" / "model.safetensors"))
    weights.pop("layers.1.mlp.up_proj.weight")
    mx.save_safetensors(str(bad / "model.safetensors"), weights)
    with pytest.raises(ValueError, match="do not match"):
        load_drafter(bad)

    weights["lm_head.weight"] = mx.zeros((VOCAB, 32))
    mx.save_safetensors(str(bad / "model.safetensors"), weights)
    with pytest.raises(ValueError, match="not a DFlash drafter"):
        load_drafter(bad)

    (bad / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_drafter(bad)
    (bad / "config.json").write_text(json.dumps({"hidden_size": 32}))
    with pytest.raises(ValueError, match="lacks required key"):
        load_drafter(bad)
    with pytest.raises(ValueError, match="no config.json"):
        load_drafter(tmp_path / "nowhere")


def test_draft_vocab_restricts_drafts_and_round_trips(tmp_path):
    """A draft vocabulary: logits outside it are -inf, inside equal the full head's; it is saved
    next to the checkpoint, loaded back, and refused when its ids do not fit the vocabulary."""
    import numpy as np

    from dflash.drafter import DraftVocab

    d = tiny_drafter(taps=(0, 2))
    pair = tiny_pair("qwen3", d)
    full = draft_logits(d, pair.target)
    ids = np.arange(0, VOCAB, 3, dtype=np.int32)
    d.vocab = DraftVocab(ids)
    sub = draft_logits(d, pair.target)
    inside = mx.array(ids)
    assert mx.allclose(sub[:, inside], full[:, inside], atol=1e-5)
    outside = mx.array(np.setdiff1d(np.arange(VOCAB), ids))
    assert mx.all(sub[:, outside] == -mx.inf)
    assert all(int(t) in set(ids.tolist()) for t in mx.argmax(sub, -1).tolist())

    save_drafter(d, tmp_path)
    again = load_drafter(tmp_path)
    assert mx.array_equal(draft_logits(again, pair.target), sub)
    np.save(tmp_path / DraftVocab.FILE, np.array([1, VOCAB + 3], dtype=np.int32))
    with pytest.raises(ValueError, match="expected token ids"):
        load_drafter(tmp_path)


@pytest.mark.parametrize("changes, says", [
    ({"rope_scaling": 5}, "rope_scaling must be an object"),
    ({"rope_scaling": {"type": "linear"}}, "rope_scaling {\"type\": \"linear\"} cannot be used (lacks 'factor')"),
    ({"rope_scaling": {"type": "linear", "factor": 0}}, "positive factor"),
    ({"rope_scaling": {"type": "yarn", "factor": float("inf")}}, "finite numbers"),
    ({"rope_scaling": {"type": "warp", "factor": 2}}, "Unsupported RoPE type warp"),
    ({"rope_parameters": {"rope_type": "linear"}}, "lacks 'factor'"),
    ({"layer_types": 7}, "layer_types must be a list of num_hidden_layers (2)"),
    ({"layer_types": ["full_attention"]}, "layer_types must be a list"),
    ({"layer_types": ["sliding_attention"] * 2}, "no sliding_window"),
    ({"sliding_window": -4}, "sliding_window must be a positive integer"),
    ({"rms_norm_eps": float("inf")}, "rms_norm_eps must be a positive number below 1"),
    ({"rms_norm_eps": 1e30}, "rms_norm_eps must be a positive number below 1"),
    ({"rope_theta": float("nan")}, "rope_theta must be a positive number"),
    ({"attention_bias": "yes"}, "attention_bias must be true or false"),
])
def test_config_values_that_cannot_run_are_one_line_errors(changes, says):
    """Each used to end in a traceback, or (an infinite eps) to run at 0 % acceptance."""
    cfg = tiny_drafter().args.to_config()
    DrafterArgs.from_config(cfg)  # the tiny drafter's own config is fine
    with pytest.raises(ValueError) as e:
        DrafterArgs.from_config({**cfg, **changes})
    assert says in str(e.value) and "\n" not in str(e.value)
