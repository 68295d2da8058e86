"""The planner's cost probe (policy.measure_costs, one context at a time, nothing extrapolated) at
several context lengths on this host: ms of a target step, of tree passes and of the full chain.

    python lab/long/costs_gpu.py [CONTEXTS]   e.g. 128,512,1024,4096
"""

import sys
import time

from dflash import backend

backend.setup()

from dflash import policy  # noqa: E402
from dflash.config import MAX_TREE  # noqa: E402
from dflash.load import load_pair  # noqa: E402


def main(contexts="128,512,1024,2048,4096"):
    pair = load_pair()
    for n in map(int, contexts.split(",")):
        t = time.time()
        c = policy.measure_costs(pair, 16, context=n, tree_nodes=MAX_TREE, far=None)
        print(n, f"step {c['step_ms']:.1f}", "tree", {k: round(v, 1) for k, v in c["verify_ms"].items()},
              "chain", {k: round(v, 1) for k, v in c["chain_ms"].items()}, f"draft {c['draft_ms']:.1f}",
              f"({time.time() - t:.0f}s)", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
