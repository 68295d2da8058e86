"""Tree pass costs on the GPU: dflash/kernels.py's one-launch tree attention against mx.fast's
masked call, and the chain pass, on the embedded pair (what TreePlanner weighs).

    python lab/bench/tree_kernel_probe.py [--context 128] [--reps 20]
"""

import argparse
import json

from dflash import backend

backend.setup()

import mlx.core as mx  # noqa: E402

from dflash import kernels, policy  # noqa: E402
from dflash.load import load_pair  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    pair = load_pair(progress=lambda s: None)
    print(mx.default_device(), "kernel available:", kernels.available(mx.float16), kernels.available(mx.bfloat16),
          kernels.available(mx.float32), "target dtype", pair.target.backbone.norm.weight.dtype)
    out = {}
    for name, fn in (("kernel", kernels.tree_attention_gpu), ("masked", kernels.masked_attention)):
        kernels.tree_attention_gpu = fn if name == "masked" else out.setdefault("_orig", fn)
        costs = policy.measure_costs(pair, 16, context=a.context, reps=a.reps, tree_nodes=64)
        out[name] = costs
        print(name, json.dumps({k: (round(v, 2) if isinstance(v, float) else {n: round(t, 2) for n, t in v.items()})
                                for k, v in costs.items()}))
    out.pop("_orig")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
