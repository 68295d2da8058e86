"""One layer's tree attention on the CPU (SmolLM2 shapes: 9 query / 3 kv heads of 64, Intel's
padded path, tile 8): a chain's rows, the shipped tree attention (the spine in place, one gather
for the other rows) and the one before (old_tree_attention.py), outputs compared bitwise.

    python lab/tree-calibration/s31/attn_cost.py
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from dflash import target as T, tree as tm
from dflash.policy import _sample_tree
import old_tree_attention as old
Hq, Hkv, D = 9, 3, 64


def bench(fn, reps=60):
    for _ in range(5): mx.eval(fn())
    ts = []
    for _ in range(reps):
        a = time.perf_counter(); mx.eval(fn()); ts.append(time.perf_counter() - a)
    return np.median(ts) * 1e6


for C in (140, 192, 250):
    for n in (15, 31):
        R = n + 1
        q, k, v = (mx.random.normal((1, h, R if i == 0 else C + R, D)) for i, h in enumerate((Hq, Hkv, Hkv)))
        mx.eval(q, k, v)
        lay = tm.Layout.of(_sample_tree(n, 15))
        valid = mx.arange(lay.ancestors.shape[1])[None] <= lay.depth[:, None]
        off = T._off_spine_keys(lay, C, T._key_chunk(8))
        new_fn = lambda: T._tree_attention_invariant(q, k, v, 0.125, tree=lay, valid=valid, off=off, tile=8)
        old_fn = lambda: old._tree_attention_invariant(q, k, v, 0.125, tree=lay, valid=valid, tile=8)
        eq = mx.array_equal(new_fn(), old_fn()).item()
        tc = bench(lambda: T._attention_rows_invariant(q, k, v, 0.125, tile=8))
        print(f"C={C} n={n} spine={lay.spine}: chain {tc:.0f} us, tree {bench(new_fn):.0f} us, "
              f"before {bench(old_fn):.0f} us, equal={eq}", flush=True)
