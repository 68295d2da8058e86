"""Where a k-row target pass spends its time on this host (AMD: Sandybridge kernels, no row
padding): the 30 layers' linears as mlx-lm calls them (q, k, v, o, gate, up, down) vs fused
(q|k|v, gate|up), the head, and one pass, at 1 / 4 / 8 / 16 rows; plus whether fused rows are
bitwise the rows of the separate calls and of a 1-row call.

    python lab/cpu/s32/amd_parts.py
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent)); import timing
from mlx_lm.models.activations import swiglu
from dflash.load import load_pair



def bench(fn, reps=15):
    return timing.bench(fn, reps, warm=3, unit=1e3)


pair = load_pair(progress=lambda s: None)
t = pair.target
layers = t.layers
fused = []
for l in layers:
    a, m = l.self_attn, l.mlp
    wqkv = mx.concatenate([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
    wgu = mx.concatenate([m.gate_proj.weight, m.up_proj.weight])
    fused.append((wqkv, wgu))
mx.eval(fused)


def separate(x, xi):
    out = []
    for l in layers:
        a, m = l.self_attn, l.mlp
        out += [a.q_proj(x), a.k_proj(x), a.v_proj(x), a.o_proj(x), m.down_proj(swiglu(m.gate_proj(xi), m.up_proj(xi)))]
    return out


def together(x, xi):
    out = []
    for (wqkv, wgu), l in zip(fused, layers):
        g, u = mx.split(xi @ wgu.T, 2, axis=-1)
        out += [x @ wqkv.T, l.self_attn.o_proj(x), l.mlp.down_proj(swiglu(g, u))]
    return out


H = t.hidden_size
for R in (1, 4, 8, 16, 32):
    x = mx.random.normal((1, R, H)); mx.eval(x)
    hx = t.backbone.norm(x)
    sep = bench(lambda: separate(x, x)); tog = bench(lambda: together(x, x)); head = bench(lambda: t.logits(hx))
    # exactness: fused rows vs separate rows vs one row alone (first layer)
    a = layers[0].self_attn
    f = x @ fused[0][0].T
    s = mx.concatenate([a.q_proj(x), a.k_proj(x), a.v_proj(x)], -1)
    alone = mx.concatenate([x[:, i:i + 1] @ fused[0][0].T for i in range(R)], 1)
    print(f"R={R}: linears separate {sep:.1f} ms, fused {tog:.1f} ms, head {head:.1f} ms; "
          f"fused==separate {mx.array_equal(f, s).item()}, fused rows==alone {mx.array_equal(f, alone).item()}", flush=True)
