"""A fixed tree shape against the engine's best-first trees, replayed on collect.py's files.

A static tree is a set of rank paths (r1, r2, ...): the r1-th most probable child of the root,
then that node's r2-th child (children ranked by tree._child_scores: the drafter's log-probs
re-ranked by the Markov transitions after the parent), and so on. Its shape, fitted once on FIT
(the N rank paths the target's answers followed most often), does not depend on a cycle's
draft, so on a GPU its tokens could be gathered on the device and the verify pass queued right
behind the drafter, without the candidates' round trip and the host's build. What does a fixed
shape cost in tau against `tree.build` of the same N, on EVAL, along the engine's cycle walk
(no copies in either)?

    python lab/tree-calibration/static_tree.py FIT.npz EVAL.npz [--nodes 8 16 32 64]
"""
import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

from dflash import tree  # noqa: E402
from replay import STAGED, load  # noqa: E402


def truth_ranks(p, s):
    """The rank path the target's answer takes through the candidates at staged index s."""
    c = tree._child_scores(p["logp"][s], p["bias"][s])
    order = np.argsort(-c, axis=-1, kind="stable")
    cand, g, ranks, pc = p["cand"][s], p["g"], [], 0
    for d in range(cand.shape[0]):
        hit = np.nonzero(cand[d] == g[s + 1 + d])[0]
        if not len(hit):
            break
        j = int(hit[0])
        ranks.append(int(np.nonzero(order[d, pc] == j)[0][0]))
        pc = j
    return tuple(ranks)


def fit(prompts, n):
    counts = Counter()
    for p in prompts:
        for s in range(STAGED):
            r = truth_ranks(p, s)
            counts.update(r[:k] for k in range(1, len(r) + 1))
    return set(sorted(counts, key=lambda r: (-counts[r], len(r), r))[:n])


def walk(p, accepted):
    s, cycles = 0, 0
    while s < STAGED:
        s += accepted(s) + 1
        cycles += 1
    return s / cycles


def static_accepts(shape):
    def acc(p, s):
        r = truth_ranks(p, s)
        k = 0
        while k < len(r) and r[: k + 1] in shape:
            k += 1
        return k
    return acc


def dynamic_accepts(n):
    def acc(p, s):
        tr = tree.build(int(p["g"][s]), p["cand"][s], p["logp"][s], n, p["bias"][s])
        return len(tr.follow([int(x) for x in p["g"][s + 1 : s + 17]]))
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fit"), ap.add_argument("eval")
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 16, 32, 64])
    a = ap.parse_args()
    fit_p, ev = load(a.fit), load(a.eval)
    for n in a.nodes:
        shape = fit(fit_p, n)
        depth = max(len(r) for r in shape)
        st = [walk(p, lambda s, p=p: static_accepts(shape)(p, s)) for p in ev]
        dy = [walk(p, lambda s, p=p: dynamic_accepts(n)(p, s)) for p in ev]
        print(f"{n} nodes: best-first tau {np.mean(dy):.3f}, static {np.mean(st):.3f} "
              f"({np.mean(st) / np.mean(dy) - 1:+.1%}), static depth {depth}, "
              f"static better / worse on {sum(x > y for x, y in zip(st, dy))} / "
              f"{sum(x < y for x, y in zip(st, dy))} of {len(ev)} prompts", flush=True)


if __name__ == "__main__":
    main()
