"""Trees with refilled sibling subtrees, replayed along the target's greedy answers: does a
second, batched drafter pass with the best off-spine prefixes written into the block (refill.py:
better there, not along the chain) raise a tree's tau?

Both trees here are grown best-first with a node's children drawn from the whole draft vocabulary
(the block position's logits + the Markov head's bias after the node's token, log-softmaxed, top
WIDTH): "pass 1" from the engine's one pass ([staged, MASK x 15]); "refilled": the pass-1 tree's
best M nodes off its spine at depth <= 3 each get a pass with their path written in, and every
node under such a path draws its children from that pass instead. Not the engine's lists
(tree.build re-ranks each depth's base top 8), so compare the two columns with each other.

    python lab/tree-calibration/refill_tree.py PROMPTS.jsonl PER_CATEGORY [--staged 64] [--k 16 32] [--m 4]
"""
import heapq
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import block_logits, head_bias, pick, refill_cli, staged  # noqa: E402  (this folder is on the path: the script's own)
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

WIDTH, M = 8, 4
a, pair = refill_cli(64, [16, 32])  # --k: the trees' node budgets
t, d = pair.target, pair.drafter
B = d.block_size
def children(rows, depth, tok):
    """(token ids, log-probs) of the WIDTH best children of a node at `depth` holding `tok`."""
    x = rows[depth] + (head_bias(pair, tok) if depth and d.has_markov else 0)
    x = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
    cols = np.argpartition(-x, WIDTH)[:WIDTH]
    cols = cols[np.argsort(-x[cols])]
    return np.array(d.column_tokens(mx.array(cols))), x[cols]


def grow(staged_tok, budget, rows_of):
    """Best-first tree: nodes (path tuple, score); rows_of(path) -> the logits its children use."""
    nodes, heap, tick = [((), 0.0)], [], 0

    def push(path, score, tok):
        nonlocal tick
        if len(path) < B - 1:
            ids, lp = children(rows_of(path), len(path), tok)
            for i, lpi in zip(ids, lp):
                heapq.heappush(heap, (-(score + lpi), tick, path + (int(i),)))
                tick += 1

    push((), 0.0, staged_tok)
    while heap and len(nodes) <= budget:
        neg, _, path = heapq.heappop(heap)
        nodes.append((path, -neg))
        push(path, -neg, path[-1])
    return nodes


def accepted(nodes, truth):
    have = {p for p, _ in nodes}
    n = 0
    while n < len(truth) and tuple(truth[: n + 1]) in have:
        n += 1
    return n


taus = {(k, kind): [] for k in a.k for kind in ("pass 1", "refilled")}
for r in pick(a.prompts, a.per_category, 0):
    nxt = {key: 0 for key in taus}  # each walk's next staged index
    cyc = {key: [0, 0] for key in taus}  # cycles, committed
    for s, g, dc in staged(pair, r["prompt"], a.staged):
        due = [key for key in taus if nxt[key] == s]
        if not due:
            continue
        truth = g[s + 1 : s + B]
        first = block_logits(pair, [g[s]] + [d.mask_token_id] * (B - 1), dc)
        for k in sorted({key[0] for key in due}):
            tree1 = grow(g[s], k, lambda path: first)
            result = {"pass 1": accepted(tree1, truth)}
            if (k, "refilled") in due:
                spine, p = set(), ()  # the spine: each node's best child, from the root
                by_parent = {}
                for path, sc in tree1[1:]:
                    by_parent.setdefault(path[:-1], path)  # first popped = best child
                while p in by_parent:
                    p = by_parent[p]
                    spine.add(p)
                off = [path for path, _ in tree1[1:] if path not in spine and len(path) <= 3][:M]
                refill = {path: block_logits(pair, [g[s]] + list(path) + [d.mask_token_id] * (B - 1 - len(path)), dc)
                          for path in off}

                def rows_of(path):
                    for n in range(len(path), 0, -1):  # the longest refilled prefix of the path
                        if path[:n] in refill:
                            return refill[path[:n]]
                    return first

                result["refilled"] = accepted(grow(g[s], k, rows_of), truth)
            for kind, n in result.items():
                if (k, kind) in due:
                    nxt[(k, kind)] = s + n + 1
                    cyc[(k, kind)][0] += 1
                    cyc[(k, kind)][1] += n + 1
    for key in taus:
        taus[key].append(cyc[key][1] / max(cyc[key][0], 1))
    print(r["category"], " ".join(f"{k} {kind}: {taus[(k, kind)][-1]:.2f}" for k, kind in taus), flush=True)
for (k, kind), v in taus.items():
    print(f"{k} nodes, {kind}: mean tau {np.mean(v):.3f} over {len(v)} prompts")
