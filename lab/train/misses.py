"""Where the drafter's misses fall in the target's own distribution.

Runs the engine (DFlash, greedy) on held-out prompts, then the target once over each prompt +
answer for its next-token distribution at every answer position, and relates the engine's real
decisions to it: at each cycle's first slot, acceptance against the target's top-1 probability;
at each rejection, the rank and probability of the drafted token and how sure the target was.

    python lab/train/misses.py [--prompts assets/prompts/eval.jsonl] [--out misses.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS, the CUDA buffer sizes
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.events import Cycle, Prefill  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402
from dflash.train import read_prompts  # noqa: E402

BINS = [0.0, 0.3, 0.5, 0.7, 0.9, 1.0001]


def target_probs(pair, ids: list[int]) -> np.ndarray:
    """[len(ids), V] next-token probabilities of one causal pass (row q predicts ids[q+1])."""
    logits, _, _ = pair.target.forward(mx.array(ids)[None], pair.target.make_cache())
    return np.array(mx.softmax(logits[0].astype(mx.float32), -1))


def one_prompt(pair, text: str, max_tokens: int) -> list[dict]:
    """One record per cycle: the target's view of its first slot and of its first rejection."""
    prompt = encode_prompt(pair.tokenizer, text)
    events = list(stream(pair, prompt, GenerationConfig(max_tokens=max_tokens,
                                                        block_size=pair.drafter.block_size)))
    answer = list(events[-1].token_ids)
    probs = target_probs(pair, prompt + answer)
    pos, out = len(prompt), []  # pos: the staged token's position
    dv = getattr(pair.drafter, "vocab", None)
    vocab = set(dv.ids.tolist()) if dv is not None else None
    assert isinstance(events[0], Prefill)
    for c in (e for e in events if isinstance(e, Cycle)):
        p1 = probs[pos]  # the distribution slot 1 is drafted against
        rec = {"accepted": c.accepted, "top1": float(p1.max()), "slot1_hit": c.accepted > 0,
               "slot1_rank": int((p1 > p1[c.drafted[0]]).sum()) + 1 if c.drafted else None}
        miss = c.accepted < len(c.drafted) and len(c.committed) == c.accepted + 1
        if miss:
            q = probs[pos + c.accepted]  # where the rejected draft was judged
            d = c.drafted[c.accepted]
            top2 = np.sort(q)[-2:]
            rec.update(miss_slot=c.accepted + 1, miss_top1=float(top2[1]), miss_top2=float(top2[0]),
                       miss_rank=int((q > q[d]).sum()) + 1, miss_p_draft=float(q[d]),
                       miss_outside_vocab=vocab is not None and int(q.argmax()) not in vocab)
        out.append(rec)
        pos += len(c.committed)
    return out


def _ranks(rank: np.ndarray) -> dict:
    """Shares of the rejected drafts by their rank in the target's distribution (1 = a tie)."""
    share = lambda sel: round(float(sel.mean()), 4) if len(rank) else None
    return {"n": int(len(rank)), "1 (a tie)": share(rank == 1), "2": share(rank == 2),
            "3-5": share((rank >= 3) & (rank <= 5)), ">5": share(rank > 5)}


def summarise(recs: list[dict]) -> dict:
    top1 = np.array([r["top1"] for r in recs])
    hit = np.array([r["slot1_hit"] for r in recs])
    misses = [r for r in recs if "miss_rank" in r]
    rank = np.array([r["miss_rank"] for r in misses])
    slot1 = np.array([r["miss_slot"] == 1 for r in misses])
    m_top1 = np.array([r["miss_top1"] for r in misses])
    margin = m_top1 - np.array([r["miss_top2"] for r in misses])
    bins = []
    for lo, hi in zip(BINS, BINS[1:]):
        sel = (top1 >= lo) & (top1 < hi)
        bins.append({"target_top1": f"{lo:.1f}-{min(hi, 1):.1f}", "cycles": int(sel.sum()),
                     "share": round(float(sel.mean()), 4),
                     "slot1_accepted": round(float(hit[sel].mean()), 4) if sel.any() else None})
    return {
        "cycles": len(recs), "tau": 1 + float(np.mean([r["accepted"] for r in recs])),
        "slot1_accepted": round(float(hit.mean()), 4),
        "slot1_by_target_top1": bins,
        "misses": len(misses),
        "miss_draft_rank": _ranks(rank),
        "miss_at_slot1_draft_rank": _ranks(rank[slot1]),  # the drafter's plain next-token guess
        "miss_later_slot_draft_rank": _ranks(rank[~slot1]),  # drafted in parallel, unconditioned
        "miss_at_slot1": round(float(slot1.mean()), 4),
        # the target's token lies outside the draft vocabulary: a miss no drafter could avoid
        "miss_outside_draft_vocab": round(float(np.mean([r["miss_outside_vocab"] for r in misses])), 4),
        "miss_target_top1_median": round(float(np.median(m_top1)), 4),
        "miss_target_top1_below_0.5": round(float((m_top1 < 0.5).mean()), 4),
        "miss_margin_top1_top2_median": round(float(np.median(margin)), 4),
        "miss_p_draft_median": round(float(np.median([r["miss_p_draft"] for r in misses])), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", default="assets/prompts/eval.jsonl")
    ap.add_argument("--target", default=None, help="default: the embedded pair")
    ap.add_argument("--draft", default=None)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    pair = load_pair(a.target, a.draft, progress=lambda s: print(s, file=sys.stderr))
    per_cat: dict[str, list[dict]] = {}
    for i, (cat, text) in enumerate(read_prompts(a.prompts)):
        per_cat.setdefault(cat, []).extend(one_prompt(pair, text, a.max_tokens))
        print(f"{i + 1} prompts", file=sys.stderr, end="\r")
    res = {"prompts": a.prompts, "max_tokens": a.max_tokens, "block_size": pair.drafter.block_size,
           "overall": summarise([r for rs in per_cat.values() for r in rs]),
           "categories": {c: summarise(rs) for c, rs in sorted(per_cat.items())}}
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
