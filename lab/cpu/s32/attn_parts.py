"""One layer's chain attention on the unpadded (AMD) path taken apart, SmolLM2 shapes (9 query / 3 kv
heads of 64), us medians: scores with the G query heads broadcast or folded into the rows, the mask,
the softmax, p @ v in padded chunks or prepadded; folded results compared bitwise.

    python lab/cpu/s32/attn_parts.py
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent)); import timing
from dflash import target as T


def bench(fn, reps=200):
    return timing.bench(fn, reps, warm=10, unit=1e6)

Hq, Hkv, D = 9, 3, 64
for C, R in ((140, 1), (140, 16), (200, 16)):
    S = C + R
    q = mx.random.normal((1, Hq, R, D)); k = mx.random.normal((1, Hkv, S, D)); v = mx.random.normal((1, Hkv, S, D))
    mx.eval(q, k, v)
    qs = (q * 0.125).reshape(1, Hkv, 3, R, D)
    mx.eval(qs)
    sc = qs @ k[:, :, None].swapaxes(-1, -2)
    mask = mx.arange(S)[None] <= mx.arange(S - R, S)[:, None]
    mx.eval(sc, mask)
    p = mx.softmax(mx.where(mask, sc, -mx.inf), axis=-1, precise=True); mx.eval(p)
    r = {}
    r["full"] = bench(lambda: T._attention_rows_invariant(q, k, v, 0.125))
    r["scale+reshape"] = bench(lambda: (q * 0.125).reshape(1, Hkv, 3, R, D))
    r["scores G-bcast"] = bench(lambda: qs @ k[:, :, None].swapaxes(-1, -2))
    r["scores 48rows"] = bench(lambda: qs.reshape(1, Hkv, 3 * R, D) @ k.swapaxes(-1, -2))
    kt = mx.contiguous(k.swapaxes(-1, -2)); mx.eval(kt)
    r["scores 48rows kT contiguous"] = bench(lambda: qs.reshape(1, Hkv, 3 * R, D) @ kt)
    r["mask where"] = bench(lambda: mx.where(mask, sc, -mx.inf))
    r["softmax precise"] = bench(lambda: mx.softmax(sc, axis=-1, precise=True))
    r["softmax"] = bench(lambda: mx.softmax(sc, axis=-1))
    r["p@v chunks"] = bench(lambda: T._add_chunks(None, p, v[:, :, None], 256))
    pp = mx.pad(p, [(0,0)]*4 + [(0, 256 - S)]); vp = mx.pad(v, [(0,0)]*2 + [(0, 256 - S), (0,0)]); mx.eval(pp, vp)
    r["p@v prepadded G-bcast"] = bench(lambda: pp @ vp[:, :, None])
    r["p@v prepadded 48rows"] = bench(lambda: pp.reshape(1, Hkv, 3 * R, 256) @ vp)
    r["sdpa fast"] = bench(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal" if R > 1 else None))
    print(C, R, {a: round(b) for a, b in r.items()}, flush=True)
    # bitwise: 48-row vs broadcast
    print("  scores eq", mx.array_equal(qs @ k[:, :, None].swapaxes(-1, -2), (qs.reshape(1, Hkv, 3*R, D) @ k.swapaxes(-1, -2)).reshape(1, Hkv, 3, R, S)).item(),
          "pv eq", mx.array_equal(pp @ vp[:, :, None], (pp.reshape(1, Hkv, 3*R, 256) @ vp).reshape(1, Hkv, 3, R, D)).item())
