"""The per-op-kind profile (dflash/op_profile.py) and plain step / verify times of the real
embedded target on this CPU, at a 128-token context, without a whole bench run.

    python lab/cpu/op_probe.py [auto|Sandybridge|SkylakeX|reference] --ks 1,5,16 --reps 5
"""

import argparse
import sys
from statistics import median
from time import perf_counter

from dflash import backend


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("blas", nargs="?", default="auto")
    ap.add_argument("--ks", default="1,5,16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--context", type=int, default=128)
    a = ap.parse_args()
    b = backend.setup(a.blas)

    import mlx.core as mx  # noqa: E402  (after setup: the BLAS loads first)

    from dflash import op_profile  # noqa: E402
    from dflash.load import load_target  # noqa: E402
    from dflash.registry import BUILTIN_TARGET  # noqa: E402
    from dflash.target import Target  # noqa: E402

    lm, tok, model_type = load_target(BUILTIN_TARGET, progress=lambda m: None)
    t = Target(lm, model_type, row_tile=b.row_tile)
    ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 20)[: a.context]
    cache = t.make_cache()
    mx.eval(t.forward(mx.array([ids]), cache)[0])
    print(f"{b.cpu}: BLAS {b.coretype} row_tile {b.row_tile}, dtype {t.backbone.embed_tokens.weight.dtype}, "
          f"context {len(ids)}", flush=True)

    def forward(k):
        logits, feats, _ = t.forward(mx.array([[ids[-1]] * k]), cache)
        mx.eval(logits, feats if feats is not None else logits)
        return k, feats, {}

    def drop(out):
        t.rollback(cache, {}, out[0], 0)
        mx.eval([c.state for c in cache])

    for k in (int(x) for x in a.ks.split(",")):
        times = []
        for _ in range(a.reps + 1):
            s = perf_counter()
            drop(forward(k))
            times.append(perf_counter() - s)
        o = op_profile.op_kinds(t, cache, forward, drop, k, a.reps)
        cells = " ".join(f"{kind} {ms:.1f}" for kind, ms in o["ms"].items())
        print(f"k={k:>2}: plain {median(times[1:]) * 1e3:.1f} ms (min {min(times[1:]) * 1e3:.1f}); "
              f"barriered {o['barriered_ms']:.1f}: {cells}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
