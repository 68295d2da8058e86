"""The target's SwiGLU and softmax in numpy on a CPU (host_ops.py): the same values as MLX's
within float32 rounding, a row's softmax unchanged by masked keys anywhere in it, and every
target pass on a CPU computing them there."""

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.activations import swiglu

from dataclasses import replace

from dflash import backend
from dflash.backends import host_ops
from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.events import Summary
from tests.tiny import tiny_drafter, tiny_pair


def test_softmax_matches_mlx_and_masks():
    x = mx.random.normal((2, 3, 5, 300), key=mx.random.key(0)) * 6
    mask = mx.random.uniform(shape=x.shape, key=mx.random.key(1)) < 0.3
    x = mx.where(mask | (mx.arange(300) == 0), x, -mx.inf)  # every row keeps key 0
    ours, theirs = host_ops.softmax(x), mx.softmax(x, axis=-1, precise=True)
    assert mx.allclose(ours, theirs, atol=1e-7, rtol=1e-5).item()
    assert (np.array(ours)[np.array(~(mask | (mx.arange(300) == 0)))] == 0).all()


def test_softmax_row_unchanged_by_masked_keys():
    """A row alone == the same row with masked keys between and after its keys (a token decoded
    alone against its row in a block or a tree), bitwise. A pairwise sum (np.sum) fails this on
    the same rows, so the rows are long enough to tell."""
    rng = np.random.default_rng(3)
    naive_differs = 0
    for n in (7, 33, 130, 257, 600):
        row = (rng.standard_normal(n) * 4).astype(np.float32)
        wide = np.full(n + 140, -np.inf, np.float32)
        keep = np.sort(rng.choice(n + 100, n, replace=False))  # masked keys among them and after
        wide[keep] = row
        alone = np.array(host_ops.softmax(mx.array(row[None])))[0]
        inside = np.array(host_ops.softmax(mx.array(wide[None])))[0]
        assert np.array_equal(alone, inside[keep]), n
        e, ew = np.exp(row - row.max()), np.exp(wide - wide.max())
        naive_differs += not np.array_equal(e / e.sum(), (ew / ew.sum())[keep])
    assert naive_differs


@pytest.mark.parametrize("chunk", [256, 8])
def test_softmax_rows_past_a_chunk_sum_by_position(chunk):
    """Rows whose keys reach past `chunk` sum whole chunks below their own by a fixed tree, then in
    order: a row alone (keys up to its position) == the row inside a block of rows straddling a
    chunk boundary, with masked keys after it and between its last chunk's keys, bitwise; and
    the values are softmax's."""
    rng = np.random.default_rng(5)
    for p0 in (chunk - 3, 2 * chunk + 1, 5 * chunk - 7):
        L, S = 9, p0 + 9 + 40  # rows at positions p0..p0+8, then keys masked for all of them
        x = (rng.standard_normal((2, 3, L, S)) * 4).astype(np.float32)
        pos = np.arange(p0, p0 + L)
        first = pos // chunk * chunk
        block = x.copy()
        block[..., np.arange(S)[None] > pos[:, None]] = -np.inf
        hole = first[-1] + 1  # a masked key between the last row's chunk keys, as a tree has
        block[..., -1, hole] = -np.inf
        inside = np.array(host_ops.softmax(mx.array(block), first, chunk))
        ref = np.exp(block - block.max(-1, keepdims=True))
        np.testing.assert_allclose(inside, ref / ref.sum(-1, keepdims=True), rtol=2e-6, atol=1e-9)
        for i in range(L):
            row = np.delete(block[..., i, : pos[i] + 1], hole, axis=-1) if i == L - 1 else block[..., i, : pos[i] + 1]
            alone = np.array(host_ops.softmax(mx.array(row[..., None, :]), first[i : i + 1], chunk))[..., 0, :]
            kept = np.delete(inside[..., i, : pos[i] + 1], hole, axis=-1) if i == L - 1 else inside[..., i, : pos[i] + 1]
            assert np.array_equal(alone, kept), (p0, i)


def test_tail_mask_equals_masking_the_scores():
    """Masking the pass's own keys inside the softmax (tail_mask) gives the bits of scores masked
    to -inf beforehand, also where a masked key's score is far above the row's own (it must stay
    out of the row's max) and for a tree's visibility rather than the causal one."""
    rng = np.random.default_rng(7)
    L, S = 6, 700
    x = (rng.standard_normal((2, 3, L, S)) * 4).astype(np.float32)
    x[..., -L:] += 60  # the pass's own keys score far higher than the context's
    first = np.arange(S - L, S) // 256 * 256
    for seen in (np.tri(L, dtype=bool), np.tri(L, dtype=bool) & (rng.random((L, L)) < 0.6) | np.eye(L, dtype=bool)):
        masked = x.copy()
        masked[..., -L:][..., ~seen] = -np.inf
        ref = np.array(host_ops.softmax(mx.array(masked), first, 256))
        ours = np.array(host_ops.softmax(mx.array(x), first, 256, tail_mask=seen))
        assert np.array_equal(ours, ref)
        assert (ours[..., -L:][..., ~seen] == 0).all()


def test_swiglu_matches_mlx_lm():
    g = mx.random.normal((1, 9, 64), key=mx.random.key(2)) * 5
    g = mx.concatenate([g, mx.full((1, 9, 2), -100.0)], -1)  # exp(-g) overflows: SiLU's 0
    u = mx.random.normal(g.shape, key=mx.random.key(3))
    with np.errstate(all="raise"):
        ours = host_ops.swiglu(g, u)
    assert mx.allclose(ours, swiglu(g, u), atol=1e-6, rtol=1e-5).item()
    assert (np.array(ours)[..., -2:] == 0).all()


def test_runs_on_cpu_float32_only(monkeypatch):
    assert host_ops.runs(mx.zeros(3))
    assert not host_ops.runs(mx.zeros(3, dtype=mx.bfloat16))
    with backend.overridden(host_ops=False):
        assert not host_ops.runs(mx.zeros(3))
    assert host_ops.runs(mx.zeros(3))


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_target_passes_use_them_and_stay_lossless(family, monkeypatch):
    """Every pass of a CPU target (prefill, steps, chain and tree verifies) goes through
    host_ops, and DFlash stays identical to target-only with it on and with it off."""
    calls = {"swiglu": 0, "softmax": 0}
    for name in calls:
        real = getattr(host_ops, name)
        monkeypatch.setattr(host_ops, name, lambda *a, _r=real, _n=name: calls.__setitem__(_n, calls[_n] + 1) or _r(*a))
    pair = tiny_pair(family, drafter=tiny_drafter())
    ids = [3, 9, 4, 7, 1, 8]
    for enabled in (True, False):
        monkeypatch.setattr(backend, "_active", replace(backend.active(), host_ops=enabled))
        before = dict(calls)
        outs = []
        for cfg in (GenerationConfig(mode="target", max_tokens=24),
                    GenerationConfig(mode="dflash", max_tokens=24, tree=0),
                    GenerationConfig(mode="dflash", max_tokens=24, tree=6)):
            outs.append(next(e for e in stream(pair, ids, cfg) if isinstance(e, Summary)).token_ids)
        assert outs[0] == outs[1] == outs[2]
        n_layers = len(pair.target.layers)
        if enabled:
            assert all(calls[k] - before[k] >= 24 * n_layers for k in calls)
        else:
            assert calls == before
