"""AMD's unpadded CPU path with q|k|v and gate|up fused (one matmul each, as Intel's padded path
already does) against mlx-lm's separate projections, and with attention's G query heads of a kv head folded into one matmul's rows (scores and p @ v): a target step and tree passes of 7 / 15
nodes, interleaved in one process (ms, median and min), logits compared bitwise.

    python lab/cpu/s32/fused_ab.py [reps]
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from mlx_lm.models.activations import swiglu
from dflash import tree as tm
from dflash.load import load_pair
from dflash.policy import _sample_tree, probe_context

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
pair = load_pair(progress=lambda s: None)
t = pair.target
assert t.row_tile == 0 and t._linears is None, "for the unpadded (AMD) path"


class Fused:
    def __init__(self, layer):
        a, m = layer.self_attn, layer.mlp
        self.wqkv = mx.concatenate([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
        self.wgu = mx.concatenate([m.gate_proj.weight, m.up_proj.weight])
        self.splits = [a.q_proj.weight.shape[0], a.q_proj.weight.shape[0] + a.k_proj.weight.shape[0]]
        self.o, self.down, self.I = a.o_proj, m.down_proj, m.gate_proj.weight.shape[0]

    def qkv(self, x):
        return mx.split(x @ self.wqkv.T, self.splits, axis=-1)

    def mlp(self, x):
        gu = x @ self.wgu.T
        return self.down(swiglu(gu[..., : self.I], gu[..., self.I :]))


fused = [Fused(l) for l in t.layers]
import dflash.target as T
_shipped = (T._attention_rows_invariant, T._tree_tail_in_place)


def rows_folded(q, k, v, scale, tile=0):
    """_attention_rows_invariant with a kv head's G query heads as one call's rows."""
    B, Hq, L, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = Hq // Hkv
    q = (q * scale).reshape(B, Hkv, G * L, D)
    scores = (q @ k.swapaxes(-1, -2)).reshape(B, Hkv, G, L, S)
    if L > 1:
        scores = mx.where(mx.arange(S)[None] <= mx.arange(S - L, S)[:, None], scores, -mx.inf)
    p = mx.softmax(scores, axis=-1, precise=True).reshape(B, Hkv, G * L, S)
    return T._add_chunks(None, p, v, T.KEY_CHUNK).reshape(B, Hq, L, D)


def tail_folded(p, v, n_ctx, tree):
    on_path = mx.take(p[..., n_ctx:], tree.depth, axis=-1)
    p = mx.concatenate([p[..., :n_ctx], mx.where(tree.visible, on_path, 0.0)], axis=-1)
    p = mx.pad(p, [(0, 0)] * 4 + [(0, T.KEY_CHUNK - p.shape[-1])])
    v = mx.pad(v, [(0, 0)] * 2 + [(0, T.KEY_CHUNK - v.shape[2]), (0, 0)])
    B, Hkv, G, R, K = p.shape
    return (p.reshape(B, Hkv, G * R, K) @ v).reshape(B, Hkv, G, R, -1)


def use(variant):
    from functools import partial
    t._linears = fused if variant != "separate" else None
    fold = variant == "fused+folded"
    T._tree_tail_in_place = tail_folded if fold else _shipped[1]
    t._attend = partial(rows_folded if fold else _shipped[0], tile=0)

mx.eval([[f.wqkv, f.wgu] for f in fused])
C = probe_context(t.key_chunk)
ids = mx.array([[(7 * i + 10) % t.vocab_size for i in range(C)]])
cache = t.make_cache()
t.forward(ids, cache)
mx.eval([c.state for c in cache])
trees = {n: tm.Layout.of(_sample_tree(n, 15)) for n in (7, 15)}
shapes = {"step": (1, None), "tree 7": (8, trees[7]), "tree 15": (16, trees[15])}


def run(name):
    k, lay = shapes[name]
    x = ids[:, :k]
    t0 = time.perf_counter()
    logits, _, _ = t.forward(x, cache, tree=lay)
    mx.eval(logits)
    ms = (time.perf_counter() - t0) * 1e3
    for c in cache:
        c.trim(k)
    return ms, logits


VARIANTS = ("separate", "fused", "fused+folded")
times = {(v, s): [] for v in VARIANTS for s in shapes}
same = True
for r in range(reps + 1):
    for s in shapes:
        order = VARIANTS if r % 2 else VARIANTS[::-1]
        out = {}
        for v in order:
            use(v)
            ms, out[v] = run(s)
            if r:
                times[(v, s)].append(ms)
        same &= all(mx.array_equal(out["separate"], out[v]).item() for v in VARIANTS)
use("separate")
for s in shapes:
    a = times[("separate", s)]
    print(f"{s:8s} separate {np.median(a):6.1f} (min {min(a):5.1f})" + "".join(
        f"  {v} {np.median(times[(v, s)]):6.1f} (min {min(times[(v, s)]):5.1f}, x{np.median(times[(v, s)]) / np.median(a):.3f})"
        for v in VARIANTS[1:]), flush=True)
print("logits bitwise equal:", same)
