"""MLX CPU elementwise ops on 16 x 1536 float32 (a 16-row pass's MLP width), us and ns an element,
against numpy's exp (with the copies there and back).

    python lab/cpu/s32/elementwise.py
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent)); import timing
import mlx.nn as nn
from mlx_lm.models.activations import swiglu

def bench(fn, reps=50):
    return timing.bench(fn, reps, warm=5, unit=1e6)
x = mx.random.normal((16, 1536)); u = mx.random.normal((16, 1536)); mx.eval(x, u)
n = x.size
for name, fn in (("add", lambda: x + u), ("mul", lambda: x * u), ("exp", lambda: mx.exp(x)), ("tanh", lambda: mx.tanh(x)),
                 ("sigmoid", lambda: mx.sigmoid(x)), ("sqrt", lambda: mx.sqrt(mx.abs(x))), ("rsqrt", lambda: mx.rsqrt(mx.abs(x))),
                 ("reciprocal", lambda: mx.reciprocal(x)), ("divide", lambda: x / u), ("exp2?power", lambda: mx.power(2.0, x)),
                 ("swiglu (mlx-lm, compiled)", lambda: swiglu(x, u)), ("silu*u uncompiled", lambda: nn.silu(x) * u),
                 ("numpy exp", lambda: mx.array(np.exp(np.array(x))))):
    t = bench(fn)
    print(f"{name:28s} {t:8.0f} us  {t * 1e3 / n:6.2f} ns/elt", flush=True)
