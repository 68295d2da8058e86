"""The planner's cost table (policy.measure_costs) on this host, twice, and one layer's attention
(chain rows vs the shipped tree attention, AMD's unpadded path) at SmolLM2 shapes.

    python lab/cpu/s32/amd_costs.py
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent)); import timing
from dflash import target as T, tree as tm
from dflash.load import load_pair
from dflash.policy import measure_costs, _sample_tree
from dflash.config import MAX_TREE



def bench(fn, reps=60):
    return timing.bench(fn, reps, warm=5, unit=1e6)


Hq, Hkv, D = 9, 3, 64
tile = backend.active().row_tile
for C in (140, 250, 300):
    for n in (7, 15, 31):
        R = n + 1
        q, k, v = (mx.random.normal((1, h, R if i == 0 else C + R, D)) for i, h in enumerate((Hq, Hkv, Hkv)))
        mx.eval(q, k, v)
        lay = tm.Layout.of(_sample_tree(n, 15).spine_first())
        valid = mx.arange(lay.ancestors.shape[1])[None] <= lay.depth[:, None]
        off = T._off_spine_keys(lay, C, T._key_chunk(tile))
        tree_fn = lambda: T._tree_attention_invariant(q, k, v, 0.125, tree=lay, valid=valid, off=off, tile=tile)
        tc = bench(lambda: T._attention_rows_invariant(q, k, v, 0.125, tile=tile))
        print(f"C={C} n={n} spine={lay.spine}: chain {tc:.0f} us, tree {bench(tree_fn):.0f} us", flush=True)

pair = load_pair(progress=lambda s: None)
for rep in range(2):
    c = measure_costs(pair, 16, tree_nodes=MAX_TREE)
    print("step %.1f" % c["step_ms"], "draft %.1f" % c["draft_ms"], "tree", {k: round(v) for k, v in c["verify_ms"].items()},
          "chain", {k: round(v) for k, v in c["chain_ms"].items()}, flush=True)
