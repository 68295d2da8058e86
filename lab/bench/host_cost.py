"""What a pass costs the host before the device runs it: the time to BUILD the graph of one
target pass (no evaluation), ours against mlx-lm's own model call, at a cache of C keys.

On an H200 a 135M target is bound by the host (kernel launches, graph building), so host
microseconds a layer are the GPU's step. Graph building costs the same on any MLX backend,
so this runs on a CPU too; `--gpu-path` builds the CUDA backend's layer (attention in calls
of CUDA_VERIFY_ROWS rows) on whichever device this is.

    python lab/bench/host_cost.py [--context 200] [--reps 200] [--gpu-path]
"""

import argparse
import json
import statistics
import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402

from dflash.load import load_pair  # noqa: E402
from dflash.target import Target  # noqa: E402
from dflash import tree as tree_mod  # noqa: E402


def build_time(fn, cache, n_fed, reps):
    """Median µs to build fn's graph; the caches are trimmed back after each (nothing evaluated
    beyond what fn itself forces)."""
    out = []
    for _ in range(reps):
        t = perf_counter()
        fn()
        out.append(1e6 * (perf_counter() - t))
        for c in cache:
            c.trim(n_fed)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--gpu-path", action="store_true", help="the CUDA backend's layer path")
    args = ap.parse_args()
    pair = load_pair(progress=lambda s: None)
    t0 = pair.target
    target = (Target(t0.model, t0.model_type, t0.tap_ids, attention_rows=backend.CUDA_VERIFY_ROWS)
              if args.gpu_path else t0)
    cache = target.make_cache()
    target.prefill(list(range(100, 100 + args.context)), cache)
    one = mx.array([[42]])
    rows = {}
    rows["mlx-lm model(1 token)"] = build_time(lambda: target.model(one, cache=cache), cache, 1, args.reps)
    rows["ours forward(1 token)"] = build_time(lambda: target.forward(one, cache), cache, 1, args.reps)
    # a 64-node tree as the GPU default verifies it (random drafter-shaped candidates)
    import numpy as np
    rng = np.random.default_rng(0)
    ids = rng.integers(100, 40000, (15, 8))
    logp = np.sort(np.log(rng.dirichlet(np.ones(8), 15)), -1)[:, ::-1]
    tr = tree_mod.build(7, ids, logp, 64).spine_first()
    rows["tree Layout.of(64)"] = build_time(lambda: tree_mod.Layout.of(tr), [], 0, args.reps)
    lay = tree_mod.Layout.of(tr)
    mx.eval(lay.depth, lay.ancestors, lay.visible)
    ids65 = mx.array([tr.tokens])
    if mx.default_device() != mx.cpu:  # the CPU tree pass is another layout
        rows["ours tree forward(65)"] = build_time(lambda: target.forward(ids65, cache, tree=lay), cache, 65, args.reps)
    print(json.dumps({"device": str(mx.default_device()), "context": args.context,
                      "gpu_path": args.gpu_path, "build_us": {k: round(v, 1) for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
