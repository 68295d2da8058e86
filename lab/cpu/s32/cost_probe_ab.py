"""The planner's cost probe as shipped (policy.measure_costs: each pass `reps` times back to back,
"shipped") and with the passes taking turns, once a round (turns_measure_costs.py, "turns"; not
adopted), alternating on one loaded pair; every table written as JSON for planner_replay.py, and the spread of each shape's
cost in target steps printed per probe.

    python lab/cpu/s32/cost_probe_ab.py N OUTDIR
"""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import backend; backend.setup()
import numpy as np
from dflash.load import load_pair
from dflash.policy import measure_costs
from turns_measure_costs import measure_costs as turns_measure_costs

n, out = int(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
pair = load_pair(progress=lambda s: None)
tables = {"shipped": [], "turns": []}
for i in range(n):
    for name in (("shipped", "turns") if i % 2 == 0 else ("turns", "shipped")):
        fn = measure_costs if name == "shipped" else turns_measure_costs
        c = dict(fn(pair, 16, tree_nodes=63), key_chunk=pair.target.key_chunk)
        (out / f"costs-{name}-{i}.json").write_text(json.dumps(c))
        tables[name].append(c)
        print(name, i, "step %.1f draft %.1f" % (c["step_ms"], c["draft_ms"]),
              "trees", {k: round(v / c["step_ms"], 2) for k, v in c["verify_ms"].items() if k in (3, 7, 15, 31)},
              "chains", {k: round(v / c["step_ms"], 2) for k, v in c["chain_ms"].items()}, flush=True)
for name, ts in tables.items():
    for key, sizes in (("verify_ms", (3, 7, 15, 31)), ("chain_ms", (3, 7, 15))):
        for s in sizes:
            r = np.array([t[key][s] / t["step_ms"] for t in ts])
            print(f"{name} {key[:5]} {s}: steps {r.mean():.2f} +- {r.std():.2f} (range {r.min():.2f}-{r.max():.2f})")
    r = np.array([t["draft_ms"] / t["step_ms"] for t in ts])
    print(f"{name} draft: steps {r.mean():.2f} +- {r.std():.2f} (range {r.min():.2f}-{r.max():.2f})")
