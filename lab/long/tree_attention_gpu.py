"""Tree attention on MLX's CUDA backend against the context length: one layer of the embedded
target's shape (9 query heads, 3 KV heads, head dim 64, float32), R drafted nodes + the staged
token over C committed keys. Prints ms per call (mean of 30 calls in one evaluation, best of 5)
for the kernel, mx.fast's masked call, the split kernel over a 256-step buffer, and what `kernels.tree_attention_gpu` picks; for scale a
1-row step, a 16-row chain in 3-row fused calls (as the CUDA target verifies a chain) and the same chain
as one causal call. Checks the kernel against the masked call.

    python lab/long/tree_attention_gpu.py   (on the GPU machine)
"""

import time

import mlx.core as mx
import numpy as np

from dflash import tree
from dflash.backends import kernels
from dflash.tree import Layout

HQ, HKV, D = 9, 3, 64


def visible(R, depth=16):
    """A tree of R rows shaped like drafted ones (as the planner's cost probe shapes them)."""
    logp = -(0.4 * np.arange(depth)[:, None] + 0.9 * np.arange(tree.WIDTH)[None])
    ids = np.arange(depth * tree.WIDTH).reshape(depth, tree.WIDTH) + 10
    return Layout.of(tree.build(5, ids, logp, R - 1).spine_first()).visible


def chunked(q, k, v, rows=3):
    """Causal attention of q's rows in calls of `rows`, each over the keys up to its last row."""
    L, S = q.shape[2], k.shape[2]
    outs = [mx.fast.scaled_dot_product_attention(q[:, :, s:s + rows], k[:, :, :S - L + min(s + rows, L)],
                                                 v[:, :, :S - L + min(s + rows, L)], scale=0.125, mask="causal")
            for s in range(0, L, rows)]
    return mx.concatenate(outs, axis=2)


def timed(fn, calls=30, reps=5):
    mx.eval(fn())
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        mx.eval([fn() for _ in range(calls)])
        best = min(best, (time.perf_counter() - t) / calls * 1e3)
    return best


def main():
    print(f"{'C':>5} {'R':>3} | {'kernel':>8} {'masked':>8} {'split':>8} {'picked':>8} | {'step':>6} {'chain16':>7} {'chain1call':>10}")
    for C in (128, 512, 1024, 2048, 4096, 8000):
        for R in (17, 33, 65):
            key = mx.random.key(C + R)
            q = mx.random.normal((1, HQ, R, D), key=key)
            k, v = (mx.random.normal((1, HKV, C + R, D), key=mx.random.key(C + R + i)) for i in (1, 2))
            vis = visible(R)
            want = kernels.masked_attention(q, k, v, 0.125, vis)
            got = kernels.tree_attention(q, k, v, 0.125, vis)
            err = mx.abs(got - want).max().item()
            assert err < 2e-3, (C, R, err)
            n = -(-(C + R) // 256) * 256  # the KV cache's buffer: grown in steps of 256
            kb, vb = (mx.concatenate([x, mx.zeros((1, HKV, n - C - R, D))], axis=2) for x in (k, v))
            committed = mx.array([C], dtype=mx.int32)
            err = mx.abs(kernels.tree_attention_split(q, kb, vb, 0.125, vis, committed) - want).max().item()
            assert err < 2e-3, ("split", C, R, err)
            ms = {"kernel": timed(lambda: kernels.tree_attention(q, k, v, 0.125, vis)),
                  "split": timed(lambda: kernels.tree_attention_split(q, kb, vb, 0.125, vis, committed)),
                  "masked": timed(lambda: kernels.masked_attention(q, k, v, 0.125, vis)),
                  "picked": timed(lambda: kernels.tree_attention_gpu(q, k, v, 0.125, vis))}
            step = timed(lambda: mx.fast.scaled_dot_product_attention(q[:, :, :1], k[:, :, : C + 1], v[:, :, : C + 1], scale=0.125))
            chain = timed(lambda: chunked(q[:, :, :16], k[:, :, : C + 16], v[:, :, : C + 16]))
            one = timed(lambda: mx.fast.scaled_dot_product_attention(
                q[:, :, :16], k[:, :, : C + 16], v[:, :, : C + 16], scale=0.125, mask="causal"))
            print(f"{C:>5} {R:>3} | {ms['kernel']:8.3f} {ms['masked']:8.3f} {ms['split']:8.3f} {ms['picked']:8.3f} | "
                  f"{step:6.3f} {chain:7.3f} {one:10.3f}", flush=True)


if __name__ == "__main__":
    main()
