"""Would OpenBLAS's FMA kernels (Haswell = Zen) with every pass padded to 16 rows pay on an AMD
host? Section 1 found those kernels row-invariant only at 16-row tiles (attention's p @ v not
even then), so a padded design would run the 1-token step as a 16-row pass. Times the real
target's k-row passes at a 128-token context with the given kernels, rows unpadded (k = 16 is
what a padded step or small tree would cost), min / median of 9 after a warm-up.

    python lab/cpu/haswell_probe.py Sandybridge; python lab/cpu/haswell_probe.py Haswell
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend, blas  # noqa: E402

core = sys.argv[1]
blas.KERNELS.setdefault(core, 16)  # a core type the product does not offer: this probe only
backend.BLAS_CHOICES = tuple(set(backend.BLAS_CHOICES) | {core})
print(core, "->", backend.setup(core).coretype)
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash.load import load_pair  # noqa: E402

t = load_pair(progress=lambda s: None).target
t.row_tile = 0  # raw row counts
ids = mx.array([[(7 * i + 10) % t.vocab_size for i in range(200)]])
cache = t.make_cache()
t.forward(ids[:, :128], cache)
mx.eval([c.state for c in cache])
for k in (1, 9, 16, 17, 32):
    ms = []
    for _ in range(10):
        t0 = time.perf_counter()
        logits, _, _ = t.forward(ids[:, 128:128 + k], cache)
        mx.eval(mx.argmax(logits, -1))
        ms.append((time.perf_counter() - t0) * 1e3)
        for c in cache:
            c.trim(k)
    print(f"{core} {k:2d} rows: min {min(ms[1:]):.1f} median {np.median(ms[1:]):.1f} ms")
