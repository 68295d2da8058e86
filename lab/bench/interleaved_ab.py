"""Two DFlash variants on the same loaded target and prompt ids, interleaved prompt by prompt
(the order alternates), so that this machine's drift hits both alike. Greedy; every output must
match the first one of its prompt.

    python lab/bench/interleaved_ab.py drafters DIR_A DIR_B [--per-suite 2] [--reps 2]
        two drafters for the builtin target
    python lab/bench/interleaved_ab.py blocks K_A K_B [--per-suite 2] [--reps 2]
        two verify lengths (--block-size; "auto": the planner's) with the shipped drafter
    python lab/bench/interleaved_ab.py fullblock [--block-size K] [--per-suite 2] [--reps 2]
        at verify length K, a draft of a K-token block (the engine before 2026-11-30 13:00 UTC)
        vs the drafter's whole trained block with only K-1 positions read out (the engine now)
    python lab/bench/interleaved_ab.py costs [--per-suite 2] [--reps 2]
        tree auto with TreePlanner on bare-pass costs ("bare": the cycles' real times ignored)
        vs costs scaled by what the loop pays ("paid": the engine now)
    python lab/bench/interleaved_ab.py rows R_A R_B [--block-size K] [--per-suite 2] [--reps 2]
        the target's attention of a verify pass in one call (0) or in calls of R query rows
        (Backend.attention_rows; for MLX's CUDA backend)

The "overlap" mode (the draft evaluated asynchronously; no gain, ratio 1.006) patched the
engine's private cycle: `git show 653a394:lab/bench/interleaved_ab.py` (lab/HISTORY.md).
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS, the CUDA buffer sizes
from dflash import engine  # noqa: E402
from dflash.bench import SUITES, load_suites  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.drafter import load_drafter  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402
from dflash.target import Target  # noqa: E402

def cut_block_propose(drafter):
    """Drafter.propose as it was: the drafter fills a block cut to the verify length k."""
    import mlx.core as mx

    def propose(target, staged, k, cache):
        block = mx.array([staged] + [drafter.mask_token_id] * (k - 1))[None]
        h = drafter(target.embed(block), cache)[0, 1:]
        if drafter.vocab is None:
            return target.logits(h)
        return drafter.vocab.scatter(drafter.vocab.logits(target, h), target.vocab_size)
    return propose


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("drafters", "blocks", "rows", "fullblock", "costs"))
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--per-suite", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=None, help="rows: the verify length")
    ap.add_argument("--draft", default=None, help="blocks, rows: the drafter (default: shipped)")
    args = ap.parse_args()
    if len(args.dirs) != (0 if args.what in ("fullblock", "costs") else 2):
        ap.error("drafters takes two drafter directories, blocks two verify lengths, "
                 "rows two row counts, fullblock and costs nothing")
    pair = load_pair(draft=args.dirs[0] if args.what == "drafters" else args.draft, progress=lambda s: None)
    if args.what == "blocks":
        names = tuple(args.dirs)
        setups = {n: GenerationConfig(mode="dflash", max_tokens=128, adaptive=n == "auto",
                                      block_size=None if n == "auto" else int(n)) for n in names}
    elif args.what == "costs":
        from dflash.policy import TreePlanner
        paid = TreePlanner.observe
        names = ("bare", "paid")
        setups = {"bare": lambda self, k, acc, ms=None: paid(self, k, acc), "paid": paid}
    elif args.what == "fullblock":
        names = ("cut", "whole")
        setups = {"cut": cut_block_propose(pair.drafter), "whole": pair.drafter.propose}
    elif args.what == "rows":
        names = tuple(args.dirs)
        t = pair.target
        setups = {n: Target(t.model, t.model_type, t.tap_ids, attention_rows=int(n)) for n in names}
    else:
        other = load_drafter(args.dirs[1], pair.drafter.fc.weight.dtype)
        assert other.target_layer_ids == pair.drafter.target_layer_ids, "the two drafters tap other layers"
        names, setups = (args.dirs[0], args.dirs[1]), {args.dirs[0]: pair.drafter, args.dirs[1]: other}

    prompts = [row["prompt"] for rows in load_suites(list(SUITES), limit=args.per_suite).values()
               for row in rows]
    cfg = GenerationConfig(mode="dflash", max_tokens=128, block_size=args.block_size)
    tok_s, tau, first = {n: [] for n in names}, {n: [] for n in names}, {}
    for rep in range(args.reps):
        for i, p in enumerate(prompts):
            ids = encode_prompt(pair.tokenizer, p)
            for name in names if (i + rep) % 2 == 0 else names[::-1]:
                run_cfg = cfg
                if args.what == "blocks":
                    run_cfg = setups[name]
                elif args.what == "fullblock":
                    pair.drafter.propose = setups[name]
                elif args.what == "costs":
                    TreePlanner.observe = setups[name]
                elif args.what == "rows":
                    pair.target = setups[name]
                else:
                    pair.drafter = setups[name]
                *_, s = engine.stream(pair, ids, run_cfg)
                assert first.setdefault(i, s.token_ids) == s.token_ids, f"prompt {i}: output changed"
                tok_s[name].append(s.decode_tok_s)
                tau[name].append(s.tau)
    a, b = names
    print(json.dumps({
        "runs": len(tok_s[a]), "identical": True,
        **{n: {"median_tok_s": round(statistics.median(tok_s[n]), 2), "median_tau": round(statistics.median(tau[n]), 3),
               "tok_s": [round(x, 1) for x in tok_s[n]]} for n in names},
        "b_over_a_median_of_ratios": round(statistics.median(y / x for x, y in zip(tok_s[a], tok_s[b])), 4),
        "b_faster_in": sum(y > x for x, y in zip(tok_s[a], tok_s[b])),
    }, indent=1))


if __name__ == "__main__":
    main()
