"""Step 4, held-out evaluation through the real engine: tau per category, and whether every DFlash
output equals target-only decoding."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .progress import progress_bar


def evaluate(pair, prompts: list[tuple[str, str]], max_tokens: int,
             progress: Callable[[str], None] = print) -> dict:
    """Greedy DFlash vs target-only on each prompt: tau per category (committed tokens / verify
    cycles, pooled over the category's prompts), identity of the outputs, the drafter's cost
    per cycle relative to one target decode step, and each prompt's counts."""
    from ..config import GenerationConfig
    from ..engine import stream
    from ..load import encode_prompt

    rows = []
    bar = progress_bar(len(prompts), "evaluating")
    for cat, text in prompts:
        ids = encode_prompt(pair.tokenizer, text)
        res = {}
        for mode in ("dflash", "target"):
            cfg = GenerationConfig(mode=mode, max_tokens=max_tokens,  # tau of the drafter's whole block
                                   block_size=pair.drafter.block_size if mode == "dflash" else None)
            *_, summary = stream(pair, ids, cfg)
            res[mode] = summary
        d, t = res["dflash"], res["target"]
        rows.append({"category": cat, "cycles": d.cycles, "accepted": sum(d.acceptance_lengths),
                     "tokens": d.tokens, "identical": d.token_ids == t.token_ids,
                     "draft_s": d.draft_s, "verify_s": d.verify_s, "target_cycles": t.cycles,
                     "target_step_s": t.verify_s, "lengths": list(d.acceptance_lengths)})
        bar.update(1)
        bar.set_postfix_str(f"tau {d.tau:.2f}", refresh=False)
    bar.close()

    def pool(rs):
        cyc = sum(r["cycles"] for r in rs)
        acc = sum(r["accepted"] for r in rs)
        lengths = [a for r in rs for a in r["lengths"]]
        B = pair.drafter.block_size
        return {"prompts": len(rs), "cycles": cyc, "tokens": sum(r["tokens"] for r in rs),
                "tau": 1 + acc / cyc if cyc else 0.0,
                "mean_prompt_tau": float(np.mean([1 + r["accepted"] / r["cycles"]
                                                  for r in rs if r["cycles"]] or [0.0])),
                "per_position": [round(sum(a > i for a in lengths) / max(len(lengths), 1), 4)
                                 for i in range(B - 1)],
                "identical": sum(r["identical"] for r in rs)}

    cats = sorted({r["category"] for r in rows})
    draft_per_cycle = sum(r["draft_s"] for r in rows) / max(sum(r["cycles"] for r in rows), 1)
    verify_per_cycle = sum(r["verify_s"] for r in rows) / max(sum(r["cycles"] for r in rows), 1)
    step = sum(r["target_step_s"] for r in rows) / max(sum(r["target_cycles"] for r in rows), 1)
    return {"max_tokens": max_tokens, "block_size": pair.drafter.block_size,
            "overall": pool(rows), "categories": {c: pool([r for r in rows if r["category"] == c])
                                                  for c in cats},
            "draft_s_per_cycle": draft_per_cycle, "verify_s_per_cycle": verify_per_cycle,
            "target_step_s": step, "draft_cost_vs_target_step": draft_per_cycle / step if step else None,
            "verify_cost_vs_target_step": verify_per_cycle / step if step else None,
            # each prompt's own numbers, in prompt order: two drafters compare prompt by prompt
            "per_prompt": [{k: r[k] for k in ("category", "cycles", "accepted", "tokens", "identical")}
                           for r in rows]}


def format_eval(res: dict) -> str:
    lines = [f"{'category':<14}{'prompts':>8}{'cycles':>8}{'tokens':>8}{'tau':>7}{'identical':>11}"]
    for name, p in list(res["categories"].items()) + [("overall", res["overall"])]:
        lines.append(f"{name:<14}{p['prompts']:>8}{p['cycles']:>8}{p['tokens']:>8}{p['tau']:>7.2f}"
                     f"{p['identical']:>8}/{p['prompts']}")
    if res["draft_cost_vs_target_step"] is not None:
        lines.append(f"draft pass {res['draft_s_per_cycle'] * 1e3:.1f} ms, verify "
                     f"{res['verify_s_per_cycle'] * 1e3:.1f} ms, target step "
                     f"{res['target_step_s'] * 1e3:.1f} ms: draft = "
                     f"{res['draft_cost_vs_target_step']:.2f} target steps")
    return "\n".join(lines)
