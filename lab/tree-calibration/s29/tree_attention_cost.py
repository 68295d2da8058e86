"""One layer's tree attention on the CPU (SmolLM2 shapes: 9 query / 3 kv heads of 64), Intel's
padded path (tile 8): the product's `_tree_attention_invariant` against a variant whose per-row
tail keys come from one gather (no broadcast + concatenate + pad), at p @ v key chunks of 256 /
128 / 64, with the outputs compared bitwise. Twenty-ninth session; not adopted (README.md).

    python lab/tree-calibration/s29/tree_attention_cost.py
"""
import sys, time; sys.path.insert(0, '.')
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from dflash import target as T, tree as tree_mod, cpu_rows
from dflash.policy import _sample_tree
Hq, Hkv, D = 9, 3, 64
def bench(fn, reps=100):
    for _ in range(5): mx.eval(fn())
    t = time.perf_counter()
    for _ in range(reps): mx.eval(fn())
    return (time.perf_counter() - t) / reps * 1e6

def tree_attn_gather(q, k, v, scale, tree, valid, tile=0):
    KC = T.KEY_CHUNK
    B, Hq, R, D = q.shape
    Hkv, C = k.shape[1], k.shape[2] - R
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, R, D)
    kb = k[:, :, C:][:, :, tree.ancestors]
    s_ctx = cpu_rows.scores(q, k[:, :, None, :C].swapaxes(-1, -2), tile)
    s_blk = cpu_rows.scores(q.swapaxes(2, 3), kb.swapaxes(-1, -2), tile).swapaxes(2, 3)
    s_blk = mx.where(valid, s_blk, -mx.inf)
    p = mx.softmax(mx.concatenate([s_ctx, s_blk], axis=-1), axis=-1, precise=True)
    c0 = C // KC * KC
    out = None
    for c in range(0, c0, KC):
        part = p[..., c : c + KC] @ v[:, :, None, c : c + KC]
        out = part if out is None else out + part
    Dm = tree.ancestors.shape[1]
    n = C - c0 + Dm
    Tp = -(-n // KC) * KC
    # each row's tail keys where decoding its path alone has them; padding reads key 0 at weight 0
    idx = mx.concatenate([mx.broadcast_to(mx.arange(c0, C, dtype=mx.int32), (R, C - c0)), C + tree.ancestors,
                          mx.zeros((R, Tp - n), mx.int32)], axis=1)
    tail_v = v[:, :, idx]  # [B, Hkv, R, Tp, D]
    tail_p = mx.pad(p[..., c0:], [(0, 0)] * 4 + [(0, Tp - n)]).swapaxes(2, 3)  # [B, Hkv, R, G, Tp]
    for c in range(0, Tp, KC):
        part = (tail_p[..., c : c + KC] @ tail_v[:, :, :, c : c + KC]).swapaxes(2, 3)
        out = part if out is None else out + part
    return out.reshape(B, Hq, R, D)

for chunk in (256, 128, 64):
    T.KEY_CHUNK = chunk
    for C in (80, 160, 240, 300):
        for n in (15, 31):
            R = n + 1
            q = mx.random.normal((1, Hq, R, D)); k = mx.random.normal((1, Hkv, C + R, D)); v = mx.random.normal((1, Hkv, C + R, D))
            lay = tree_mod.Layout.of(_sample_tree(n, 15))
            valid = mx.arange(lay.ancestors.shape[1])[None] <= lay.depth[:, None]
            a = T._tree_attention_invariant(q, k, v, 0.125, tree=lay, valid=valid, tile=8)
            b = tree_attn_gather(q, k, v, 0.125, tree=lay, valid=valid, tile=8)
            eq = mx.array_equal(a, b).item()
            tt = bench(lambda: T._tree_attention_invariant(q, k, v, 0.125, tree=lay, valid=valid, tile=8))
            tg = bench(lambda: tree_attn_gather(q, k, v, 0.125, tree=lay, valid=valid, tile=8))
            print(f"chunk {chunk} C{C} n{n}: now {tt:.0f} gather {tg:.0f} equal {eq}", flush=True)
