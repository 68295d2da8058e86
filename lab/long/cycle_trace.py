"""Per-cycle trace of one long-suite row: target-only and/or the default, in one process, each
cycle's drafted nodes, verify length, accepted drafts and draft / verify / rollback ms, then
tok/s (`gpu.sh trace` runs it with CUDA graphs on and off).

    python lab/long/cycle_trace.py ROW_ID MODE [MODE ...]     # MODE: dflash | target
"""

import json
import sys

from dflash import backend

backend.setup()

from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream, warm  # noqa: E402
from dflash.events import Cycle, Prefill  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def trace(pair, ids, mode: str, max_tokens: int = 128) -> None:
    cycles = []
    for e in stream(pair, ids, GenerationConfig(max_tokens=max_tokens, mode=mode)):
        if isinstance(e, Prefill):
            print(mode, "prefill", round(e.t, 1), "s", flush=True)
        elif isinstance(e, Cycle):
            cycles.append(e)
    tokens = sum(len(c.committed) for c in cycles)
    seconds = cycles[-1].t - cycles[0].t + cycles[0].verify_s + cycles[0].draft_s
    print(mode, len(ids), "tokens", tokens, "cycles", len(cycles), "tok/s", round(tokens / seconds, 2))
    for c in cycles:
        print(f"  n{len(c.drafted):3d} k{c.block_size:3d} acc {c.accepted:2d} draft {c.draft_s * 1e3:6.1f} "
              f"verify {c.verify_s * 1e3:6.1f} rb {c.rollback_s * 1e3:5.1f}")


def main(row_id: str, *modes: str) -> None:
    pair = load_pair()
    warm(pair)
    row = next(r for r in map(json.loads, open("assets/bench/long.jsonl")) if r["id"] == row_id)
    ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
    for mode in modes:
        trace(pair, ids, mode)


if __name__ == "__main__":
    main(*sys.argv[1:])
