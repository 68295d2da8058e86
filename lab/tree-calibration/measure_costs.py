"""The cost table TreePlanner weighs (policy.measure_costs, 63 nodes), written as JSON for
planner_replay.py.

    python lab/tree-calibration/measure_costs.py OUT.json [--key-chunk N] [--context 128]
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
from dflash import policy, target  # noqa: E402
from dflash.load import load_pair  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("out"), ap.add_argument("--key-chunk", type=int, default=None)
ap.add_argument("--context", type=int, default=128), ap.add_argument("--reps", type=int, default=5)
a = ap.parse_args()
if a.key_chunk:
    target.KEY_CHUNK = target.TILED_KEY_CHUNK = a.key_chunk
pair = load_pair(progress=lambda m: None)
policy.measure_costs(pair, 16, context=a.context, reps=1, tree_nodes=63)  # warm-up: kernels compile
costs = policy.measure_costs(pair, 16, context=a.context, reps=a.reps, tree_nodes=63)
costs["key_chunk"], costs["context"] = pair.target.key_chunk, a.context
Path(a.out).write_text(json.dumps(costs, indent=1))
print(json.dumps(costs))
