"""Copies from the context, replayed on recorded answers (cycles.py output), no model needed.

    python lab/lookup/estimate.py calibrate CYCLES.json   # P(copied token right | copy so far right), by match length
    python lab/lookup/estimate.py gain CYCLES.json        # first-order tau gain of a copy per cycle

`gain`: at each recorded cycle's start, the copy dflash.lookup.Index proposes is compared with the
answer; a cycle that accepted a drafts would have accepted max(a, m) with a copy matching m
tokens (later cycles are assumed to stay where they were: an estimate, not the engine).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import lookup  # noqa: E402


def match_length(idx):
    n = len(idx.tokens)
    return next((k for k in range(min(lookup.MAX_MATCH, n - 1), 0, -1)
                 if idx._starts[k - 1].get(tuple(idx.tokens[n - k:])) is not None), 0)


def calibrate(data):
    lookup.MIN_MATCH = 1
    tried, right = [0] * lookup.MAX_MATCH, [0] * lookup.MAX_MATCH
    for r in data:
        ans = r["answer"]
        idx = lookup.Index(r["prompt"] + ans[:1])
        for c in range(1, len(ans)):  # at every answer position, not only cycle starts
            k = match_length(idx)
            for j, t in enumerate(idx.propose(32)[0]):
                if c + j >= len(ans):
                    break
                e = min(k + j, lookup.MAX_MATCH) - 1
                tried[e] += 1
                right[e] += t == ans[c + j]
                if t != ans[c + j]:
                    break
            idx.extend([ans[c]])
    for k in range(lookup.MAX_MATCH):
        print(f"match {k + 1}{'+' if k + 1 == lookup.MAX_MATCH else ''}: {right[k]}/{tried[k]} = {right[k] / max(tried[k], 1):.2f}")


def gain(data):
    for min_match in (1, 2, 3):
        for max_len in (8, 15, 32):
            lookup.MIN_MATCH = min_match
            cycles = accepted = extra = rows = 0
            for r in data:
                ans, c = r["answer"], 1
                for a in r["acc"]:
                    copy = lookup.Index(r["prompt"] + ans[:c]).propose(max_len)[0]
                    m = 0
                    while m < len(copy) and c + m < len(ans) and copy[m] == ans[c + m]:
                        m += 1
                    extra += max(0, m - a)
                    accepted += a
                    rows += len(copy)
                    c += a + 1
                cycles += len(r["acc"])
            print(f"min match {min_match}, copy <= {max_len}: tau {1 + accepted / cycles:.3f} -> "
                  f"~{1 + (accepted + extra) / cycles:.3f}, copied rows/cycle <= {rows / cycles:.1f}")


if __name__ == "__main__":
    {"calibrate": calibrate, "gain": gain}[sys.argv[1]](json.load(open(sys.argv[2])))
