"""Tree verification (DDTree): verify several drafted paths in one target pass.

The drafter's one pass gives a distribution for every block position. Instead of the argmax
chain, `build` grows a tree of N nodes best-first over paths, a path scored by the product of
its tokens' draft probabilities. The target verifies the staged token and all N nodes in ONE
pass: each node attends to the committed context and to its own ancestors only, at RoPE
position committed length + depth (`Layout`). `accept` walks from the root along children
whose token is the target's greedy choice at their parent; `keep` is the accepted path, which
the caches then compact to (`compact`): the tokens of a root path, in order, as if they had
been decoded one by one.

Best-first trees are nested: the tree of n nodes is the first n nodes of the tree of N > n, so
one build prices every budget (`expected_accepts`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Optional

import mlx.core as mx
import numpy as np

from .backend import on_cpu
from .layout import Layout  # noqa: F401  (tree.Layout: what a verify pass of a Tree needs)

WIDTH = 8  # candidate tokens per block position (the target's token is in the top-8 ~80 %)
TEMPERATURE = 1.0  # the drafter's logits are divided by this before paths are scored
BLOCK = 128  # _top_columns: columns a row's maxima are taken over


@dataclass(frozen=True)
class Tree:
    """Node 0 is the staged token (the root); nodes 1..N are drafted, parents before children."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]  # parents[0] = -1
    depths: tuple[int, ...]
    logp: tuple[float, ...]  # the drafter's log-probability of the path to each node

    def __len__(self) -> int:
        return len(self.tokens)

    def prefix(self, n: int) -> "Tree":
        """The tree of the first n drafted nodes (a valid tree: parents come first)."""
        k = n + 1
        return Tree(self.tokens[:k], self.parents[:k], self.depths[:k], self.logp[:k])

    def spine(self) -> list[int]:
        """The root path through every node's first child (its most probable one): the chain
        this tree holds, as node indices, root first."""
        first: dict[int, int] = {}
        for i in range(len(self) - 1, 0, -1):
            first[self.parents[i]] = i
        path = [0]
        while path[-1] in first:
            path.append(first[path[-1]])
        return path

    def spine_first(self) -> "Tree":
        """The same tree with its spine's nodes first, the others after them in their order
        (parents still before children): where the target accepts along the spine, the path
        kept is a prefix of the pass, and `compact` a plain trim."""
        order = self.spine()
        on_spine = set(order)
        order += [i for i in range(1, len(self)) if i not in on_spine]
        new = {old: n for n, old in enumerate(order)}
        return Tree(tuple(self.tokens[i] for i in order), tuple(new.get(self.parents[i], -1) for i in order),
                    tuple(self.depths[i] for i in order), tuple(self.logp[i] for i in order))

    def path(self, nodes: list[int]) -> "Tree":
        """The chain of `nodes` (a root path, root first) as a tree of its own."""
        n = len(nodes)
        return Tree(tuple(self.tokens[i] for i in nodes), (-1, *range(n - 1)), tuple(range(n)),
                    tuple(self.logp[i] for i in nodes))

    def follow(self, tokens: list[int]) -> tuple[int, ...]:
        """The nodes (root excluded) of the longest root path spelling a prefix of `tokens`."""
        children = {(p, t): i for i, (p, t) in enumerate(zip(self.parents, self.tokens)) if i}
        path, node = [], 0
        for tok in tokens:
            if (node := children.get((node, tok))) is None:
                break
            path.append(node)
        return tuple(path)

    @property
    def is_chain(self) -> bool:
        return self.parents == (-1, *range(len(self) - 1))


def draft(drafter, target, logits: mx.array, width: int = WIDTH):
    """A tree's inputs from the drafter's block logits [D, n]: `candidates` (ids, logp [D, W])
    and, with a Markov head, their `transitions` [D, W, W] (else None). On a GPU they cross to
    the host together, in one round trip."""
    cols, logp = _top(logits, width)
    bias = None
    if getattr(drafter, "has_markov", False):
        bias = _transitions(drafter, target, mx.array(cols) if isinstance(cols, np.ndarray) else cols)
    cols, logp, bias = _host(cols, logp, bias)
    return (cols if drafter.token_ids is None else drafter.token_ids[cols]), logp, bias


def candidates(logits: mx.array, width: int = WIDTH,
               token_ids: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Per block position the `width` most likely draft tokens, best first, with log-probs.

    logits [D, n] (positions 1..D; column c is token token_ids[c], or token c) -> (ids [D, W],
    logp [D, W]).
    """
    cols, logp = _host(*_top(logits, width))
    return (cols if token_ids is None else token_ids[cols]), logp


def _top(logits: mx.array, width: int):
    """(columns, log-probs) of the top `width` per row, best first: on a CPU in numpy (MLX's CPU
    logsumexp and argpartition cost ~10x more there); on a GPU in MLX, unevaluated, so that
    only the [D, W] results cross to the host."""
    top = _top_on_host if on_cpu() else _top_on_device
    x = logits.astype(mx.float32)
    if TEMPERATURE != 1.0:  # else a pass over the block's logits for nothing (~0.5 ms on a 2-core CPU)
        x = x / TEMPERATURE
    return top(x, min(width, logits.shape[-1]))


def _host(*xs):
    """numpy copies of the MLX arrays among xs, evaluated together (others as they are)."""
    mx.eval([x for x in xs if isinstance(x, mx.array)])
    return [np.array(x) if isinstance(x, mx.array) else x for x in xs]


def _top_on_host(x: mx.array, width: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.array(x)
    cols = _top_columns(x, width)
    top = np.take_along_axis(x, cols, -1)
    order = np.argsort(-top, axis=-1, kind="stable")
    cols, top = np.take_along_axis(cols, order, -1), np.take_along_axis(top, order, -1)
    m = x.max(-1, keepdims=True)
    return cols, top - (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))


def _top_columns(x: np.ndarray, width: int) -> np.ndarray:
    """[D, width] columns of each row's `width` largest values, in no order. They lie in the
    `width` blocks of BLOCK columns whose maxima are highest (a value in any other block has
    `width` block maxima above it), so the selection reads those blocks, not the whole row: a
    16-position block over a 16k draft vocabulary 3.1 -> 0.5 ms on a 2-core CPU."""
    D, n = x.shape
    if n % BLOCK or n < 4 * width * BLOCK:
        return np.argpartition(-x, width - 1, axis=-1)[:, :width]
    blocks = x.reshape(D, n // BLOCK, BLOCK)
    best = np.argpartition(-blocks.max(-1), width - 1, axis=-1)[:, :width]  # [D, width]
    inside = np.take_along_axis(blocks, best[..., None], 1).reshape(D, -1)
    pick = np.argpartition(-inside, width - 1, axis=-1)[:, :width]
    return best[np.arange(D)[:, None], pick // BLOCK] * BLOCK + pick % BLOCK


def _top_on_device(x: mx.array, width: int) -> tuple[mx.array, mx.array]:
    """`_top_on_host` in MLX, unevaluated."""
    cols = mx.argpartition(-x, width - 1, axis=-1)[:, :width]
    top = mx.take_along_axis(x, cols, -1)
    order = mx.argsort(-top, axis=-1)
    cols, top = mx.take_along_axis(cols, order, -1), mx.take_along_axis(top, order, -1)
    return cols, top - mx.logsumexp(x, axis=-1, keepdims=True)


def build(staged: int, ids: np.ndarray, logp: np.ndarray, budget: int,
          transitions: Optional[np.ndarray] = None) -> Tree:
    """The `budget` most probable root paths' nodes, best first.

    ids / logp [D, W]: candidates per depth (sorted). transitions [D, W, W] (optional, log
    space): transitions[d, i, j] re-scores candidate j at depth d+1 when its parent is candidate
    i at depth d (a path-conditioned head; row 0 holds the staged token's row for depth 1 in
    every i). Children's scores are renormalised to their candidates' draft mass, so without
    transitions a node's score is exactly its path's log-probability.
    """
    D, W = ids.shape
    child_lp = _child_scores(logp, transitions)  # [D, W(parent cand), W] log-probs, sorted below
    order = np.argsort(-child_lp, axis=-1, kind="stable")
    tokens, parents, depths, scores, cand = [staged], [-1], [0], [0.0], [0]
    heap = [(-child_lp[0, 0, order[0, 0, 0]], 0, 0, 0)]  # (-score, parent node, rank, tiebreak)
    tick = 1
    while heap and len(tokens) <= budget:
        neg, parent, rank, _ = heapq.heappop(heap)
        d = depths[parent]  # the new node's depth is d + 1, its candidates ids[d]
        pc = cand[parent] if d else 0
        j = order[d, pc, rank]
        tokens.append(int(ids[d, j])), parents.append(parent), depths.append(d + 1)
        scores.append(-neg), cand.append(j)
        node = len(tokens) - 1
        if rank + 1 < W:  # next sibling
            s = scores[parent] + child_lp[d, pc, order[d, pc, rank + 1]]
            heapq.heappush(heap, (-s, parent, rank + 1, tick))
        if d + 1 < D:  # first child
            s = -neg + child_lp[d + 1, j, order[d + 1, j, 0]]
            heapq.heappush(heap, (-s, node, 0, tick + 1))
        tick += 2
    return Tree(tuple(tokens), tuple(parents), tuple(depths), tuple(float(s) for s in scores))


def graft(tree: Tree, chain: list[int], logp: list[float], budget: int) -> Tree:
    """`tree` with the root path `chain` added (a copy from the context: lookup.py), sharing
    the nodes the tree has already; a shared node keeps the higher of its two scores. Nodes are
    re-ordered best-first and the first `budget` kept: a node never scores above its parent
    (ties go to the shallower), so every prefix is still a tree."""
    if not chain:
        return tree
    tokens, parents, depths, scores = (list(a) for a in (tree.tokens, tree.parents, tree.depths, tree.logp))
    child = {(parents[i], tokens[i]): i for i in range(1, len(tokens))}
    node = 0
    for tok, s in zip(chain, logp):
        i = child.get((node, tok))
        if i is None:
            tokens.append(tok), parents.append(node), depths.append(depths[node] + 1), scores.append(s)
            i = len(tokens) - 1
        else:
            scores[i] = max(scores[i], s)
        node = i
    order = [0] + sorted(range(1, len(tokens)), key=lambda i: (-scores[i], depths[i], i))[:budget]
    new = {old: n for n, old in enumerate(order)}
    return Tree(tuple(tokens[i] for i in order), tuple(new.get(parents[i], -1) for i in order),
                tuple(depths[i] for i in order), tuple(scores[i] for i in order))


def transitions(drafter, target, ids: np.ndarray) -> np.ndarray:
    """[D, W, W] the drafter's Markov head between consecutive positions' candidates:
    [d, i, j] = bias of candidate j at depth d+1 after candidate i at depth d; depth 1 takes
    none (its block input is the staged token itself: MarkovHead). Only these D*W*W entries of
    the head are computed."""
    cols = ids if drafter.vocab is None else drafter.vocab.rows_of(ids)
    return np.array(_transitions(drafter, target, mx.array(cols)))


def _transitions(drafter, target, cols: mx.array) -> mx.array:
    """`transitions` for candidates given as draft-vocabulary columns (the head's rows), unevaluated."""
    D, W = cols.shape
    head = drafter.markov
    prev = target.embed(drafter.column_tokens(cols[:-1].reshape(-1)))
    p = head.in_proj(prev.astype(head.in_proj.weight.dtype))  # [(D-1)W, r]
    q = head.out_proj.weight[cols[1:]]  # [D-1, W, r]: the head's rows are the columns
    rest = (p.reshape(D - 1, W, -1) @ q.swapaxes(-1, -2)).astype(mx.float32)
    return mx.concatenate([mx.zeros((1, W, W), mx.float32), rest])


def _child_scores(logp: np.ndarray, transitions: Optional[np.ndarray]) -> np.ndarray:
    D, W = logp.shape
    base = np.broadcast_to(logp[:, None, :], (D, W, W)).astype(np.float64)
    if transitions is None:
        return base
    mass = np.logaddexp.reduce(base, axis=-1, keepdims=True)
    s = base + transitions
    return s - np.logaddexp.reduce(s, axis=-1, keepdims=True) + mass


def expected_accepts(tree: Tree) -> np.ndarray:
    """[n] = expected accepted drafts of the first n nodes' tree, by the drafter's own
    probabilities: a node is accepted iff its whole path is, with probability exp(logp)."""
    return np.concatenate([[0.0], np.cumsum(np.exp(tree.logp[1:]))])


def accept(tree: Tree, posterior: list[int]) -> tuple[list[int], int]:
    """(keep, next): the accepted root path as node indices (root first) and the target's token
    after it. posterior[i] = the target's greedy token after node i's path."""
    children: dict[int, dict[int, int]] = {}
    for i in range(1, len(tree)):
        children.setdefault(tree.parents[i], {})[tree.tokens[i]] = i
    keep = [0]
    while (nxt := children.get(keep[-1], {}).get(posterior[keep[-1]])) is not None:
        keep.append(nxt)
    return keep, posterior[keep[-1]]


def compact(cache: list, n_fed: int, keep: list[int]) -> None:
    """Make every attention cache hold, after its committed prefix, only the `keep` nodes of the
    n_fed just verified, in order (their keys were roped at committed length + depth, which is
    their position in the compacted sequence)."""
    n = len(keep)
    m = next((i for i, node in enumerate(keep) if node != i), n)  # nodes already in place
    if m == n:  # a prefix: a plain trim
        for c in cache:
            c.trim(n_fed - n)
        return
    idx = mx.array(keep[m:])
    for c in cache:
        start = c.offset - n_fed
        for name in ("keys", "values"):
            a = getattr(c, name)
            a[..., start + m : start + n, :] = mx.take(a[..., start : start + n_fed, :], idx, axis=2)
        c.offset = start + n
