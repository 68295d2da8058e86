"""The probes' timer: median ms (or µs) of `reps` evaluations after a few warm-ups."""
import time

import mlx.core as mx
import numpy as np


def bench(fn, reps=60, warm=5, unit=1e6):
    for _ in range(warm):
        mx.eval(fn())
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        mx.eval(fn())
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * unit
