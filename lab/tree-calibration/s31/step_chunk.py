"""A 1-token step at 128 / 512 / 1024 cached tokens with 128- against 64-key chunks (Intel padded path)."""
import sys, time; sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from dflash.load import load_pair
from dflash import target as T
pair = load_pair(progress=lambda s: None); t = pair.target
ids = mx.array([[(7*i+10) % 49152 for i in range(1100)]])
for C in (128, 512, 1024):
    cache = t.make_cache(); t.forward(ids[:, :C], cache); mx.eval([c.state for c in cache])
    res = {}
    for rep in range(3):
        for ch in (128, 64):
            T.TILED_KEY_CHUNK = ch
            ts = []
            for _ in range(8):
                a = time.perf_counter(); lg, _, _ = t.forward(ids[:, C:C+1], cache); mx.eval(mx.argmax(lg, -1)); ts.append(time.perf_counter() - a)
                for c in cache: c.trim(1)
            res.setdefault(ch, []).append(min(ts[1:]))
    print(C, {ch: "%.1f ms" % (1000 * min(v)) for ch, v in res.items()}, flush=True)
