"""k-token pass times of the real embedded target at a 128-token context, medians of 10 (after 2),
for an A/B of two checkouts in alternating processes (the host drifts; run each side several times):

    for i in 1 2 3; do PYTHONPATH=/path/to/old python lab/cpu/step_ab.py; python lab/cpu/step_ab.py; done
"""
import sys, time
from statistics import median
from dflash import backend
b = backend.setup("auto")
import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache
from dflash.load import load_target
from dflash.registry import BUILTIN_TARGET
from dflash.target import Target
import dflash
lm, tok, mt = load_target(BUILTIN_TARGET, progress=lambda m: None)
t = Target(lm, mt, row_tile=b.row_tile)
ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 20)[:128]
cache = t.make_cache()
mx.eval(t.forward(mx.array([ids]), cache)[0])
out = {}
for k in (1, 5, 9, 16, 33):
    ts = []
    for r in range(12):
        t0 = time.perf_counter()
        mx.eval(t.forward(mx.array([[ids[-1]] * k]), cache)[0])
        ts.append((time.perf_counter() - t0) * 1e3)
        trim_prompt_cache(cache, k)
    out[k] = round(median(ts[2:]), 1)
print(dflash.__file__, out, flush=True)
