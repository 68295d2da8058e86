"""Which OpenBLAS core types give a matmul row that does not depend on how many rows share the call?

One core type per process (OpenBLAS reads OPENBLAS_CORETYPE once, when it loads):

    python lab/cpu/rows_probe.py --coretype Haswell [--threads 1] [--pads 1,4,8,16]

For the SmolLM2-135M shapes (projections, lm_head, attention q @ k^T and p @ v over 256-key
chunks), each block of L = 2..max_rows rows is padded with zero rows to a multiple of `pad`, and its
rows are compared bitwise with the same rows computed alone (padded the same way). Prints one
JSON line per (pad, shape): the number of (L, row) pairs that differ.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
# (name, K, N, batch): x [batch, L, K] @ w [batch or 1, K, N]
SHAPES = [("q/o_proj", 576, 576, 0), ("k/v_proj", 576, 192, 0), ("gate/up", 576, 1536, 0),
          ("down", 1536, 576, 0), ("lm_head", 576, 49152, 0),
          ("scores S=450", 64, 450, 9), ("scores S=900", 64, 900, 9), ("p@v chunk", 256, 64, 9)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coretype", default="")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--pads", default="1,4,8,16")
    ap.add_argument("--blas", default="openblas", choices=["openblas", "ref"])
    ap.add_argument("--max-rows", type=int, default=16)
    ap.add_argument("--shapes", default="", help="comma list of SHAPES names (default: all)")
    a = ap.parse_args()
    names = [n for n, *_ in SHAPES]
    shapes = [s for s in SHAPES if s[0] in a.shapes.split(",")] if a.shapes else SHAPES
    if a.shapes and len(shapes) != len(a.shapes.split(",")):
        ap.error(f"--shapes: names from {names}")
    if a.coretype:
        os.environ["OPENBLAS_CORETYPE"] = a.coretype
    if a.threads:
        os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    if a.blas == "openblas":
        ctypes.CDLL(OPENBLAS, mode=ctypes.RTLD_GLOBAL)
    import mlx.core as mx

    def mm(x, w, pad):
        L = x.shape[-2]
        Lp = -(-L // pad) * pad
        if Lp > L:
            x = mx.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, Lp - L), (0, 0)])
        return (x @ w)[..., :L, :]

    for pad in [int(p) for p in a.pads.split(",")]:
        for name, K, N, batch in shapes:
            shp = (batch,) if batch else ()
            R = a.max_rows
            x = mx.random.normal(shp + (R, K), key=mx.random.key(1))
            if name == "p@v chunk":
                x = mx.softmax(x, axis=-1)
            w = mx.random.normal(shp + (K, N), key=mx.random.key(2)) / K ** 0.5
            if name.endswith("proj") or name in ("gate/up", "down", "lm_head"):  # x @ W.T as nn.Linear
                w = mx.random.normal((N, K), key=mx.random.key(2)).T / K ** 0.5
            alone = [mm(x[..., i : i + 1, :], w, pad) for i in range(R)]
            mx.eval(alone)
            bad = 0
            for L in range(2, R + 1):
                blk = mm(x[..., :L, :], w, pad)
                bad += sum(not mx.array_equal(blk[..., i : i + 1, :], alone[i]).item() for i in range(L))
            print(json.dumps({"coretype": a.coretype or "default", "blas": a.blas, "threads": a.threads or "default",
                              "pad": pad, "shape": name, "rows_differ": bad, "rows": sum(range(2, R + 1))}), flush=True)


if __name__ == "__main__":
    main()
