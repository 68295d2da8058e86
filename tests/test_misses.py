"""lab/train/misses.py relates the engine's decisions to the target's distribution at the
right positions: a slot-1 draft is accepted exactly when it is the target's top token there, and
a rejected draft never is."""

import importlib.util
import random
from pathlib import Path

from tests.test_engine import OracleDrafter, run
from tests.tiny import tiny_pair

spec = importlib.util.spec_from_file_location(
    "misses", Path(__file__).resolve().parents[1] / "lab" / "train" / "misses.py")
misses = importlib.util.module_from_spec(spec)
spec.loader.exec_module(misses)


def test_misses_read_the_target_where_the_engine_judged():
    rng = random.Random(0)
    pair = tiny_pair("qwen3_5", seed=3)
    pair.target.tap_ids = [0]
    recs = []
    for n in range(6):
        text = "".join(chr(97 + rng.randrange(26)) for _ in range(rng.randint(3, 20)))
        prompt = pair.tokenizer.encode(text)
        _, long = run(pair, prompt, mode="target", max_tokens=80)
        pair.drafter = OracleDrafter(prompt + list(long.token_ids), 16, 0.15, rng)
        recs += misses.one_prompt(pair, text, 48)
        pair.drafter = None
    assert all(r["slot1_hit"] == (r["slot1_rank"] == 1) for r in recs)
    ranks = [r["miss_rank"] for r in recs if "miss_rank" in r]
    assert sum(r["slot1_hit"] for r in recs) > 10 and len(ranks) > 10 and min(ranks) > 1
    s = misses.summarise(recs)
    assert s["cycles"] == len(recs) and s["misses"] == len(ranks)
    assert sum(b["cycles"] for b in s["slot1_by_target_top1"]) == len(recs)
