"""Does one sgemm through an OpenBLAS core type slow MLX's elementwise CPU ops afterwards?

    python lab/cpu/penalty_probe.py --blas PATH|none [--coretype C] [--vzu]

Times `mx.exp` on 16x1536 floats before any matmul, after one 16x1536x1536 matmul, and the two
together (the table of issue 27). --vzu first loads libvzu.so (vzu.c: a cblas_sgemm that calls
OpenBLAS's, then `vzeroupper` on the calling thread) to test the dirty-upper-state cause.
Build it with `gcc -O2 -shared -fPIC -o libvzu.so vzu.c -ldl`. One JSON line per run.
"""
import argparse
import ctypes
import json
import os
import statistics
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def med(fn, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(1e3 * (time.perf_counter() - t))
    return round(statistics.median(ts), 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blas", default="none")
    ap.add_argument("--coretype", default="")
    ap.add_argument("--vzu", action="store_true")
    a = ap.parse_args()
    if a.coretype:
        os.environ["OPENBLAS_CORETYPE"] = a.coretype
    if a.blas != "none":
        if a.vzu:
            os.environ["VZU_BLAS"] = a.blas
            ctypes.CDLL(os.path.join(HERE, "libvzu.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(a.blas, mode=ctypes.RTLD_GLOBAL)
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    x, w = mx.random.normal((16, 1536)), mx.random.normal((1536, 1536))
    mx.eval(x, w)
    out = {"blas": a.blas, "coretype": a.coretype, "vzu": a.vzu, "mlx": mx.__version__,
           "exp_before_ms": med(lambda: mx.eval(mx.exp(x)), 20)}
    mx.eval(x @ w)
    out["exp_after_ms"] = med(lambda: mx.eval(mx.exp(x)), 20)
    out["matmul_exp_ms"] = med(lambda: mx.eval(mx.exp(x @ w)), 10)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
