"""Per-cycle verify and draft ms of one long-suite prompt, run twice in one process (the second
run after every shape was seen once), with a fixed tree: where a long prompt's cycles go.

    python lab/long/cycles_gpu.py ROW_ID [TREE [warm]]     e.g. 1k-code 64 warm
"""

import json
import sys

from dflash import backend

backend.setup()

from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.events import Cycle  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def main(row_id, tree="64", warm=""):
    pair = load_pair()
    if warm:  # the cost probe first, as the bench and the servers do when a pair loads
        from dflash.engine import warm as warm_up
        warm_up(pair)
    row = next(json.loads(l) for l in open("assets/bench/long.jsonl") if json.loads(l)["id"] == row_id)
    ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
    for run in (1, 2):
        cycles = [e for e in stream(pair, ids, GenerationConfig(max_tokens=128, tree_nodes=int(tree)))
                  if isinstance(e, Cycle)]
        print(f"run {run}: {len(ids)} prompt tokens, {len(cycles)} cycles")
        print(" ".join(f"{c.block_size}:{c.verify_s * 1e3:.0f}/{c.draft_s * 1e3:.0f}" for c in cycles))


if __name__ == "__main__":
    main(*sys.argv[1:])
