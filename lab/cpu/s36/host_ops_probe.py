"""The real target's 1-, 8- and 16-row passes on this CPU with its SwiGLU and softmax in numpy
(dflash/host_ops.py) and in MLX, rounds alternating, at a 200-token context; then a 16-row
block's rows against the same tokens fed one by one, bitwise, with host_ops on.

    python lab/cpu/s36/host_ops_probe.py [--rounds 3]
"""
import argparse
import statistics
import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402

from dflash import host_ops  # noqa: E402
from dflash.load import load_pair  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()
t = load_pair(progress=lambda s: None).target
cache = t.make_cache()
t.prefill(list(range(100, 300)), cache)


def timed(L, reps=8):
    ids = mx.array([list(range(500, 500 + L))])
    xs = []
    for i in range(reps + 1):
        s = perf_counter()
        lg, _, _ = t.forward(ids, cache)
        mx.eval(lg)
        if i:
            xs.append(1e3 * (perf_counter() - s))
        for c in cache:
            c.trim(L)
    return statistics.median(xs)


res = {}
for _ in range(a.rounds):
    for on in (False, True):
        host_ops.ENABLED = on
        for L in (1, 8, 16):
            res.setdefault((on, L), []).append(timed(L))
for (on, L), v in sorted(res.items()):
    print("numpy" if on else "mlx  ", f"{L:2d} rows", " ".join(f"{x:6.1f}" for x in v), "ms")

host_ops.ENABLED = True
block = list(range(500, 516))
together, _, _ = t.forward(mx.array([block]), cache)
mx.eval(together)
for c in cache:
    c.trim(16)
same = True
for i, b in enumerate(block):
    lg, _, _ = t.forward(mx.array([[b]]), cache)
    same &= bool(mx.array_equal(lg[0, -1], together[0, i]).item())
print("16 rows bitwise equal to the tokens fed one by one:", same)
