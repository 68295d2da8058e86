"""Per-cycle trace of one long-suite row with the default engine: nodes, accepted, draft /
verify / rollback ms per cycle, then tok/s; modes: dflash, target.

    python lab/long/cycle_trace.py ROW_ID dflash [target]
"""
import json, statistics, sys, time
from dflash import backend
backend.setup()
from dflash.config import GenerationConfig
from dflash.engine import stream, warm
from dflash.events import Cycle, Prefill
from dflash.load import encode_prompt, load_pair
row_id = sys.argv[1]
pair = load_pair(); warm(pair)
row = next(r for r in map(json.loads, open("assets/bench/long.jsonl")) if r["id"] == row_id)
ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
for mode in sys.argv[2:]:
    cfg = GenerationConfig(max_tokens=128) if mode == "dflash" else GenerationConfig(max_tokens=128, mode="target")
    t0 = time.perf_counter(); cyc = []
    for e in stream(pair, ids, cfg):
        if isinstance(e, Prefill): print(mode, "prefill", round(e.t, 1), "s", flush=True)
        if isinstance(e, Cycle): cyc.append(e)
    tot = sum(len(c.committed) for c in cyc); dt = cyc[-1].t - cyc[0].t + cyc[0].verify_s + cyc[0].draft_s
    print(mode, len(ids), "tokens", tot, "cycles", len(cyc), "tok/s", round(tot / dt, 2))
    for c in cyc:
        print(f"  n{len(c.drafted):3d} k{c.block_size:3d} acc {c.accepted:2d} draft {c.draft_s*1e3:6.1f} verify {c.verify_s*1e3:6.1f} rb {c.rollback_s*1e3:5.1f}")
