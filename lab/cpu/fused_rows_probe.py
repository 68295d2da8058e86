"""Row invariance and cost of fused / re-laid-out projections on the SkylakeX kernels.

    python lab/cpu/fused_rows_probe.py [--coretype SkylakeX] [--pads 1,2,4,8] [--max-rows 40]

Shapes are the SmolLM2-135M projections, alone and fused (q|k|v as one [960, 576] weight, k|v,
gate|up), in nn.Linear's layout (x @ W.T: the BLAS sees a transposed operand) and stored
transposed (x @ Wt, Wt [K, N] contiguous: NoTrans). For each, blocks of L = 2..max_rows rows
(zero-padded to a multiple of `pad`) against each row alone (padded the same way): the number of
(L, row) pairs whose bits differ, and the median ms of one call at 1 row and at 8 rows.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
from statistics import median
from time import perf_counter

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
SHAPES = {"q/o": (576, 576), "k/v": (576, 192), "qkv": (576, 960), "kv": (576, 384),
          "gate/up": (576, 1536), "gate|up": (576, 3072), "down": (1536, 576)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coretype", default="SkylakeX")
    ap.add_argument("--pads", default="1,2,4,8")
    ap.add_argument("--max-rows", type=int, default=40)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--layouts", default="linear,t")
    a = ap.parse_args()
    os.environ["OPENBLAS_CORETYPE"] = a.coretype
    ctypes.CDLL(OPENBLAS, mode=ctypes.RTLD_GLOBAL)
    import mlx.core as mx

    def mm(x, w, pad):
        L = x.shape[-2]
        Lp = -(-L // pad) * pad
        if Lp > L:
            x = mx.pad(x, [(0, 0), (0, Lp - L), (0, 0)])
        return (x @ w)[:, :L, :]

    def cost(w, rows):
        x = mx.random.normal((1, rows, w.shape[0]))
        mx.eval(x)
        ts = []
        for _ in range(15):
            t0 = perf_counter()
            mx.eval(x @ w)
            ts.append((perf_counter() - t0) * 1e3)
        return round(median(ts[3:]), 3)

    for name in a.shapes.split(","):
        K, N = SHAPES[name]
        W = mx.random.normal((N, K), key=mx.random.key(2)) / K ** 0.5
        for layout in a.layouts.split(","):
            w = W.T if layout == "linear" else mx.contiguous(W.T)
            mx.eval(w)
            R = a.max_rows
            x = mx.random.normal((1, R, K), key=mx.random.key(1))
            for pad in [int(p) for p in a.pads.split(",")]:
                alone = [mm(x[:, i : i + 1], w, pad) for i in range(R)]
                mx.eval(alone)
                bad = 0
                for L in range(2, R + 1):
                    blk = mm(x[:, :L], w, pad)
                    bad += sum(not mx.array_equal(blk[:, i : i + 1], alone[i]).item() for i in range(L))
                print(json.dumps({"shape": name, "layout": layout, "pad": pad, "rows_differ": bad,
                                  "rows": sum(range(2, R + 1)), "ms_1row": cost(w, pad), "ms_8rows": cost(w, 8)}),
                      flush=True)


if __name__ == "__main__":
    main()
