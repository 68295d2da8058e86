"""Attention scores as the CPU target computes them (cpu_rows.scores on a cache-like key view),
a token in a block vs the same token alone, over many context lengths: the one BLAS call of a
target pass whose shape depends on the context.

    python lab/cpu/scores_probe.py [auto|Sandybridge|SkylakeX] --contexts 1:1100 --blocks 5,16
    python lab/cpu/scores_probe.py Haswell --tile 8     # test-only kernels (not row-invariant)

A block of L tokens after t committed ones computes scores over t+L keys (padded to KEY_TILE);
token i of it alone sees t+i+1 keys. `chain` compares each row's scores over its visible keys;
`ctx` does the same for a tree pass's committed-key scores (the block sees the t committed
keys only), `tree` for its per-row scores against its ancestors (the block as a chain: row i's
ancestors are block rows 0..i, gathered per row as backends/cpu_attention._tree_rows_invariant does).
Keys whose count is a multiple of KEY_TILE reach the BLAS as a transposed view, the others as
a padded copy, so both layouts occur. Prints one JSON line per (mode, L) and a
summary: the contexts with any differing row.
"""

import argparse
import ctypes
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from dflash import backend  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("blas", nargs="?", default="auto")
    ap.add_argument("--tile", type=int, default=None, help="row tile for kernels backend.setup does not know")
    ap.add_argument("--contexts", default="1:1100", help="a:b[:step] (t in range(a, b, step)) or a comma list")
    ap.add_argument("--blocks", default="5,16")
    a = ap.parse_args()
    if a.blas in ("auto", "Sandybridge", "SkylakeX"):
        tile = backend.setup(a.blas).row_tile
    else:  # a core type only to show that the probe sees row-dependent kernels
        os.environ["OPENBLAS_CORETYPE"] = a.blas
        ctypes.CDLL("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", mode=ctypes.RTLD_GLOBAL)
        tile = a.tile or 0
    if a.tile is not None:
        tile = a.tile

    import mlx.core as mx  # noqa: E402

    from dflash.backends import cpu_rows  # noqa: E402

    mx.set_default_device(mx.cpu)
    B, HKV, G, D = 1, 3, 3, 64  # SmolLM2-135M: 9 query heads over 3 kv heads of 64
    try:
        if ":" in a.contexts:
            contexts = range(*map(int, a.contexts.split(":")))
        else:
            contexts = [int(x) for x in a.contexts.split(",")]
        blocks = [int(x) for x in a.blocks.split(",")]
    except ValueError:
        sys.exit(f"--contexts {a.contexts!r} / --blocks {a.blocks!r}: integers, e.g. 1:1100 and 5,16")
    if not contexts or min(contexts) < 0 or not blocks or min(blocks) < 1:
        sys.exit("no contexts, a negative context or a block under 1")
    # the KV cache: a preallocated buffer that a pass reads as a slice (cache.update_and_fetch)
    buf = mx.random.normal((B, HKV, max(contexts) + max(blocks) + 256, D), key=mx.random.key(1))
    q_all = mx.random.normal((B, HKV, G, max(blocks), D), key=mx.random.key(2)) * D ** -0.5
    mx.eval(buf, q_all)

    def scores(q, keys: int):
        return cpu_rows.scores(q, buf[:, :, None, :keys].swapaxes(-1, -2), tile)

    def ancestor_scores(q, t: int):
        """[B, Hkv, G, L, L]: row i against block keys min(j, i) (j > i: padding, masked later)."""
        L = q.shape[-2]
        idx = mx.minimum(mx.arange(L)[None], mx.arange(L)[:, None])
        kb = buf[:, :, t : t + L][:, :, idx]  # [B, Hkv, L, L, D]
        return cpu_rows.scores(q.swapaxes(2, 3), kb.swapaxes(-1, -2), tile).swapaxes(2, 3)

    def differing(t: int, L: int, mode: str) -> int:
        """Rows of a block of L after t tokens whose visible scores differ from the token alone."""
        q = q_all[..., :L, :]
        if mode == "tree":
            block = ancestor_scores(q, t)
        else:
            block = scores(q, t if mode == "ctx" else t + L)
        bad = []
        for i in range(L):
            alone = scores(q[..., i : i + 1, :], t + i + 1)[..., 0, :]
            if mode == "tree":
                bad.append(mx.any(block[..., i, : i + 1] != alone[..., t : t + i + 1]))
            else:
                seen = t if mode == "ctx" else t + i + 1
                bad.append(mx.any(block[..., i, :seen] != alone[..., :seen]))
        return sum(mx.stack(bad).tolist())

    where = {}
    for mode in ("chain", "ctx", "tree"):
        for L in blocks:
            rows = bad = 0
            for t in contexts:
                if mode == "ctx" and t == 0:
                    continue
                n = differing(t, L, mode)
                rows, bad = rows + L, bad + n
                if n:
                    where.setdefault(f"{mode} L={L}", []).append(t)
            print(json.dumps({"blas": a.blas, "tile": tile, "mode": mode, "L": L, "contexts": len(contexts),
                              "rows": rows, "rows_differ": bad}), flush=True)
    print(json.dumps({"contexts_with_differences": {k: v[:40] for k, v in where.items()},
                      "counts": {k: len(v) for k, v in where.items()}}), flush=True)


if __name__ == "__main__":
    main()
