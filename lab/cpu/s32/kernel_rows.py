"""The SmolLM2 target's linears (30 layers: q|k|v, o, gate|up, down fused as one process would
call them) and its head at 1..32 rows, float32, with one OpenBLAS core type per process; and
whether every row of an R-row call is bitwise the row computed alone (padded to `pad` rows).

    python lab/cpu/s32/kernel_rows.py Haswell [pad]
"""
import ctypes, os, sys, time
from pathlib import Path
coretype = sys.argv[1]; pad = int(sys.argv[2]) if len(sys.argv) > 2 else 1
os.environ["OPENBLAS_CORETYPE"] = coretype
lib = ctypes.CDLL("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", mode=ctypes.RTLD_GLOBAL)
lib.openblas_get_corename.restype = ctypes.c_char_p
import mlx.core as mx, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent)); import timing


def bench(fn, reps=15):
    return timing.bench(fn, reps, warm=3, unit=1e3)

H, I, V, Lyr = 576, 1536, 49152, 30
mx.random.seed(0)
ws = [[mx.random.normal((n, k)) * 0.03 for n, k in ((960, H), (H, H), (2 * I, H), (H, I))] for _ in range(Lyr)]
head = mx.random.normal((V, H)) * 0.03
mx.eval(ws, head)

def padded(x, w):
    R = x.shape[0]; P = -(-R // pad) * pad
    if P > R: x = mx.concatenate([x, mx.zeros((P - R, x.shape[1]))])
    return (x @ w.T)[:R]

def linears(x):
    return [padded(x if w.shape[1] == H else mx.concatenate([x] * 3, -1)[:, :I], w) for l in ws for w in l]

print(coretype, "->", lib.openblas_get_corename().decode(), "pad", pad)
for R in (1, 2, 4, 8, 16, 32):
    x = mx.random.normal((R, H)); mx.eval(x)
    t_lin = bench(lambda: linears(x)); t_head = bench(lambda: padded(x, head))
    exact = {}
    for name, w, xin in (("qkv", ws[0][0], x), ("down", ws[0][3], mx.concatenate([x] * 3, -1)[:, :I]), ("head", head, x)):
        alone = mx.concatenate([padded(xin[i:i + 1], w) for i in range(R)])
        exact[name] = mx.array_equal(padded(xin, w), alone).item()
    print(f"R={R}: linears {t_lin:.1f} ms, head {t_head:.1f} ms, rows exact {exact}", flush=True)
