"""Two drafters (e.g. without and with the Markov head, or two heads) on the same loaded target
and prompts: greedy, the chain (verify length 16) and trees of N nodes; tau and whether each
output equals target-only decoding. `--base` is labelled "base", `--head` "head".

    python lab/markov-head/engine_ab.py --base DIR_WITHOUT_HEAD --head assets/smollm2-135m-instruct-dflash
    python lab/markov-head/engine_ab.py --base assets/smollm2-135m-instruct-dflash --head NEW_DIR \
        --tree 15 32 --limit 6
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import dflash  # noqa: F401  (the CPU BLAS before mlx loads)

from dflash.config import GenerationConfig
from dflash.drafter import load_drafter
from dflash.engine import stream
from dflash.load import encode_prompt, load_pair
from dflash.train import read_prompts


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--head", required=True)
    p.add_argument("--prompts", default="assets/prompts/eval.jsonl")
    p.add_argument("--per-category", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--tree", type=int, nargs="+", default=[15])
    p.add_argument("--limit", type=int, default=0, help="only the first N prompts picked (0: all)")
    args = p.parse_args()
    pair = load_pair("builtin:smollm2-135m-instruct", args.head, progress=lambda s: None)
    base = load_drafter(args.base, dtype=pair.drafter.fc.weight.dtype)
    pairs = {"base": dataclasses.replace(pair, drafter=base), "head": pair}
    seen, prompts = {}, []
    for cat, text in read_prompts(args.prompts):
        seen[cat] = seen.get(cat, 0) + 1
        if seen[cat] <= args.per_category:
            prompts.append(encode_prompt(pair.tokenizer, text))
    prompts = prompts[: args.limit or None]
    runs = {"chain16": dict(block_size=16, tree=0)}
    runs.update({f"tree{n}": dict(tree=n, block_size=16) for n in args.tree})
    res = {f"{d}-{r}": [0, 0, 0] for d in pairs for r in runs}  # cycles, committed, identical
    for ids in prompts:
        *_, t = stream(pair, ids, GenerationConfig(mode="target", max_tokens=args.max_tokens))
        for d, pr in pairs.items():
            for r, kw in runs.items():
                *_, s = stream(pr, ids, GenerationConfig(max_tokens=args.max_tokens, **kw))
                c = res[f"{d}-{r}"]
                c[0] += s.cycles
                c[1] += round(s.tau * s.cycles)
                c[2] += s.token_ids == t.token_ids
        print(json.dumps({k: [round(v[1] / max(v[0], 1), 3), v[2]] for k, v in res.items()}), flush=True)
    print(json.dumps({k: {"cycles": v[0], "tau": v[1] / max(v[0], 1), "identical": f"{v[2]}/{len(prompts)}"}
                      for k, v in res.items()}, indent=1))


if __name__ == "__main__":
    main()
