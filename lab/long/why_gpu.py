"""Why do long prompts' cycles cost 2-4x more inside `bench` than the engine alone (thirty-ninth
session's open question)? One long-suite row, in one process, under what bench does differently.

    python lab/long/why_gpu.py ROW_ID [ROW_ID ...]
"""

import gc
import json
import statistics
import sys
import time

from dflash import backend

backend.setup()

import mlx.core as mx  # noqa: E402

from dflash import bench  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream, warm  # noqa: E402
from dflash.events import Cycle  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def run(pair, ids, mode="dflash"):
    t = time.perf_counter()
    cyc = [e for e in stream(pair, ids, GenerationConfig(mode, 128, tree=64 if mode == "dflash" else None))
           if isinstance(e, Cycle)]
    wall = time.perf_counter() - t
    v = [c.verify_s * 1e3 for c in cyc]
    return (f"{mode:6} {len(cyc):3} cycles, verify mean {statistics.mean(v):5.1f} median {statistics.median(v):5.1f} "
            f"max {max(v):6.1f} ms, draft {statistics.mean(c.draft_s * 1e3 for c in cyc):4.1f}, wall {wall:.2f}s")


def main(*row_ids):
    pair = load_pair()
    warm(pair)
    rows = {json.loads(l)["id"]: json.loads(l) for l in open("assets/bench/long.jsonl")}
    for rid in row_ids:
        row = rows[rid]
        ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
        print(f"== {rid} ({len(ids)} tokens)", flush=True)
        print(" dflash alone      ", run(pair, ids), flush=True)
        print(" dflash again      ", run(pair, ids), flush=True)
        print(" target first      ", run(pair, ids, "target"), flush=True)
        print("  then dflash      ", run(pair, ids), flush=True)
        mx.clear_cache()
        print(" after clear_cache ", run(pair, ids), flush=True)
        gc.disable()
        print(" gc off            ", run(pair, ids), flush=True)
        gc.enable()
        junk = [tuple(range(8)) for _ in range(2_000_000)]  # many live objects, as a long bench holds
        print(" 2M live objects   ", run(pair, ids), flush=True)
        gc.freeze()
        print("  frozen           ", run(pair, ids), flush=True)
        gc.unfreeze()
        del junk
        r = bench.bench_prompt(pair, ids, GenerationConfig(max_tokens=128, tree=64), 1)
        print(f" bench_prompt       verify {r['dflash']['verify_ms']:.1f} ms, {r['speedup']:.2f}x", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
