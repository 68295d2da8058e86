"""Run under `mlx.launch -n 2` by tests/test_distributed.py: tiny targets sharded over the ranks,
each generation run by every rank; rank 0 prints one JSON line of the token ids.

    worker.py FAMILIES [--drafter-seed-per-rank]

Then rank 0 leads the requests a server sends (cluster.Leader) and rank 1 follows them: a
logit-margin prefill, a request refused on both ranks, a generation, STOP.

--drafter-seed-per-rank: each rank's drafter gets other weights, so their drafts differ and the
ranks disagree: the run must stop with RankMismatch (exit 3), not diverge.
"""

from __future__ import annotations

import json
import random
import sys

import mlx.core as mx

from dflash import cluster, distributed
from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.events import Cycle
from tests.test_engine import OracleDrafter
from dflash.load import Pair
from dflash.target import Target
from tests.tiny import VOCAB, FakeTokenizer, tiny_drafter, tiny_model

PROMPT = [12, 12, 12, 12, 40, 12, 12, 12]
N = 24


def gen(pair, mode: str, max_tokens: int = N, **kw) -> dict:
    events = list(stream(pair, PROMPT, GenerationConfig(mode, max_tokens, **kw)))
    s, last = events[-1], events[-2] if len(events) > 2 else None
    cut = isinstance(last, Cycle) and len(last.committed) < last.accepted + 1  # stopped mid-block
    return {"ids": list(s.token_ids), "finish": s.finish_reason, "tau": s.tau, "cut": cut,
            "verify": s.verify}


def first_new(ids: list[int], start: int) -> int:
    """A token that first occurs at or after `start` (a stop token reached late)."""
    return next(t for i, t in enumerate(ids) if i >= start and t not in ids[:i])


def run_family(family: str, group, drafter_seed: int) -> dict:
    drafter = tiny_drafter(block_size=8, seed=drafter_seed)  # untied heads: varied outputs
    pair = Pair(Target(tiny_model(family, 3, tied=False), family, drafter.target_layer_ids),
                drafter, FakeTokenizer(), family, None)
    out = {"single": gen(pair, "target")}  # before sharding: sums in another order
    distributed.shard_pair(pair, group)
    out["target"] = ref = gen(pair, "target", N + 8)
    out["random_chain"] = gen(pair, "dflash", block_size=4, tree=0)
    if pair.target.tree_capable:
        out["random_tree"] = gen(pair, "dflash", tree=8)
    # the planners: rank 0's measured costs on every rank, each choice checked
    out["random_auto"] = gen(pair, "dflash")  # tree size per cycle (a chain for qwen3_5)
    out["random_adaptive"] = gen(pair, "dflash", adaptive=True, tree=0)
    out["auto_verify"] = {k: out[k]["verify"] for k in ("random_auto", "random_adaptive")}
    # the target's own continuation with errors: long accepted runs, then rejections
    real = pair.drafter
    pair.target.tap_ids, pair.drafter = [0], OracleDrafter(PROMPT + ref["ids"], 8, 0.3, random.Random(0))
    out["oracle_chain"] = gen(pair, "dflash", block_size=4, tree=0)
    if pair.target.tree_capable:
        out["oracle_tree"] = gen(pair, "dflash", tree=8)
    pair.drafter = OracleDrafter(PROMPT + ref["ids"], 8, 0.0, random.Random(0))  # full blocks
    pair.tokenizer.eos_token_ids = {first_new(ref["ids"], 6)}
    out["eos"] = {"target": gen(pair, "target"), "dflash": gen(pair, "dflash", block_size=4, tree=0)}
    pair.tokenizer.eos_token_ids = {VOCAB}
    out["max7"] = gen(pair, "dflash", 7, block_size=4, tree=0)
    pair.drafter = real
    return out


def lead_and_follow(group) -> dict:
    """Rank 0: the Leader's requests; rank 1: `follow` runs them and logs each one."""
    drafter = tiny_drafter(block_size=8, seed=1)
    pair = Pair(Target(tiny_model("llama", 3, tied=False), "llama", drafter.target_layer_ids),
                drafter, FakeTokenizer(), "llama", None)
    distributed.shard_pair(pair, group)
    if group.rank() != 0:
        n = cluster.follow(pair, group, log=lambda m: print(m, flush=True))
        print(f"rank 1: followed {n} requests", flush=True)
        return {}
    lead = cluster.Leader(group)
    out = {"margin": lead.margin(pair, PROMPT, [7, 9])}
    try:
        list(lead.stream(pair, PROMPT, GenerationConfig("dflash", 600)))  # past the context
    except ValueError as e:
        out["refused"] = str(e)
    *_, s = lead.stream(pair, PROMPT, GenerationConfig("dflash", 12, block_size=4, tree=0))
    out["ids"] = list(s.token_ids)
    lead.stop()
    return out


def main(argv: list[str]) -> int:
    group = distributed.init("ring")
    disagree = "--drafter-seed-per-rank" in argv
    try:
        doc = {f: run_family(f, group, 1 + (group.rank() if disagree else 0))
               for f in argv[0].split(",")}
        doc["lead"] = lead_and_follow(group)
        rc = 0
        if group.rank() == 0:
            print(json.dumps(doc), flush=True)
    except distributed.RankMismatch as e:  # raised on every rank, at the same cycle
        print(f"rank {group.rank()}: {e}", flush=True)
        rc = 3
    # mlx.launch stops the other ranks when one exits (and exits 0 itself): leave together
    mx.eval(mx.distributed.all_sum(mx.array(1), group=group))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
