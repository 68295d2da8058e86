"""What the one-shape attention-score calls (cpu_rows.scores, the SkylakeX path) cost against a
plain call and against keys x queries (keys_by_queries.py: 128 keys as the rows, 16 queries as
the columns), per layer on this host's BLAS: lab/cpu/README.md section 15.

    python lab/cpu/scores_layout_probe.py [--keys 128 400] [--rows 1 9]

Timing only: whether a layout keeps a score bitwise the same alone and in a block is
scores_probe.py's job (`--keys-by-queries` for this one; SkylakeX needs an AVX-512 host).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import keys_by_queries  # noqa: E402


def timed(f, n=200):
    for _ in range(5):
        mx.eval(f())
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        mx.eval(f())
        ts.append(time.perf_counter() - t)
    return 1e6 * float(np.median(ts))


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
            assert np.allclose(np.array(keys_by_queries.scores(q, kt, 8)), np.array(q @ kt), atol=1e-3)
            print(f"{S} keys, {L} rows: plain {timed(lambda: q @ kt):.0f} us, one-shape tiles "
                  f"{timed(lambda: cpu_rows.scores(q, kt, 8)):.0f} us, keys x queries "
                  f"{timed(lambda: keys_by_queries.scores(q, kt, 8)):.0f} us a layer", flush=True)
