"""The engine's tree against trees whose nodes draw their children from the whole draft
vocabulary, on the same drafts, along the target's greedy answers (no copy grafted in).

"engine": `tree.draft` + `tree.build` as `_tree_cycle` calls them (each depth's candidates are
the base logits' top 8, the Markov head re-ranks only among them; until the twenty-eighth
session each parent's children renormalised to the candidates' base mass, which "pool 8/8 mass"
reproduces; since then as "pool 8/8 top256"). "pool K/C norm": a node at depth d holding token t
gets as children the C best of position d+1's base top K (K "V": the whole draft vocabulary)
scored by that position's logits + the head's bias after t, normalised either over the whole
vocabulary ("vocab": the head can move mass into the pool) or to the pool's base mass ("mass",
as the engine does); "pool 8/8 mass" is the engine's tree, grown here. Each setting walks the
answer on its own (a cycle commits its accepted path + 1).

    python lab/tree-calibration/node_children.py PROMPTS.jsonl PER_CATEGORY [--staged 64] [--k 8 16 32 64] [--pools 8/8/mass 32/32/top256 ...]

"topN" normalises over the whole vocabulary with the bias counted only in the base's top N (the
rest at its base mass): what the engine can afford on a CPU.
"""
import heapq
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import block_logits, head_bias, pick, refill_cli, staged  # noqa: E402
from dflash import backend, tree  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

POOLS = [(p if p == "V" else int(p), int(w), n) for p, w, n in (x.split("/") for x in
         (sys.argv[sys.argv.index("--pools") + 1:] if "--pools" in sys.argv else
          ["8/8/mass", "8/8/vocab", "32/8/vocab", "V/8/vocab", "32/32/mass"]))]
POOLS_ARGV = sys.argv[sys.argv.index("--pools"):] if "--pools" in sys.argv else []
sys.argv = sys.argv[: len(sys.argv) - len(POOLS_ARGV)]
a, pair = refill_cli(64, [8, 16, 32, 64])
t, d = pair.target, pair.drafter
B = d.block_size
def engine_tree(first, staged_tok, k):
    return tree.build(staged_tok, *tree.draft(d, t, mx.array(first)), k)


def lse(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


def node_tree(first, staged_tok, k, pool, width, norm):
    """Best-first, each node's children scored after its own token; the set of root paths."""
    have, heap, tick = {()}, [], 0
    order = np.argsort(-first, axis=-1, kind="stable")

    def push(path, score, tok):
        nonlocal tick
        depth = len(path)
        if depth >= B - 1:
            return
        base = first[depth] - lse(first[depth])
        x = base + (head_bias(pair, tok) if depth and d.has_markov else 0)
        cols = order[depth] if pool == "V" else order[depth, :pool]
        if norm == "vocab":
            lp = x[cols] - lse(x)
        elif norm.startswith("top"):  # the whole vocabulary's, the bias counted in base's top N only
            n = int(norm[3:])
            lp = x[cols] - np.logaddexp(lse(x[order[depth, :n]]), lse(base[order[depth, n:]]))
        else:  # renormalised to the pool's base mass
            lp = x[cols] - lse(x[cols]) + lse(base[cols])
        top = np.argsort(-lp, kind="stable")[:width]
        for i, l in zip(np.array(d.column_tokens(mx.array(cols[top]))), lp[top]):
            heapq.heappush(heap, (-(score + l), tick, path + (int(i),)))
            tick += 1

    push((), 0.0, staged_tok)
    while heap and len(have) <= k:
        neg, _, path = heapq.heappop(heap)
        have.add(path)
        push(path, -neg, path[-1])
    return have


def accepted_paths(have, truth):
    n = 0
    while n < len(truth) and tuple(truth[: n + 1]) in have:
        n += 1
    return n


kinds = ["engine"] + [f"pool {p}/{w} {n}" for p, w, n in POOLS]
taus = {(k, kind): [] for k in a.k for kind in kinds}
for r in pick(a.prompts, a.per_category, 0):
    nxt = {key: 0 for key in taus}
    cyc = {key: [0, 0] for key in taus}
    for s, g, dc in staged(pair, r["prompt"], a.staged):
        due = [key for key in taus if nxt[key] == s]
        if not due:
            continue
        truth = g[s + 1 : s + B]
        first = block_logits(pair, [g[s]] + [d.mask_token_id] * (B - 1), dc)
        for k, kind in due:
            if kind == "engine":
                n = len(engine_tree(first, g[s], k).follow(truth))
            else:
                p, w, n = POOLS[kinds.index(kind) - 1]
                n = accepted_paths(node_tree(first, g[s], k, p, w, n), truth)
            nxt[(k, kind)] = s + n + 1
            cyc[(k, kind)][0] += 1
            cyc[(k, kind)][1] += n + 1
    for key in taus:
        taus[key].append(cyc[key][1] / max(cyc[key][0], 1))
    print(r["category"], " ".join(f"{k}/{kind}: {taus[(k, kind)][-1]:.2f}" for k, kind in taus), flush=True)
for (k, kind), v in taus.items():
    print(f"{k} nodes, {kind}: mean tau {np.mean(v):.3f} over {len(v)} prompts")
