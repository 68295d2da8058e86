"""Does MLX's CUDA attention cost more when the key count changes every call (as it does every
cycle of a decode) than when it repeats (as in a cost probe)? MLX builds a cuDNN graph per new
(query, key) shape for float16 passes of 2+ query rows; MLX_CUDA_USE_CUDNN_SDPA=0 turns cuDNN off.

    python lab/long/cudnn_gpu.py            # then again with MLX_CUDA_USE_CUDNN_SDPA=0
"""

import os
import time

import mlx.core as mx

from dflash.backends import kernels


def timed(make, n=24):
    """Median ms of n calls; make(i) builds call i's output."""
    out = []
    for i in range(n + 2):
        t = time.perf_counter()
        mx.eval(make(i))
        out.append((time.perf_counter() - t) * 1e3)
    out = sorted(out[2:])
    return out[len(out) // 2]


def main():
    print("MLX_CUDA_USE_CUDNN_SDPA =", os.environ.get("MLX_CUDA_USE_CUDNN_SDPA", "(unset)"), mx.__version__)
    H, HKV, D = 9, 3, 64
    for ctx in (600, 2000, 4000, 7000):
        for rows, masked in ((1, False), (3, False), (16, False), (65, True)):
            S = ctx + 64 + rows
            q = mx.random.normal((1, H, rows, D)).astype(mx.float16)
            k = mx.random.normal((1, HKV, S, D)).astype(mx.float16)
            v = mx.random.normal((1, HKV, S, D)).astype(mx.float16)
            mask = mx.random.uniform(shape=(rows, 64 + rows)) < 0.5 if masked else None

            def call(i, grow):
                n = ctx + (i if grow else 0) + rows
                kk, vv = k[:, :, :n], v[:, :, :n]
                if mask is None:
                    return mx.fast.scaled_dot_product_attention(q, kk, vv, scale=0.125, mask="causal" if rows > 1 else None)
                m = mx.concatenate([mx.ones((rows, n - (64 + rows)), dtype=mx.bool_), mask], axis=1)
                return mx.fast.scaled_dot_product_attention(q, kk, vv, scale=0.125, mask=m)

            same = timed(lambda i: call(i, False))
            grow = timed(lambda i: call(i, True))
            line = (f"ctx {ctx:>5} rows {rows:>2}{' masked' if masked else '       '}: "
                    f"same keys {same:6.2f} ms, a new key count each call {grow:6.2f} ms")
            if masked and kernels.available(mx.float16, D):  # dflash's tree kernel, keys growing
                vis = mask[:, 64:]
                line += "; tree kernel {:6.2f} ms".format(timed(lambda i: kernels.tree_attention(
                    q, k[:, :, :ctx + i + rows], v[:, :, :ctx + i + rows], 0.125, vis)))
            print(line, flush=True)


if __name__ == "__main__":
    main()
