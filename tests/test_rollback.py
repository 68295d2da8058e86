"""Rollback: after verifying B tokens and keeping n, every cache equals the cache built by
feeding only those n tokens (KV trim for attention, tape replay for GatedDeltaNet)."""

import mlx.core as mx
import numpy as np
import pytest

from dflash.tape import GDNTape
from tests.tiny import tiny_pair


def cache_arrays(cache):
    out = []
    for c in cache:
        if hasattr(c, "keys"):  # KVCache: only the live part counts
            k, v = c.keys_and_values()
            out += [k, v]
        else:  # ArraysCache of a GDN layer: conv state, recurrent state
            out += [c[0], c[1]]
    return out


def rel_err(a, b):
    a, b = np.array(a.astype(mx.float32)), np.array(b.astype(mx.float32))
    return float(np.abs(a - b).max() / (np.abs(b).max() + 1e-12))


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5"])
@pytest.mark.parametrize("n_keep", [1, 3, 8, 16])
def test_rollback_equals_fresh_prefix(family, n_keep):
    pair = tiny_pair(family, seed=11)
    target = pair.target
    prompt = mx.array([[4, 9, 17, 33, 8, 21, 5]])
    block = mx.array([[6, 12, 40, 2, 19, 7, 30, 11, 9, 50, 13, 14, 22, 28, 41, 3]])

    cache = target.make_cache()
    target.forward(prompt, cache)
    _, _, tapes = target.forward(block, cache, record=True)
    assert bool(tapes) == target.is_hybrid
    target.rollback(cache, tapes, 16, n_keep)

    fresh = target.make_cache()
    target.forward(prompt, fresh)
    target.forward(block[:, :n_keep], fresh)
    for got, want in zip(cache_arrays(cache), cache_arrays(fresh)):
        assert got.shape == want.shape
        assert rel_err(got, want) < 1e-5

    # and the rolled-back cache decodes on exactly like the fresh one
    nxt = mx.array([[37]])
    a, _, _ = target.forward(nxt, cache)
    b, _, _ = target.forward(nxt, fresh)
    assert rel_err(a, b) < 1e-5


def test_tape_memory_is_per_step_not_per_state():
    """The tape stores block x (Hv*Dv + Hv*Dk + conv_dim) per layer, never block x states."""
    pair = tiny_pair("qwen3_5", seed=1)
    cache = pair.target.make_cache()
    pair.target.forward(mx.array([[4, 5, 6]]), cache)
    _, _, tapes = pair.target.forward(mx.array([list(range(4, 20))]), cache, record=True)
    tape: GDNTape = next(iter(tapes.values()))
    state_size = tape.state0.size
    per_step = tape.g[0, 0].size + tape.k[0, 0].size + tape.delta[0, 0].size + tape.conv_in[0, 0].size
    assert per_step < state_size  # a per-step state copy would be state_size per step
    assert tape.delta.shape[1] == tape.k.shape[1] == tape.conv_in.shape[1] == 16
