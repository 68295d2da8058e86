"""The drafter's block pass on a CPU with numpy's elementwise ops (host_draft.py): the same
hidden states as the MLX layers, used by the engine, and the MLX layers where it does not apply."""

import mlx.core as mx
import numpy as np
import pytest

from dataclasses import replace

from dflash import backend
from dflash.backends import host_draft
from dflash.config import GenerationConfig
from dflash.drafter import Drafter, DrafterArgs
from dflash.engine import stream
from dflash.events import Summary
from tests.tiny import HIDDEN, VOCAB, tiny_drafter, tiny_pair


def block_states(drafter, target, blocks, host: bool, monkeypatch):
    """The drafter's hidden states for each block after a context fed in two pieces."""
    monkeypatch.setattr(backend, "_active", replace(backend.active(), host_draft=host))
    _, feats, _ = target.forward(mx.array([[4, 5, 6, 7, 8, 9, 10]]), target.make_cache())
    cache = drafter.make_cache()
    drafter.extend_context(feats[:, :3], cache)
    drafter.extend_context(feats[:, 3:], cache)
    assert host_draft.runs(drafter) == host
    return [np.array(drafter(target.embed(mx.array([b])), cache)) for b in blocks]


def drafter_with(**changes):
    mx.random.seed(5)
    args = dict(hidden_size=HIDDEN, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=VOCAB, num_target_layers=4, mask_token_id=VOCAB - 1,
                target_layer_ids=[0, 2], block_size=8, head_dim=8, rope_theta=10000.0)
    d = Drafter(DrafterArgs(**{**args, **changes}))
    d.set_dtype(mx.float32)
    mx.eval(d.parameters())
    return d


@pytest.mark.parametrize("drafter", [
    pytest.param(lambda: tiny_drafter(taps=(0, 2)), id="gqa"),
    pytest.param(lambda: drafter_with(num_key_value_heads=4), id="mha"),
    pytest.param(lambda: drafter_with(attention_bias=True), id="biases"),
    # windows of 4 and 9 cross the 7-token context and the 8-token block
    pytest.param(lambda: drafter_with(layer_types=["sliding_attention", "full_attention"],
                                      sliding_window=4), id="sliding-4"),
    pytest.param(lambda: drafter_with(layer_types=["sliding_attention"] * 2, sliding_window=9), id="sliding-9"),
])
def test_host_pass_equals_the_mlx_layers(drafter, monkeypatch):
    d = drafter()
    pair = tiny_pair("qwen3", d)
    m = d.mask_token_id
    blocks = [[9] + [m] * 7, [11, m, m, m], [12, 13, m, m, m, m, m, m]]  # whole, cut, a path shown
    want = block_states(d, pair.target, blocks, False, monkeypatch)
    got = block_states(d, pair.target, blocks, True, monkeypatch)
    for w, g in zip(want, got):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=1e-4)


def test_layers_it_does_not_implement_stay_mlx(monkeypatch):
    monkeypatch.setattr(backend, "_active", replace(backend.active(), host_draft=True))
    sliding = drafter_with(layer_types=["sliding_attention", "full_attention"], sliding_window=4)
    scaled = drafter_with(rope_scaling={"type": "linear", "factor": 2.0})
    assert host_draft.runs(tiny_drafter()) and host_draft.runs(sliding)
    assert not host_draft.runs(scaled)


def test_the_engine_drafts_through_it_and_stays_lossless(monkeypatch):
    d = tiny_drafter(taps=(0, 2))
    pair = tiny_pair("llama", d)
    calls = []
    real = host_draft.forward
    monkeypatch.setattr(host_draft, "forward", lambda *a: calls.append(1) or real(*a))
    ids = [5, 9, 2, 14, 7]
    runs = {}
    for mode, tree in (("target", None), ("dflash", 0), ("dflash", 7)):
        cfg = GenerationConfig(mode=mode, max_tokens=40, tree=tree)
        runs[mode, tree] = next(e for e in stream(pair, ids, cfg) if isinstance(e, Summary))
    assert calls, "the engine's drafts did not use the host pass"
    target = runs["target", None].token_ids
    assert runs["dflash", 0].token_ids == target and runs["dflash", 7].token_ids == target


def test_a_sliding_layer_sees_the_context_s_last_window_positions():
    """The sliced keys plus their mask give what attending over the whole context with the
    sliding mask gives; a window wider than context + block changes nothing."""
    from dflash.drafter import sliding_mask
    full = drafter_with()
    wide = drafter_with(layer_types=["sliding_attention"] * 2, sliding_window=64)
    narrow = drafter_with(layer_types=["sliding_attention"] * 2, sliding_window=5)
    attn = narrow.layers[0].self_attn
    assert attn.visible(3, 2) == (0, None)  # all 5 keys inside the window
    start, mask = attn.visible(20, 8)
    assert start == 16 and mask.shape == (8, 12)
    assert (mask == sliding_mask(20, 8, 5)[:, 16:]).all() and not sliding_mask(20, 8, 5)[:, :16].any()
    mx.random.seed(1)
    x = mx.random.normal((1, 8, 32))
    ck, cv = (mx.random.normal((1, 2, 20, 8)) for _ in range(2))
    for d in (wide, narrow):
        d.layers[0].self_attn.update(full.layers[0].self_attn.parameters())
    got = narrow.layers[0].self_attn(x, ck, cv, 20)
    want = full.layers[0].self_attn(x, ck, cv, 20, mask=mx.array(sliding_mask(20, 8, 5)))
    np.testing.assert_allclose(np.array(got), np.array(want), atol=1e-5)
    np.testing.assert_allclose(np.array(wide.layers[0].self_attn(x, ck, cv, 20)),
                               np.array(full.layers[0].self_attn(x, ck, cv, 20)), atol=1e-6)
    assert not np.allclose(np.array(got), np.array(full.layers[0].self_attn(x, ck, cv, 20)), atol=1e-3)
