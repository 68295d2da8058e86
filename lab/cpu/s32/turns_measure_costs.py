"""policy.measure_costs for trees with the passes taking turns (not adopted, thirty-second
session): a warm-up round that also finds the trees worth timing, then `reps` rounds in which
every pass runs once, each pass's fastest kept; the shipped probe times each pass `reps` times
back to back. cost_probe_ab.py compares the two."""
import time

import mlx.core as mx

from dflash import tree as tree_mod
from dflash.policy import MAX_TREE_STEPS, TIMED_SIZES, TREE_SIZES, _between, _monotone, _sample_tree, probe_context


def measure_costs(pair, block_size, context=None, reps=3, tree_nodes=63):
    target, drafter = pair.target, pair.drafter
    context = context or probe_context(target.key_chunk)
    ids = mx.array([[(7 * i + 10) % target.vocab_size for i in range(context)]])
    cache, dcache = target.make_cache(), drafter.make_cache()
    _, feats, _ = target.forward(ids, cache)
    drafter.extend_context(feats, dcache)
    mx.eval([c.state for c in cache], [c.state for c in dcache])

    def once(fn):
        t = time.perf_counter()
        mx.eval(fn())
        return (time.perf_counter() - t) * 1000

    def verify(k, tree=None):
        def run():
            layout = None if tree is None else tree_mod.Layout.of(tree)
            logits, _, _ = target.forward(ids[:, :k], cache, tree=layout)
            out = mx.argmax(logits, -1)
            mx.eval(out)
            target.rollback(cache, {}, k, 0)
            return out
        return run

    b = block_size - 1
    passes = {("step", 1): verify(1)}
    limit = MAX_TREE_STEPS * once(passes[("step", 1)])
    for n in sorted({n for n in TIMED_SIZES if n < tree_nodes} | {tree_nodes}):
        passes[("tree", n)] = verify(n + 1, _sample_tree(n, b))
        if once(passes[("tree", n)]) > limit:
            break
    budget = n
    rest = {("chain", c): verify(c + 1) for c in sorted({min(c, b) for c in TIMED_SIZES[:2]} | {b})}
    rest[("draft", budget)] = lambda: tree_mod.build(5, *tree_mod.candidates(
        drafter.draft_logits(target, 5, block_size, dcache), token_ids=drafter.token_ids), budget).tokens
    for fn in rest.values():
        once(fn)
    passes.update(rest)
    times = {key: [] for key in passes}
    for _ in range(reps):
        for key, fn in passes.items():
            times[key].append(once(fn))
    ms = {key: min(v) for key, v in times.items()}
    of = lambda kind: {n: v for (k, n), v in ms.items() if k == kind}
    chains = [n for n in TREE_SIZES if n < b] + [b]
    return {"step_ms": ms[("step", 1)], "verify_ms": _monotone(_between(of("tree"), [*TREE_SIZES, tree_nodes])),
            "chain_ms": _monotone(_between(of("chain"), chains)), "draft_ms": ms[("draft", budget)]}
