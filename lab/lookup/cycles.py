"""Record, per prompt, the greedy answer and each cycle's accepted drafts (CPU engine): what
estimate.py replays copies against and what the lookup on/off comparisons below came from.

    python lab/lookup/cycles.py PROMPTS.jsonl STEP TREE OUT.json [--no-lookup] [--min-match K]

STEP: every STEP-th prompt; TREE: fixed tree size (0 = chain).
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
from dflash import lookup  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.events import Cycle, Summary  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("prompts"), p.add_argument("step", type=int), p.add_argument("tree", type=int), p.add_argument("out")
p.add_argument("--no-lookup", dest="lookup", action="store_false")
p.add_argument("--min-match", type=int, default=lookup.MIN_MATCH)
a = p.parse_args()
lookup.MIN_MATCH = a.min_match
pair = load_pair("builtin:smollm2-135m-instruct", None, progress=lambda s: None)
prompts = [json.loads(line) for line in open(a.prompts)][:: a.step]
out = []
for row in prompts:
    ids = encode_prompt(pair.tokenizer, row["prompt"])
    acc = []
    for ev in stream(pair, ids, GenerationConfig(max_tokens=128, tree=a.tree, lookup=a.lookup)):
        if isinstance(ev, Cycle):
            acc.append(ev.accepted)
        elif isinstance(ev, Summary):
            summary = ev
    out.append(dict(cat=row["category"], prompt=ids, answer=list(summary.token_ids), acc=acc, tau=summary.tau))
    print(row["category"], len(summary.token_ids), round(summary.tau, 2), flush=True)
json.dump(out, open(a.out, "w"))
cycles = sum(len(r["acc"]) for r in out)
print(f"tau {1 + sum(sum(r['acc']) for r in out) / cycles:.3f} over {len(out)} prompts")
