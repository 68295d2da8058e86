"""Two versions of dflash/policy.py (the planner and its cost probe), interleaved prompt by prompt
on one loaded pair: target-only, the default with policy.py of REV, the default with the working
tree's, in alternating order. Outputs asserted identical (CPU: bitwise).

    python lab/bench/planner_ab.py REV N TOKENS [PROMPTS.jsonl]   # N prompts a suite / category

REV: a git revision, or a path to a saved policy.py (the device's copy of .git can lag: save the
old file into the tree, e.g. `git show HEAD:dflash/policy.py > lab/bench/policy_before.py`).
"""
import importlib.util, json, subprocess, sys, types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from dflash import backend; backend.setup()
from dflash import engine, policy
from dflash.config import GenerationConfig
from dflash.events import Cycle, Summary
from dflash.load import encode_prompt, load_pair

rev, n, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = (Path(rev).read_text() if rev.endswith(".py") else
       subprocess.run(["git", "show", f"{rev}:dflash/policy.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout)
old = types.ModuleType("dflash._policy_old"); old.__package__ = "dflash"
exec(compile(src, "policy_old.py", "exec"), old.__dict__)

pair = load_pair(progress=lambda s: None)
prompts = []
if len(sys.argv) > 4:
    seen = {}
    for row in map(json.loads, open(sys.argv[4])):
        seen[row["category"]] = seen.get(row["category"], 0) + 1
        if seen[row["category"]] <= n:
            prompts.append(dict(row, id=f"{row['category']}-{seen[row['category']]}"))
else:
    for suite in ("chat", "code", "math"):
        prompts += [json.loads(l) for l in open(ROOT / "assets" / "bench" / f"{suite}.jsonl")][:n]

costs = {}
res = {v: [] for v in ("target", rev, "new")}
taus = {v: [] for v in res}
for i, p in enumerate([dict(prompts[0], warmup=True)] + prompts):
    ids = encode_prompt(pair.tokenizer, p["prompt"])
    outs = {}
    for v in (list(res) if i % 2 else list(res)[::-1]):  # order alternates: drift hits all alike
        if v != "target":  # this version's planner and its own cost measurement
            mod = old if v == rev else policy
            engine.TreePlanner, engine.measure_costs = mod.TreePlanner, mod.measure_costs
            pair.costs = costs.get(v)
        cfg = GenerationConfig(mode="target" if v == "target" else "dflash", max_tokens=tokens)
        for ev in engine.stream(pair, ids, cfg):
            if isinstance(ev, Summary):
                s = ev
        if v != "target":
            costs[v] = pair.costs
        if p.get("warmup"):
            continue
        outs[v] = s.token_ids
        res[v].append(s.decode_tok_s)
        taus[v].append(s.tau)
        print(p["id"], v, f"{s.decode_tok_s:.2f} tok/s tau {s.tau:.2f}", flush=True)
    assert len(set(outs.values())) <= 1 or not p.get("warmup"), "outputs differ"
    if len(set(outs.values())) > 1:
        print(p["id"], "outputs differ", flush=True)
base = np.array(res["target"])
for v in res:
    r = np.array(res[v])
    print(v, "mean tok/s %.2f" % r.mean(), "mean tau %.2f" % np.mean(taus[v]),
          "ratio vs target: geo %.3f" % np.exp(np.log(r / base).mean()))
