"""Real cycle times against the cost table: fixed trees through the engine, per key chunk, the
median draft / verify / rollback of their cycles and the cycle's wall time (event to event),
next to what policy.measure_costs timed on bare passes.

    python lab/tree-calibration/cycle_costs.py PROMPTS.jsonl PER_CATEGORY TOKENS --chunks 256 128 --trees 15 31
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import backend  # noqa: E402

backend.setup()
import numpy as np  # noqa: E402

from dflash import engine, policy, target  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.events import Cycle  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402
from prompts import pick  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("prompts"), ap.add_argument("per_category", type=int), ap.add_argument("tokens", type=int)
ap.add_argument("--chunks", type=int, nargs="+", default=[256, 128])
ap.add_argument("--trees", type=int, nargs="+", default=[15, 31])
a = ap.parse_args()
pair = load_pair(progress=lambda m: None)
prompts = [encode_prompt(pair.tokenizer, r["prompt"]) for r in pick(a.prompts, a.per_category)]
for chunk in a.chunks:
    target.KEY_CHUNK = target.TILED_KEY_CHUNK = chunk
    costs = policy.measure_costs(pair, 16, context=128, tree_nodes=63)  # as the planner timed them before the thirtieth session
    for n in a.trees:
        cfg = GenerationConfig(max_tokens=a.tokens, tree=n)
        list(engine.stream(pair, prompts[0], cfg))  # warm-up
        rows, walls, ntok, t_all = [], [], 0, 0.0
        for ids in prompts:
            last = None
            for ev in engine.stream(pair, ids, cfg):
                if isinstance(ev, Cycle):
                    if last is not None:
                        walls.append(ev.t - last)
                    last = ev.t
                    rows.append((ev.draft_s, ev.verify_s, ev.rollback_s, ev.accepted))
                elif ev.kind == "summary":
                    ntok, t_all = ntok + ev.tokens - 1, t_all + ev.decode_s
        r = 1000 * np.median(np.array(rows)[:, :3], axis=0)
        print(f"chunk {chunk} tree {n}: {ntok / t_all:.2f} tok/s, tau {1 + np.mean([x[3] for x in rows]):.2f}; "
              f"median ms draft {r[0]:.1f} verify {r[1]:.1f} rollback {r[2]:.1f} wall {1000 * np.median(walls):.1f}; "
              f"table: draft {costs['draft_ms']:.1f} verify {costs['verify_ms'][n]:.1f} (step {costs['step_ms']:.1f})",
              flush=True)
