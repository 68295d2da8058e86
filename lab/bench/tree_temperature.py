"""Tokens per target pass of tree verification against the temperature that scales the drafter's
logits before paths are scored (tree.TEMPERATURE), on prompts the drafter did not train on.
DFlash runs only: tau is what this measures (identity is bench's job).

    python lab/bench/tree_temperature.py --prompts lab/train/valself30.jsonl --per-category 4 \
        --trees 32 auto --temperatures 0.8 1.0 1.25 1.5 [--max-tokens 128] [--out FILE.json]
"""

import argparse
import json
from collections import defaultdict

from dflash import backend

backend.setup()

from dflash import tree  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.events import Summary  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def prompts(path, per_category):
    seen, out = defaultdict(int), []
    for line in open(path):
        row = json.loads(line)
        cat = row.get("category", "all")
        if seen[cat] < per_category:
            seen[cat] += 1
            out.append(row["prompt"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--per-category", type=int, default=4)
    ap.add_argument("--trees", nargs="+", default=["32"])
    ap.add_argument("--temperatures", type=float, nargs="+", default=[1.0])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--draft", help="drafter directory (default: the registry's)")
    ap.add_argument("--out")
    a = ap.parse_args()
    pair = load_pair(draft=a.draft, progress=lambda s: None)
    ids = [encode_prompt(pair.tokenizer, p) for p in prompts(a.prompts, a.per_category)]
    rows = []
    for t in a.trees:
        for temp in a.temperatures:
            tree.TEMPERATURE = temp
            tokens = passes = 0
            for p in ids:
                cfg = GenerationConfig(mode="dflash", max_tokens=a.max_tokens, tree=None if t == "auto" else int(t))
                s = [e for e in stream(pair, p, cfg) if isinstance(e, Summary)][0]
                tokens, passes = tokens + s.tau * s.cycles, passes + s.cycles
            # Summary's tau pooled over prompts: (passes + accepted drafts) / passes
            rows.append({"tree": t, "temperature": temp, "tau": tokens / passes, "prompts": len(ids),
                         "draft": a.draft or "shipped"})
            print(json.dumps(rows[-1]), flush=True)
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
