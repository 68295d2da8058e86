"""Prototype (lab only): a fixed-size tree chosen on the device, so that a GPU cycle has one host
round trip (the accept) instead of two, and the verify graph is built while the drafter runs.

The N best-first nodes of `tree.build` are the N best root paths of the candidate lattice
(a path scores no higher than its prefix). Any depth-d path among them has its parent among the
N best depth-(d-1) paths, so a beam of N per depth, expanded by the W candidates, then the best
N over all depths, gives the same nodes (ties aside: a node's key is its score less 1e-4 a
level, so a parent always outranks its children). Nodes come spine first, then the others
depth-major (parents first); the context copy (`tree.graft`) is not offered.

    apply()                 patches engine._tree_cycle; ON["on"] switches it per run
    python lab/bench/device_tree.py     checks node sets against tree.build, and DFlash with it
                                        against target-only on the embedded pair (CPU)
"""
import sys
from pathlib import Path
from time import perf_counter

if __name__ == "__main__":  # on a CPU, dflash.backend.setup() loads the BLAS before MLX is imported
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from dflash import backend
    backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

ON = {"on": False, "compiled": False}
NEG = -1e30


def _child_scores(logp, bias):
    """tree._child_scores on the device: [D, W(parent candidate), W] log-probs."""
    D, W = logp.shape
    base = mx.broadcast_to(logp[:, None, :], (D, W, W))
    if bias is None:
        return base
    s = base + bias
    return s - mx.logsumexp(s, axis=-1, keepdims=True) + mx.logsumexp(base, axis=-1, keepdims=True)


def build(staged, tokens_of, logp, bias, n: int, compiled: bool = False):
    """(tokens [n+1], parents [n+1], Layout) of the n best root paths' nodes, unevaluated;
    tokens_of [D, W]: the candidates' token ids. compiled: the graph by mx.compile, built once
    per shape and replayed (the host then builds ~1 node where it built hundreds)."""
    from dflash.tree import Layout
    staged = mx.array([staged]) if isinstance(staged, int) else staged.reshape(1)
    if compiled:
        key = (n, bias is None)
        if key not in _COMPILED:
            f = lambda s, t, lp, *b: _arrays(s, t, lp, b[0] if b else None, n)  # noqa: E731
            _COMPILED[key] = mx.compile(f)
        args = (staged, tokens_of, logp) + (() if bias is None else (bias,))
        tokens, parents_all, depth, anc, visible = _COMPILED[key](*args)
    else:
        tokens, parents_all, depth, anc, visible = _arrays(staged, tokens_of, logp, bias, n)
    return tokens, parents_all, Layout(depth, anc, visible)


_COMPILED = {}


def _arrays(staged, tokens_of, logp, bias, n: int):
    D, W = logp.shape
    lp = _child_scores(logp, bias)
    score, cand = lp[0, 0][:n], mx.arange(min(n, W), dtype=mx.int32)  # depth 1: sorted already
    if n > W:  # the beam's empty places
        score = mx.concatenate([score, mx.full((n - W,), NEG)])
        cand = mx.concatenate([cand, mx.zeros((n - W,), mx.int32)])
    scores, parents, cands = [score], [mx.zeros((n,), mx.int32)], [cand]
    for d in range(1, D):  # the best n depth-(d+1) paths: the best n of (beam) x (W children)
        flat = (score[:, None] + lp[d][cand]).reshape(-1)
        idx = mx.argpartition(-flat, n - 1)[:n].astype(mx.int32)  # uint32 otherwise
        score, cand = flat[idx], (idx % W).astype(mx.int32)
        scores.append(score), parents.append((idx // W).astype(mx.int32)), cands.append(cand)
    scores, parents, cands = (mx.stack(a) for a in (scores, parents, cands))  # [D, n]
    key = (scores - 1e-4 * mx.arange(D)[:, None]).reshape(-1)
    sel = mx.sort(mx.argpartition(-key, n - 1)[:n].astype(mx.int32))  # depth-major: parents first
    d_sel, b_sel = sel // n, sel % n
    node_of = mx.zeros((D * n,), mx.int32)
    node_of[sel] = mx.arange(1, n + 1, dtype=mx.int32)
    up = parents.reshape(-1)[sel]
    par = mx.where(d_sel == 0, 0, node_of[mx.maximum(d_sel - 1, 0) * n + up])
    tok = tokens_of[d_sel, cands.reshape(-1)[sel]]
    # spine first (each node's best child from the root, as Tree.spine_first): accepted along
    # it, the caches only trim
    sc, node, spine = scores.reshape(-1)[sel], mx.array(0, mx.int32), []
    for _ in range(D):
        child = par == node
        node = mx.where(mx.any(child), mx.argmax(mx.where(child, sc, NEG)).astype(mx.int32) + 1, -1)
        spine.append(node)
    on_spine = mx.any(mx.arange(1, n + 1)[:, None] == mx.stack(spine)[None], axis=1)
    order = mx.argsort(mx.where(on_spine, d_sel, D + mx.arange(n))).astype(mx.int32)
    new_pos = mx.zeros((n + 1,), mx.int32)
    new_pos[order + 1] = mx.arange(1, n + 1, dtype=mx.int32)
    tok, d_sel, par = tok[order], d_sel[order], new_pos[par[order]]
    tokens = mx.concatenate([staged.astype(tok.dtype), tok])
    parents_all = mx.concatenate([mx.array([0], mx.int32), par.astype(mx.int32)])
    depth = mx.concatenate([mx.array([0], mx.int32), (d_sel + 1).astype(mx.int32)])
    R = n + 1
    ups = [mx.arange(R, dtype=mx.int32)]
    for _ in range(D):
        ups.append(parents_all[ups[-1]])
    A = mx.stack(ups, axis=1)  # [R, D+1]: i levels up (the root beyond)
    visible = mx.any(A[:, :, None] == mx.arange(R)[None, None, :], axis=1)
    j = mx.arange(D + 1)[None]
    anc = mx.where(j <= depth[:, None], mx.take_along_axis(A, mx.maximum(depth[:, None] - j, 0), 1), 0)
    return tokens, parents_all, depth, anc.astype(mx.int32), visible


def apply():
    from dflash import engine, tree
    shipped = engine._tree_cycle

    def tree_cycle(target, drafter, cache, context, out, staged, B, nodes, planner, copy=((), ())):
        if not ON["on"] or planner is not None:
            return shipped(target, drafter, cache, context, out, staged, B, nodes, planner, copy)
        t = perf_counter()
        logits = drafter.draft_logits(target, staged, B, context.cache())
        mx.async_eval(logits)  # the drafter runs while the rest of the cycle's graph is built
        cols, logp = tree._top_on_device(logits.astype(mx.float32) / tree.TEMPERATURE, tree.WIDTH)
        bias = tree._transitions(drafter, target, cols) if getattr(drafter, "has_markov", False) else None
        tokens_of = cols if drafter.vocab is None else drafter.vocab.index[cols]
        ids, parents, layout = build(staged, tokens_of, logp, bias, nodes, ON["compiled"])
        t_draft = perf_counter()
        logits, feats, _ = target.forward(ids[None].astype(mx.int32), cache, tree=layout)
        ids, parents, depth, post = tree._host(ids, parents, layout.depth, mx.argmax(logits[0], axis=-1))
        tr = tree.Tree(tuple(ids.tolist()), (-1, *parents[1:].tolist()), tuple(depth.tolist()), (0.0,) * len(ids))
        keep, nxt = tree.accept(tr, post.tolist())
        t_verify = perf_counter()
        acc = len(keep) - 1
        children = [i for i in range(1, len(tr)) if tr.parents[i] == keep[-1]]
        proposed = tr.tokens[children[0]] if children else None
        committed = out.emit([(tr.tokens[i], "draft", None) for i in keep[1:]] + [(nxt, "target", proposed)])
        if out.finish is None:
            tree.compact(cache, len(tr), keep)
            context.add(feats[:, mx.array(keep)])
        times = (t_draft - t, t_verify - t_draft, perf_counter() - t_verify)
        return tr.tokens[1:], acc, committed, times, (tr.parents[1:], tuple(keep[1:]), ())

    engine._tree_cycle = tree_cycle


def _up(tr, k):
    path = [k]
    while tr.parents[path[-1]] >= 0:
        path.append(tr.parents[path[-1]])
    return path


if __name__ == "__main__":
    from dflash import engine, tree
    from dflash.config import GenerationConfig
    from dflash.events import Summary
    from dflash.load import encode_prompt, load_pair

    rng = np.random.default_rng(0)
    for trial in range(20):  # node sets equal tree.build's (random scores: no ties)
        D, W, n = 15, 8, int(rng.choice([8, 16, 33, 64]))
        raw = rng.normal(size=(D, 64)) * 3
        cols = np.argsort(-raw, axis=1)[:, :W]
        logp = np.take_along_axis(raw, cols, 1) - np.log(np.exp(raw).sum(1, keepdims=True))
        bias = rng.normal(size=(D, W, W)) if trial % 2 else None
        if bias is not None:
            bias[0] = 0
        ref = tree.build(5, cols + 100, logp, n, bias)
        ids, par, lay = build(5, mx.array(cols + 100), mx.array(logp, mx.float32),
                              None if bias is None else mx.array(bias, mx.float32), n, trial % 4 > 1)
        mine = tree.Tree(tuple(np.array(ids).tolist()), (-1, *np.array(par)[1:].tolist()),
                         tuple(np.array(lay.depth).tolist()), (0.0,) * (n + 1))
        paths = lambda tr: {tuple(tr.tokens[i] for i in reversed(_up(tr, k))) for k in range(len(tr))}  # noqa: E731
        assert paths(ref) == paths(mine), trial
        spine = [ref.tokens[i] for i in ref.spine()]
        assert list(mine.tokens[: len(spine)]) == spine and mine.spine() == list(range(len(spine))), trial
        ref_lay = tree.Layout.of(mine)
        assert (np.array(ref_lay.visible) == np.array(lay.visible)).all()
        assert (np.array(ref_lay.ancestors) == np.array(lay.ancestors)[:, : ref_lay.ancestors.shape[1]]).all()
    print("node sets, spines, visibility and ancestors equal tree.build's / Layout.of's (20 trees, half compiled)")

    pair = load_pair(progress=lambda s: None)
    apply()
    for prompt in ("Write a Python function that reverses a string.", "What is 17 * 23? Explain."):
        ids = encode_prompt(pair.tokenizer, prompt)
        outs = []
        for mode, on, comp in (("target", False, False), ("dflash", True, False), ("dflash", True, True), ("dflash", False, False)):
            ON["on"], ON["compiled"] = on, comp
            cfg = GenerationConfig(mode=mode, max_tokens=64, tree=None if mode == "target" else 16)
            s = [e for e in engine.stream(pair, ids, cfg) if isinstance(e, Summary)][0]
            outs.append(s.token_ids), print(mode, ("device tree" + " compiled" * comp) if on else "", f"tau {s.tau:.2f}")
        assert len(set(outs)) == 1, "outputs differ"
    print("DFlash with device trees == target-only (bitwise, CPU)")
