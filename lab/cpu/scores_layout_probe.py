"""What the one-shape attention-score calls (cpu_rows.scores, the SkylakeX path) cost against a
plain call and against keys x queries (keys as the rows, padded to 8; queries as 16 columns), per
layer on this host's BLAS: the question behind lab/cpu/README.md section 15.

    python lab/cpu/scores_layout_probe.py [--keys 128 400] [--rows 1 9]

Timing only: whether keys x queries keeps a score bitwise the same alone and in a block on
SkylakeX kernels is not checked here (it needs an AVX-512 host: scores_probe.py's job).
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash import cpu_rows  # noqa: E402


def timed(f, n=200):
    for _ in range(5):
        mx.eval(f())
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        mx.eval(f())
        ts.append(time.perf_counter() - t)
    return 1e6 * float(np.median(ts))


def keys_by_queries(q, k):
    S, L = k.shape[-2], q.shape[-2]
    kp, qp = cpu_rows._pad_axis(k, -2, 8), cpu_rows._pad_axis(q, -2, 16)
    return (mx.contiguous(kp) @ mx.contiguous(qp.swapaxes(-1, -2)))[..., :S, :L].swapaxes(-1, -2)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, nargs="+", default=[128, 400])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 9])
    a = ap.parse_args()
    print(backend.active())
    for S in a.keys:
        for L in a.rows:  # SmolLM2's 9 query heads of 64
            q, k = mx.random.normal((1, 9, L, 64)), mx.random.normal((1, 9, S, 64))
            kt = k.swapaxes(-1, -2)
            assert np.allclose(np.array(keys_by_queries(q, k)), np.array(q @ kt), atol=1e-3)
            print(f"{S} keys, {L} rows: plain {timed(lambda: q @ kt):.0f} us, one-shape tiles "
                  f"{timed(lambda: cpu_rows.scores(q, kt, 8)):.0f} us, keys x queries "
                  f"{timed(lambda: keys_by_queries(q, k)):.0f} us a layer", flush=True)
