"""A/B in one process, interleaved: the real embedded target's plain step and verify pass with
q and k rotated by one RoPE table a pass (target.py, the CPU default) vs mx.fast.rope.

    python lab/cpu/rope_ab.py [--ks 1,5] [--reps 12]
"""

import argparse
from statistics import median
from time import perf_counter

from dflash import backend

ap = argparse.ArgumentParser()
ap.add_argument("--ks", default="1,5")
ap.add_argument("--reps", type=int, default=12)
a = ap.parse_args()
b = backend.setup()

import mlx.core as mx  # noqa: E402

from dflash import target as T  # noqa: E402
from dflash.load import load_target  # noqa: E402
from dflash.registry import BUILTIN_TARGET  # noqa: E402

lm, tok, model_type = load_target(BUILTIN_TARGET, progress=lambda m: None)
t = T.Target(lm, model_type, row_tile=b.row_tile)
ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 20)[:128]
cache = t.make_cache()
mx.eval(t.forward(mx.array([ids]), cache)[0])
by_table = T._rope_by_table


def step(k: int, table: bool):
    T._rope_by_table = by_table if table else (lambda rope, head_dim=None: False)
    s = perf_counter()
    logits = t.forward(mx.array([[ids[-1]] * k]), cache)[0]
    mx.eval(logits)
    dt = perf_counter() - s
    t.rollback(cache, {}, k, 0)
    mx.eval([c.state for c in cache])
    return dt * 1e3


print(f"{b.cpu}: BLAS {b.coretype}, context {len(ids)}, medians (min) of {a.reps} interleaved pairs")
for k in (int(x) for x in a.ks.split(",")):
    runs = {True: [], False: []}
    for i in range(a.reps + 1):
        for table in (True, False):
            runs[table].append(step(k, table))
    fast, tab = runs[False][1:], runs[True][1:]
    print(f"k={k}: mx.fast.rope {median(fast):.1f} ({min(fast):.1f}) ms, table {median(tab):.1f} "
          f"({min(tab):.1f}) ms", flush=True)
