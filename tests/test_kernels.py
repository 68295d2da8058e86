"""The CUDA tree-attention kernel against mx.fast's masked attention (runs only under CUDA)."""

from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

from dflash import backend
from dflash.backends import kernels

cuda = pytest.mark.skipif(not backend.on_cuda(), reason="the kernel is MLX-CUDA only")


def _visible(parents):
    R = len(parents)
    vis = np.zeros((R, R), bool)
    for r in range(R):
        n = r
        while n >= 0:
            vis[r, n], n = True, parents[n]
    return mx.array(vis)


@cuda
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize("R,C,Hq,Hkv,D", [(1, 5, 9, 3, 64), (33, 700, 9, 3, 64), (65, 40, 32, 8, 128)])
def test_kernel_equals_masked_attention(dtype, R, C, Hq, Hkv, D):
    rng = np.random.default_rng(R + C)
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, R)]
    q = mx.random.normal((1, Hq, R, D)).astype(dtype)
    k, v = (mx.random.normal((1, Hkv, C + R + 16, D)).astype(dtype)[:, :, : C + R] for _ in range(2))
    vis = _visible(parents)
    got = kernels.tree_attention(q, k, v, D ** -0.5, vis).astype(mx.float32)
    want = kernels.masked_attention(q, k, v, D ** -0.5, vis).astype(mx.float32)
    tol = 2e-3 if dtype == mx.float32 else 2e-2  # the masked reference may run TF32 matmuls
    assert mx.allclose(got, want, atol=tol, rtol=tol).item()
    assert kernels.available(dtype, D, (Hq, Hkv))


def test_a_kernel_that_cannot_run_says_so_and_the_masked_call_stays(monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("nvrtc: compilation failed")

    monkeypatch.setattr(kernels, "on_cuda", lambda: True)
    monkeypatch.setattr(kernels, "tree_attention", broken)
    with pytest.warns(UserWarning, match="cannot run here .*nvrtc"):
        assert kernels.available.__wrapped__(mx.float32, 32) is False


def test_cpu_takes_the_masked_call():
    if mx.default_device() == mx.gpu:
        pytest.skip("CPU only")
    assert not kernels.available()
    q = mx.random.normal((1, 4, 3, 32))
    k = v = mx.random.normal((1, 2, 10, 32))
    vis = _visible([-1, 0, 0])
    out = kernels.tree_attention_gpu(q, k, v, 0.2, vis)
    # row 2 sees the 7 committed keys, the root and itself, never row 1
    s = (q[:, :, 2:3] * 0.2) @ mx.repeat(k, 2, axis=1).swapaxes(-1, -2)
    keep = mx.array([True] * 8 + [False, True])
    p = mx.softmax(mx.where(keep, s, -mx.inf), axis=-1)
    assert mx.allclose(out[:, :, 2:3], p @ mx.repeat(v, 2, axis=1), atol=1e-5).item()


@pytest.mark.parametrize("C", [7, 250, 300])
def test_tree_attention_past_the_kernel_reads_the_whole_cache_buffer(monkeypatch, C):
    """Past the kernel's range a tree pass attends over the KV cache's allocated buffer (one shape
    per 256 keys, for MLX's CUDA graphs): the keys past the tree are masked out, whatever a
    rolled-back draft left there, and the rows equal the masked call over the fetched keys."""
    from mlx_lm.models.cache import KVCache

    monkeypatch.setattr(kernels, "KERNEL_MAX_SCORES", 0)
    Hq, Hkv, D, parents = 4, 2, 32, [-1, 0, 0, 1, 1, 2]
    R = len(parents)
    cache = KVCache()
    cache.update_and_fetch(*(mx.random.normal((1, Hkv, C + 40, D)) * 50 for _ in range(2)))
    cache.trim(40)  # a rejected draft's keys stay in the buffer, past the offset
    q = mx.random.normal((1, Hq, R, D))
    k, v = cache.update_and_fetch(*(mx.random.normal((1, Hkv, R, D)) for _ in range(2)))
    assert cache.keys.shape[2] > C + R and cache.keys.shape[2] % 256 == 0
    vis = _visible(parents)
    got = kernels.TreeAttention(SimpleNamespace(visible=vis), C).over(cache)(q, k, v, D ** -0.5)  # a Layout's rows
    # in float64 on the host: with committed keys this large, a TF32 masked call on CUDA is off by
    # several % (seen on an H100), so it cannot be the reference
    want = _reference(q, k, v, D ** -0.5, vis)
    # values ~50: float32 on the CPU is within 2e-3; the TF32 call was off by units
    assert got.shape == want.shape and np.abs(np.array(got) - want).max() < 1e-2


def _reference(q, k, v, scale, visible):
    """Tree attention in float64 numpy: every committed key, then the nodes visible[r] marks."""
    q, k, v = (np.array(x.astype(mx.float32), np.float64) for x in (q, k, v))
    R, C, G = q.shape[2], k.shape[2] - q.shape[2], q.shape[1] // k.shape[1]
    k, v = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    s = scale * q @ k.swapaxes(-1, -2)
    keep = np.concatenate([np.ones((R, C), bool), np.array(visible)], axis=1)
    s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@cuda
@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
@pytest.mark.parametrize("R,C,N,Hq,Hkv,D", [(1, 5, 256, 9, 3, 64), (17, 63, 256, 9, 3, 64), (65, 700, 1024, 9, 3, 64),
                                           (33, 4000, 4352, 9, 3, 64), (65, 190, 512, 32, 8, 128)])
def test_split_kernel_over_a_buffer_equals_masked_attention(dtype, R, C, N, Hq, Hkv, D):
    """Keys C.. C+R-1 are the tree's, those past them a rolled-back draft's (large, masked out);
    C and C+R cross the splits' boundaries (64 keys for D 64, 32 for D 128)."""
    rng = np.random.default_rng(R + C)
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, R)]
    q = mx.random.normal((1, Hq, R, D)).astype(dtype)
    k, v = (mx.concatenate([mx.random.normal((1, Hkv, C + R, D)), 50 * mx.random.normal((1, Hkv, N - C - R, D))],
                           axis=2).astype(dtype) for _ in range(2))
    vis = _visible(parents)
    got = kernels.tree_attention_split(q, k, v, D ** -0.5, vis, mx.array([C], dtype=mx.int32))
    want = kernels.masked_attention(q, k[:, :, : C + R], v[:, :, : C + R], D ** -0.5, vis)
    tol = 2e-3 if dtype == mx.float32 else 2e-2
    assert mx.allclose(got.astype(mx.float32), want.astype(mx.float32), atol=tol, rtol=tol).item()
    assert kernels.split_available(dtype, D, (Hq, Hkv))


def test_a_gpu_host_runs_every_default_shape_once_at_load(monkeypatch):
    """engine.warm (after every load: server, playground, bench, generate) runs a short default
    generation at a context below and one past the tree kernel's range on a GPU, so that MLX's
    first-use compiles (seconds on CUDA) land there, not in a request's cycles; the CPU (whose
    planner times its passes instead) runs none."""
    from dflash import engine
    from dflash.config import GenerationConfig
    from tests.tiny import tiny_drafter, tiny_pair

    from dflash.events import Cycle

    runs = []

    def stream(pair, ids, cfg):  # a tree cycle, then plain steps of 9 and 7 ms (12 tokens in)
        runs.append((len(ids), cfg))
        return iter([Cycle(0, 65, (), 3, (), 0.002, 0.02, 0.0, 0.1, 5, 3),
                     *(Cycle(i, 1, (), 0, (), 0.0, ms / 1e3, 0.0, 0.1, 5 + i, 3) for i, ms in ((1, 9.0), (7, 7.0)))])
    monkeypatch.setattr(engine, "stream", stream)
    pair = tiny_pair("qwen3", tiny_drafter())
    monkeypatch.setattr(engine, "_costs", lambda *a, **kw: {})  # the CPU planner's probe: not here
    monkeypatch.setattr(backend, "on_cpu", lambda: True)  # as on a CPU, wherever this runs
    engine.warm(pair)
    assert runs == []
    monkeypatch.setattr(backend, "on_cpu", lambda: False)
    said = []
    engine.warm(pair, said.append)
    assert any("compiles" in m for m in said)  # the playground shows why its load takes longer
    limit = pair.target.max_context - engine.WARM_TOKENS - engine.MAX_TREE - 2
    assert [n for n, _ in runs] == [min(c, limit) for c in engine.WARM_CONTEXTS]
    assert engine.WARM_CONTEXTS[1] * 65 > kernels.KERNEL_MAX_SCORES  # past the kernel: the split one
    assert all(cfg == GenerationConfig(max_tokens=engine.WARM_TOKENS) for _, cfg in runs)  # the default
    # their fastest plain steps: Fallback's prior for plain steps (policy.step_prior)
    assert pair.step_prior == tuple((n + 12, 7.0) for n, _ in runs)
