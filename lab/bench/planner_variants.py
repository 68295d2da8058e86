"""Per prompt, interleaved on one loaded pair: target-only and DFlash settings, decode tok/s,
outputs asserted identical; the geometric mean ratio of each setting to target-only.

    python lab/bench/planner_variants.py target,auto,0,16 2 96     # settings, prompts a suite, tokens

Settings: target; auto (tree sized per cycle); N (a tree of N nodes; 0 = the chain at the default
length); bK (a chain of K). Writes /tmp/planner-variants-<settings>.json (results, auto's cycles).
"""
import sys, json, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from dflash.load import load_pair, encode_prompt
from dflash.config import GenerationConfig
from dflash import engine
from dflash.events import Cycle, Summary

variants = sys.argv[1].split(",")  # e.g. target,auto,0,8
n_prompts, max_tokens = int(sys.argv[2]), int(sys.argv[3])
pair = load_pair(progress=lambda s: None)
prompts = []
for suite in ("chat", "code", "math"):
    rows = [json.loads(l) for l in open(Path(__file__).resolve().parents[2] / "assets" / "bench" / f"{suite}.jsonl")]
    prompts += rows[:n_prompts]
res = {v: [] for v in variants}
trace = []
for p in prompts:
    ids = encode_prompt(pair.tokenizer, p["prompt"])
    outs = {}
    for v in variants:
        if v == "target":
            cfg = GenerationConfig(mode="target", max_tokens=max_tokens)
        elif v.startswith("b"):
            cfg = GenerationConfig(mode="dflash", max_tokens=max_tokens, block_size=int(v[1:]), tree=0)
        else:
            cfg = GenerationConfig(mode="dflash", max_tokens=max_tokens, tree=None if v == "auto" else int(v))
        cyc = []
        for ev in engine.stream(pair, ids, cfg):
            if isinstance(ev, Cycle): cyc.append((len(ev.drafted) + 1, ev.accepted, round(1000*(ev.draft_s+ev.verify_s+ev.rollback_s),1)))
            if isinstance(ev, Summary): s = ev
        outs[v] = s.token_ids
        res[v].append(s.decode_tok_s)
        if v == "auto": trace.append(cyc)
        print(p["id"], v, f"{s.decode_tok_s:.2f} tok/s tau {s.tau:.2f}", flush=True)
    assert len({o for o in outs.values()}) == 1, "outputs differ"
base = np.array(res.get("target"))
for v in variants:
    r = np.array(res[v]); print(v, "mean tok/s %.2f" % r.mean(), "ratio vs target: geo %.3f" % np.exp(np.log(r / base).mean()) if base is not None else "")
json.dump({"res": res, "trace": trace}, open("/tmp/planner-variants-%s.json" % sys.argv[1].replace(",", "_"), "w"))
