"""AMD's unpadded path: one layer's tree attention as before the thirty-second session
(tree_attention_before.py: ancestors gathered by depth, the last chunk's weights moved back to
the nodes' columns), this probe's first version of the chain's attention with the tree's mask
(every key in place: committed keys, then the nodes in tree order), and the product's now
(target._cpu_tree_attention), outputs compared bitwise; SmolLM2 shapes, µs medians. The log's
"shipped" was the function before (the probe ran before the product changed).

    python lab/cpu/s32/tree_mask_probe.py
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import backend; backend.setup()
import mlx.core as mx
from dflash import cpu_rows, target as T, tree as tm
from dflash.policy import _sample_tree
from timing import bench
import tree_attention_before

Hq, Hkv, D = 9, 3, 64


def masked(q, k, v, scale, visible):
    B, _, R, _ = q.shape
    S = k.shape[2]
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, R, D)
    scores = q @ k[:, :, None].swapaxes(-1, -2)
    mask = mx.concatenate([mx.ones((R, S - R), mx.bool_), visible], axis=1)
    p = mx.softmax(mx.where(mask, scores, -mx.inf), axis=-1, precise=True)
    return T._add_chunks(None, p, v[:, :, None], T.KEY_CHUNK).reshape(B, Hq, R, D)


for C in (100, 140, 200, 236):
    for n in (3, 7, 15):
        R = n + 1
        mx.random.seed(C + n)
        q, k, v = (mx.random.normal((1, h, R if i == 0 else C + R, D)) for i, h in enumerate((Hq, Hkv, Hkv)))
        mx.eval(q, k, v)
        lay = tm.Layout.of(_sample_tree(n, 15))
        valid = mx.arange(lay.ancestors.shape[1])[None] <= lay.depth[:, None]
        before_fn, now_fn = tree_attention_before.cpu_tree_attention(lay, C, 0), T._cpu_tree_attention(lay, C, 0)
        before = lambda: before_fn(q, k, v, 0.125)
        new = lambda: masked(q, k, v, 0.125, lay.visible)
        now = lambda: now_fn(q, k, v, 0.125)
        chain = lambda: T._attention_rows_invariant(q, k, v, 0.125)
        eq = mx.array_equal(before(), new()).item() and mx.array_equal(before(), now()).item()
        print(f"C={C} n={n}: before {bench(before):.0f} us, masked {bench(new):.0f} us, now {bench(now):.0f} us, "
              f"chain {bench(chain):.0f} us, equal={eq}", flush=True)
