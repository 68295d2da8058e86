"""(Not adopted.) One layer's tree attention where the nodes spill past the committed keys' last
chunk (AMD's unpadded path) or on Intel's padded layout (tile 8, this host's kernels): the
product's (each row's ancestors' scores by depth, one small matmul a row off the spine) against
a variant whose scores see every key in place, masked, with the weights then taken by depth for
the same p @ v; outputs compared bitwise; SmolLM2 shapes, µs medians. (The log's "before" is
the product, "now" the variant: it ran with the variant in target.py.)

    python lab/cpu/s32/tree_spill_probe.py
"""
import sys
from functools import partial
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import backend; backend.setup()
import mlx.core as mx
from dflash import cpu_rows, target as T, tree as tm
from dflash.policy import _sample_tree
from timing import bench

Hq, Hkv, D = 9, 3, 64


def masked_scores(q, k, v, scale, tree, mask, valid, off, tile=0):
    B, _, R, _ = q.shape
    C, s, Dm = k.shape[2] - R, tree.spine, tree.ancestors.shape[1]
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, R, D)
    p = mx.softmax(mx.where(mask, cpu_rows.scores(q, k[:, :, None].swapaxes(-1, -2), tile), -mx.inf), axis=-1, precise=True)
    by_depth = mx.take_along_axis(p[..., C:], tree.ancestors[None, None, None], axis=-1)
    p = mx.concatenate([p[..., :C], mx.where(valid, by_depth, 0.0)], axis=-1)
    chunk = T._key_chunk(tile)
    c0 = C // chunk * chunk
    out = T._add_chunks(None, p[..., :c0], v[:, :, None, :c0], chunk) if c0 else None
    tail_p = p[..., c0:]
    spine = T._add_chunks(None if out is None else out[..., :s, :], tail_p[..., :s, :], v[:, :, None, c0 : C + Dm], chunk)
    off_p = mx.pad(tail_p[..., s:, :], [(0, 0)] * 4 + [(0, off.shape[1] - tail_p.shape[-1])])
    rest = T._add_chunks(None if out is None else out[..., s:, :].swapaxes(2, 3), off_p.swapaxes(2, 3), v[:, :, off], chunk).swapaxes(2, 3)
    return mx.concatenate([spine, rest], axis=3).reshape(B, Hq, R, D)


for tile, cases in ((0, ((250, 15), (250, 31), (245, 63), (500, 31))), (8, ((140, 15), (192, 15), (250, 31), (250, 63)))):
    for C, n in cases:
        R = n + 1
        mx.random.seed(C + n)
        q, k, v = (mx.random.normal((1, h, R if i == 0 else C + R, D)) for i, h in enumerate((Hq, Hkv, Hkv)))
        mx.eval(q, k, v)
        lay = tm.Layout.of(_sample_tree(n, 15))
        b = T._cpu_tree_attention(lay, C, tile)
        assert b.func is T._tree_attention_invariant
        mask = mx.concatenate([mx.ones((R, C), dtype=mx.bool_), lay.visible], axis=1)
        a = partial(masked_scores, tree=lay, mask=mask, valid=b.keywords["valid"], off=b.keywords["off"], tile=tile)
        before, now = (lambda: b(q, k, v, 0.125)), (lambda: a(q, k, v, 0.125))
        eq = mx.array_equal(before(), now()).item()
        print(f"tile={tile} C={C} n={n}: before {bench(before):.0f} us, now {bench(now):.0f} us, equal={eq}", flush=True)
