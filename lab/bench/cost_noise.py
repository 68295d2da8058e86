"""How much the planner's cost probe moves between runs on this host: `policy.measure_costs`
for the default tree (block 16, up to 64 nodes) N times on one loaded pair, each table printed
(ms of a plain step, tree passes by drafted nodes, chain passes, a draft with its tree build).

    python lab/bench/cost_noise.py [N]
ROUNDS=R: each table the per-shape minimum of R probes run back to back (a slow stretch of the
host then rarely covers the same shape in every round); REPS: runs per shape in a probe.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402


def main() -> None:
    backend.setup()
    from dflash.config import MAX_TREE  # noqa: E402
    from dflash.load import load_pair  # noqa: E402
    from dflash.policy import measure_costs  # noqa: E402

    pair = load_pair(progress=lambda s: None)
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        tables = [measure_costs(pair, pair.drafter.block_size, tree_nodes=MAX_TREE, reps=int(os.environ.get("REPS", 3)))
                  for _ in range(int(os.environ.get("ROUNDS", 1)))]
        c = {k: ({n: min(t[k][n] for t in tables) for n in tables[0][k]} if isinstance(tables[0][k], dict)
                 else min(t[k] for t in tables)) for k in ("step_ms", "verify_ms", "chain_ms", "draft_ms")}
        print(json.dumps({k: ({n: round(v, 1) for n, v in c[k].items()} if isinstance(c[k], dict) else round(c[k], 1))
                          for k in ("step_ms", "verify_ms", "chain_ms", "draft_ms")}), flush=True)


if __name__ == "__main__":
    main()
