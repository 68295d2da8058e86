"""Where the drafter's chain first goes wrong, is the target's text the chain shifted by one?

On collect.py's files: at every staged index, the spine (each position's best candidate after
the spine's token before it, as tree.build's first children) against the target's greedy
answer. At the first mismatch j (spine c_j, target t_j), count
  - sibling:   t_j among the position's W candidates (a tree can hold it as a sibling);
  - insertion: t_{j+1} == c_j (the target wrote one token more, then the drafter's);
  - deletion:  t_j == c_{j+1} (the target skipped the drafter's c_j);
and, for each, how many tokens the shifted chain then keeps matching (the tokens a tree would
gain if it held that shifted path).

    python lab/tree-calibration/shifts.py EVAL.npz [--width 8]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import STAGED, child_scores, load  # noqa: E402


def spine(p, s):
    """The spine's tokens, depth 1..D."""
    c = child_scores(p, s)  # [D, W parent, W]
    cols, parent = [], 0
    for d in range(c.shape[0]):
        j = int(np.argmax(c[d, parent]))
        cols.append(j)
        parent = j
    return np.array([p["cand"][s, d, j] for d, j in enumerate(cols)])


def run_length(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("eval"), ap.add_argument("--width", type=int, default=8)
    a = ap.parse_args()
    prompts = load(a.eval, a.width)
    counts = {"all right": 0, "sibling": 0, "insertion": 0, "deletion": 0, "sibling or shift": 0, "none": 0}
    gain = {"insertion": [], "deletion": [], "sibling": []}
    first = []
    for p in prompts:
        g = p["g"]
        D = p["cand"].shape[1]
        for s in range(STAGED):
            c = spine(p, s)
            t = g[s + 1: s + 1 + D + 2]
            j = run_length(c, t)
            if j == D:
                counts["all right"] += 1
                continue
            first.append(j)
            sib = t[j] in p["cand"][s, j]
            ins = j + 1 < len(t) and t[j + 1] == c[j]
            dele = j + 1 < D and t[j] == c[j + 1]
            counts["sibling"] += sib
            counts["insertion"] += ins
            counts["deletion"] += dele
            counts["sibling or shift"] += sib or ins or dele
            counts["none"] += not (sib or ins or dele)
            if ins:  # t_j, then t_{j+1..} against c_j..
                gain["insertion"].append(1 + run_length(c[j:], t[j + 1:]))
            if dele:  # t_j.. against c_{j+1}..
                gain["deletion"].append(run_length(c[j + 1:], t[j:]))
            if sib:  # t_j, then the spine's own later tokens (no re-conditioning)
                gain["sibling"].append(1 + run_length(c[j + 1:], t[j + 1:]))
    n = counts["all right"] + len(first)
    print(f"{len(prompts)} prompts, {n} staged indices, width {a.width}; first mismatch at depth "
          f"{np.mean(first) + 1:.2f} on average")
    for k, v in counts.items():
        print(f"  {k:>16}: {v:5d} ({v / n:.1%})")
    for k, v in gain.items():
        if v:
            print(f"  {k:>9} then matches {np.mean(v):.2f} tokens on average (median {np.median(v):.0f}, "
                  f">= 3: {np.mean(np.array(v) >= 3):.0%})")


if __name__ == "__main__":
    main()
