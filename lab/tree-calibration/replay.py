"""Tree policies replayed on collect.py's files: tau of best-first trees of N nodes along each
prompt's greedy answer, with the drafter's path scores as the engine takes them or calibrated.

    python lab/tree-calibration/replay.py FIT.npz EVAL.npz [--nodes 8 16 32 64] [--width W]
        [--copy PROMPTS.jsonl PER_CATEGORY]

A tree's node score is the sum of its path's child scores (tree._child_scores: the drafter's
log-probs with the Markov transitions). Those are the drafter's marginal probabilities at each
block position; best-first trees are optimal when a score is the log-probability that the whole
path is right, i.e. when each child score is P(child right | its parent's path right). The fit
measures that conditional rate on FIT.npz per depth and per bin of the child score
(isotonic), and the replay builds trees (tree.build, the engine's) with the fitted map.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

from dflash import lookup, tree  # noqa: E402

STAGED = 128
MISS = {"not a candidate": 0, "outside the budget": 0}


def load(path, width=None):
    """collect.py's prompts, their candidates cut to the first `width` a position (best first)."""
    z = np.load(path)
    keys = sorted({k.split("/")[0] for k in z.files}, key=lambda k: int(k.rsplit("-", 1)[1]))
    w = slice(None, width)
    return [{"g": z[f"{k}/g"], "cand": z[f"{k}/cand"][..., w], "logp": z[f"{k}/logp"][..., w],
             "bias": z[f"{k}/bias"][..., w, w].astype(np.float32), "name": k} for k in keys]


def child_scores(p, s):
    return tree._child_scores(p["logp"][s], p["bias"][s])  # [D, W(parent), W]


def samples(prompts):
    """(depth, child score, right) for every child of a right parent path, every staged index."""
    d_all, c_all, y_all = [], [], []
    for p in prompts:
        g, cand = p["g"], p["cand"]
        D = cand.shape[1]
        for s in range(STAGED):
            c = child_scores(p, s)
            parent = 0
            for d in range(D):
                d_all.append(np.full(cand.shape[2], d)), c_all.append(c[d, parent])
                right = cand[s, d] == g[s + 1 + d]
                y_all.append(right)
                if not right.any():
                    break
                parent = int(np.argmax(right))
    return np.concatenate(d_all), np.concatenate(c_all), np.concatenate(y_all).astype(float)


def pav(y, w):
    """Pool-adjacent-violators: the non-decreasing fit of y (weights w)."""
    vals, wts, sizes = [], [], []
    for yi, wi in zip(y, w):
        vals.append(yi), wts.append(wi), sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / (wts[-2] + wts[-1])
            vals[-2:], wts[-2:], sizes[-2:] = [v], [wts[-2] + wts[-1]], [sizes[-2] + sizes[-1]]
    return np.repeat(vals, sizes)


def fit(prompts, bins=12, depths=None):
    """Per depth, knots (child score -> log of the right rate), monotone; deeper depths pooled."""
    d, c, y = samples(prompts)
    D = int(d.max()) + 1
    maps = []
    for k in range(D):
        sel = d == k if depths is None else d >= min(k, depths - 1) if k >= depths - 1 else d == k
        cs, ys = c[sel], y[sel]
        edges = np.unique(np.quantile(cs, np.linspace(0, 1, bins + 1)))
        idx = np.clip(np.searchsorted(edges, cs, side="right") - 1, 0, len(edges) - 2)
        n = np.bincount(idx, minlength=len(edges) - 1).astype(float)
        r = np.bincount(idx, ys, minlength=len(edges) - 1)
        ok = n > 0
        x = np.bincount(idx, cs, minlength=len(edges) - 1)[ok] / n[ok]
        rate = pav((r[ok] + 0.5) / (n[ok] + 1.0), n[ok])
        maps.append((x, np.log(rate)))
    return maps


def calibrated(maps):
    def scores(logp, transitions):
        c = tree.__dict__["_raw_child_scores"](logp, transitions)
        out = np.empty_like(c)
        for k in range(c.shape[0]):
            x, lr = maps[min(k, len(maps) - 1)]
            out[k] = np.interp(c[k], x, lr)
        return out
    return scores


def walk(p, nodes):
    """(tokens, cycles) of the engine's tree cycles along the greedy answer; with the prompt's
    ids (`with_prompts`), a copy from the context grafted in as the engine does (lookup.py)."""
    g, s, cycles = p["g"], 0, 0
    seen = lookup.Index([*p["prompt"], int(g[0])]) if "prompt" in p else None
    while s < STAGED:
        tr = tree.build(int(g[s]), p["cand"][s], p["logp"][s], nodes, p["bias"][s])
        if seen is not None:
            tr = tree.graft(tr, *seen.propose(), nodes)
        d = len(tr.follow(g[s + 1 :].tolist()))  # drafts accepted: the target's answer is g
        if d < p["cand"].shape[1] and s + 1 + d < len(g):  # why the path stopped: the target's
            # token not among the depth's candidates, or among them but outside the budget
            MISS["not a candidate" if g[s + 1 + d] not in p["cand"][s, d] else "outside the budget"] += 1
        if seen is not None:
            seen.extend(int(t) for t in g[s + 1 : s + 2 + d])
        s += d + 1
        cycles += 1
    return s, cycles


def with_prompts(prompts, path, per_category, skip=0):
    """Each collected prompt with its token ids (collect.py's choice of prompts, re-encoded)."""
    from dflash.load import encode_prompt, load_pair
    from prompts import pick
    picked = pick(path, per_category, skip)
    tok = load_pair(progress=lambda m: None).tokenizer
    for p in prompts:
        p["prompt"] = encode_prompt(tok, picked[int(p["name"].rsplit("-", 1)[1])]["prompt"])
    return prompts


def taus(prompts, nodes):
    runs = [walk(p, nodes) for p in prompts]
    pooled = sum(t for t, _ in runs) / sum(c for _, c in runs)
    return pooled, float(np.mean([t / c for t, c in runs]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("fit"), ap.add_argument("eval")
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--bins", type=int, default=12)
    ap.add_argument("--depths", type=int, default=None, help="depths >= this share one map")
    ap.add_argument("--width", type=int, default=None, help="candidates a position (default: all collected)")
    ap.add_argument("--copy", nargs=2, metavar=("PROMPTS", "PER_CATEGORY"),
                    help="EVAL's prompts file and count (as collect.py took them): graft the context's copy in")
    a = ap.parse_args()
    fit_set, eval_set = load(a.fit, a.width), load(a.eval, a.width)
    if a.copy:
        eval_set = with_prompts(eval_set, a.copy[0], int(a.copy[1]))
    tree._raw_child_scores = tree._child_scores
    maps = fit(fit_set, a.bins, a.depths)
    for k, (x, lr) in enumerate(maps):
        print(f"depth {k + 1}: " + " ".join(f"{xi:.2f}->{li:.2f}" for xi, li in zip(x, lr)))
    for name, prompts in (("fit", fit_set), ("eval", eval_set)):
        for n in a.nodes:
            tree._child_scores = tree._raw_child_scores
            base = taus(prompts, n)
            miss = dict(MISS)
            MISS.update({k: 0 for k in MISS})
            tree._child_scores = calibrated(maps)
            cal = taus(prompts, n)
            print(f"{name} ({len(prompts)} prompts) tree {n}: pooled tau {base[0]:.3f} -> {cal[0]:.3f}, "
                  f"mean {base[1]:.3f} -> {cal[1]:.3f}; the shipped scores' paths stopped: {miss}", flush=True)
            MISS.update({k: 0 for k in MISS})
        tree._child_scores = tree._raw_child_scores
