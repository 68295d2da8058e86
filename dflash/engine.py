"""The generation loops: DFlash (draft a block, verify it, keep the agreeing prefix) and the
target-only baseline. Both are generators of `events`; nothing else lives here.

One DFlash cycle (docs/algorithm.md), verifying B tokens (B <= the drafter's block):
    draft    the drafter fills its block [staged, MASK...] in one pass -> d_1..d_{B-1}
    verify   the target runs [staged, d_1..d_{B-1}] in one pass   -> p_0..p_{B-1}
    accept   acc = longest prefix with d_{i+1} == p_i
    commit   emit d_1..d_acc (draft) and p_acc (target); p_acc becomes the next staged token
    rollback the target's caches keep staged + d_1..d_acc; the drafter's context gains their features

A tree cycle (tree.py) drafts the same block, verifies the N most probable paths through it (a
copy from earlier in the context among them: lookup.py) in one pass, commits the longest path
the target agrees with plus its token, and compacts the caches to that path.
"""

from __future__ import annotations

import threading
from time import perf_counter
from typing import Iterator, Optional

import mlx.core as mx

from .config import MAX_TREE, GenerationConfig, default_tree_nodes
from . import backend, lookup, tree
from .events import Cycle, Event, Prefill, Summary, Token
from .policy import Fallback, Planner, TreePlanner, measure_costs, store_costs, stored_costs
from .sampling import Sampler


class _Output:
    """Emits tokens exactly as plain decoding would: never past a stop token or max_tokens."""

    def __init__(self, tokenizer, max_tokens: int):
        self.detok = tokenizer.detokenizer
        self.detok.reset()
        self.stop_ids = set(tokenizer.eos_token_ids)
        self.max_tokens = max_tokens
        self.ids: list[int] = []
        self.finish: Optional[str] = None if max_tokens > 0 else "length"

    def emit(self, candidates: list[tuple[int, str, Optional[int]]]) -> tuple[Token, ...]:
        out = []
        for tid, source, proposed in candidates:
            if self.finish:
                break
            if tid in self.stop_ids:
                self.finish = "stop"
                break
            self.detok.add_token(tid)
            self.ids.append(tid)
            out.append(Token(tid, self.detok.last_segment, source, proposed))
            if len(self.ids) >= self.max_tokens:
                self.finish = "length"
        return tuple(out)

    def text(self) -> str:
        self.detok.finalize()
        return self.detok.text


def stream(pair, prompt_ids: list[int], cfg: GenerationConfig,
           cancel: Optional[threading.Event] = None) -> Iterator[Event]:
    """Generate from `prompt_ids`, yielding Prefill, one Cycle per target pass, then Summary.

    Args:
        pair: a loaded `Pair` (target adapter, drafter or None, tokenizer).
        prompt_ids: the prompt's token ids (chat template already applied).
        cfg: mode, max_tokens, block_size, temperature, top_p, seed.
        cancel: set it to stop after the current cycle (finish_reason "cancelled").
    """
    target, drafter = pair.target, pair.drafter
    dflash = cfg.mode == "dflash"
    B, nodes, note, planner = _plan(pair, cfg, len(prompt_ids))
    sampler = Sampler(cfg.temperature, cfg.top_p, cfg.seed)
    out = _Output(pair.tokenizer, cfg.max_tokens)
    cache = target.make_cache()
    context = DraftContext(drafter) if dflash else None
    extend = context.add if dflash else None

    t0 = perf_counter()
    staged = sampler.sample(target.prefill(prompt_ids, cache, on_chunk=extend)).item()
    first = out.emit([(staged, "target", None)])
    seen = lookup.Index([*prompt_ids, staged]) if nodes is not None and cfg.lookup else None
    ttft = perf_counter() - t0
    yield Prefill(cfg.mode, len(prompt_ids), first[0] if first else None, ttft, note)

    cycles: list[Cycle] = []
    total_accepted = 0
    while out.finish is None:
        if cancel is not None and cancel.is_set():
            out.finish = "cancelled"
            break
        copy = seen.propose() if seen is not None else ([], [])  # from earlier in the context
        if planner:
            planner.at(len(prompt_ids) + len(out.ids))  # passes cost more as the context grows
        k = planner.next_k(copy[1]) if planner else B  # 1: a plain target step
        shape = ((), (), ())
        if k == 1:
            drafted, acc, committed, times = _target_cycle(target, cache, sampler, out, staged, extend)
        elif nodes is not None:
            drafted, acc, committed, times, shape = _tree_cycle(
                target, drafter, cache, context, out, staged, B, nodes, planner, copy)
        else:
            drafted, acc, committed, times = _dflash_cycle(
                target, drafter, cache, context, sampler, out, staged, k)
        k = len(drafted) + 1
        if planner:
            planner.observe(k, acc, 1000 * sum(times))
        total_accepted += acc
        c = Cycle(len(cycles), k, drafted, acc, committed, *times, perf_counter() - t0,
                  len(out.ids), total_accepted, *shape)
        if pair.agree is not None:  # a sharded target: every rank must take the same decision
            pair.agree(c, out.finish)
        cycles.append(c)
        if seen is not None:
            seen.extend(t.id for t in committed)
        staged = committed[-1].id if committed else staged
        yield c

    verify = (f"tree {nodes}" if nodes is not None else
              f"chain {'auto' if cfg.adaptive else B}") if dflash else ""
    yield _summary(cfg, B, out, cycles, len(prompt_ids), ttft, perf_counter() - t0, verify)


def _plan(pair, cfg, n_prompt):
    """Check the request; (B, nodes, note, planner): the block (a chain's verify length, or a
    tree's depth + 1), the tree's nodes (None: a chain; "auto": sized per cycle), the engine's
    note for the user, and the planner that sizes cycles from measured costs (or None)."""
    target, drafter = pair.target, pair.drafter
    dflash = cfg.mode == "dflash"
    if dflash and drafter is None:
        raise ValueError("mode 'dflash' needs a drafter; this pair has none")
    cfg.validate(drafter.block_size if dflash else None)
    if not n_prompt:
        raise ValueError("the prompt is empty")
    nodes, note = _tree_nodes(pair, cfg) if dflash else (None, None)
    if nodes is not None:  # a tree's depth: up to the block asked for, else the drafter's
        B = cfg.block_size or drafter.block_size
    else:
        B = cfg.verify_length(drafter.block_size) if dflash else 1
    fed = B if nodes is None else 1 + (MAX_TREE if nodes == "auto" else nodes)  # per verify pass
    if target.max_context and n_prompt + cfg.max_tokens + fed > target.max_context:
        raise ValueError(
            f"prompt ({n_prompt} tokens) + max_tokens ({cfg.max_tokens}) exceeds the "
            f"target's context of {target.max_context} tokens")
    planner = None
    if nodes == "auto":  # tree size per cycle from measured costs (policy.py)
        planner = TreePlanner(_costs(pair, B, MAX_TREE))
    elif dflash and cfg.adaptive and nodes is None:  # chain length per cycle, likewise
        planner = Planner(_costs(pair, B), B)
    elif dflash and cfg.tree is None and cfg.block_size is None:  # the host's fixed default shape:
        # a tree's spine as a chain, or plain steps, where they commit more per second
        prior = getattr(pair, "step_prior", None)
        planner = Fallback(B, prior=prior) if nodes is None else Fallback(nodes + 1, chain=B, prior=prior)
    if planner and pair.agree is not None:  # a sharded target: its choices checked on every rank
        planner = pair.agree.planner(planner)
    return B, nodes, note, planner


def _tree_nodes(pair, cfg):
    """(nodes, note): drafted nodes per tree pass ("auto": chosen per cycle; unasked: this
    host's default) or None for the chain, and a note saying why a tree was wanted but the
    chain runs."""
    if not cfg.wants_tree():
        return None, None
    if not pair.target.tree_capable:
        return None, "this target verifies the chain: its GatedDeltaNet layers cannot take a tree"
    if cfg.temperature > 0:
        return None, "sampling verifies the chain: exact multi-path sampling is not implemented"
    return (cfg.tree or default_tree_nodes()), None


def warm(pair, progress=lambda message: None) -> None:
    """Compile a GPU's kernels (`_warm_passes`) and time this host's passes for the default
    setting's tree planner now (once per pair), so that the first request does not wait for it
    (~16 s on a 2-core Zen 4, a third of it the passes timed 2k tokens further in). Nothing to
    time where the default verifies a fixed shape or the chain; a sharded target times them at
    its first request, on every rank at once."""
    drafter = getattr(pair, "drafter", None)
    if drafter is None or pair.agree is not None:
        return
    _warm_passes(pair, progress)
    if _tree_nodes(pair, GenerationConfig())[0] == "auto":  # _plan's choice for the defaults
        if stored_costs(_costs_dir(), _cost_key(pair, drafter.block_size, MAX_TREE)) is None:
            progress("timing this host's target passes for the tree planner "
                     "(once per host and model; kept a week in the cache folder)")
        _costs(pair, drafter.block_size, MAX_TREE)


WARM_CONTEXTS = (200, 1500)  # below and past the CUDA tree kernel's range (kernels.KERNEL_MAX_SCORES)
WARM_TOKENS = 48  # enough for the default's every shape: tree, its spine, plain steps (policy.Fallback)


def _warm_passes(pair, progress=lambda message: None) -> None:
    """On a GPU, one short default generation at each of WARM_CONTEXTS: MLX compiles kernels at
    their first use (NVRTC on CUDA: a long context's first tree pass took 2-5 s and its first
    chain 41 s on an H100), which must not land in a request's timed cycles. Their fastest plain
    steps become `pair.step_prior`, which spares a request's Fallback timing steps of its own
    while drafting clearly pays."""
    if backend.on_cpu():
        return
    progress("running the default once at a short and a long context (the GPU compiles its kernels)")
    V, limit = pair.target.vocab_size, (pair.target.max_context or 10**9) - WARM_TOKENS - MAX_TREE - 2
    pair.step_prior, prior = None, []  # the generations time their own plain steps
    for n in (min(c, limit) for c in WARM_CONTEXTS):
        steps = [(n + c.total_tokens, 1e3 * c.verify_s) for c in stream(
            pair, [(i * 7919) % V for i in range(n)], GenerationConfig(max_tokens=WARM_TOKENS))
            if c.kind == "cycle" and c.block_size == 1]
        if steps:
            prior.append(min(steps, key=lambda s: s[1]))  # the fastest: a step in a run of steps
    pair.step_prior = tuple(prior) if len(prior) == len(WARM_CONTEXTS) else None


def _costs(pair, B, tree_nodes=None) -> dict:
    """Measured forward costs for the planners, once per pair and verify shape, and kept on disk
    per host and models (policy.stored_costs) so that the next start does not time them again."""
    if pair.costs is None or (pair.costs.get("block_size"), pair.costs.get("tree_nodes")) != (B, tree_nodes):
        if pair.agree is not None:  # a sharded target: rank 0's costs, timed on every rank at once
            costs = measure_costs(pair, B, tree_nodes=tree_nodes, same=pair.agree.same)
        else:
            key = _cost_key(pair, B, tree_nodes)
            costs = stored_costs(_costs_dir(), key)
            if costs is None:
                costs = measure_costs(pair, B, tree_nodes=tree_nodes)
                store_costs(_costs_dir(), key, costs)
        pair.costs = dict(costs, block_size=B, tree_nodes=tree_nodes)
    return pair.costs


def _costs_dir():
    from .builtin import cache_dir

    return cache_dir() / "costs"


def _cost_key(pair, B, tree_nodes) -> dict:
    """What the costs depend on: this host and backend, the two models, the verify shapes."""
    import hashlib
    import inspect
    import os
    import platform

    from . import policy, target
    from .backends import cpu_attention, cpu_rows, host_ops, kernels

    # what timed them and what they timed: a change to the passes' code times them again
    code = "".join(inspect.getsource(m) for m in (policy, target, cpu_attention, cpu_rows, host_ops, kernels))
    probe = hashlib.sha256(code.encode()).hexdigest()[:16]
    # a BLAS pinned to fewer threads (a test run, a shared host) times other costs
    threads = {v: os.environ[v] for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if v in os.environ}
    return {"probe": probe, "mlx": mx.__version__, "device": backend.device(), "threads": threads,
            "cores": os.cpu_count(), "host": platform.node(), "backend": repr(pair.backend),
            "target": pair.model_id, "drafter": pair.draft_id, "drafter_args": repr(pair.drafter.args),
            "block_size": B, "tree_nodes": tree_nodes}


def _dflash_cycle(target, drafter, cache, context, sampler, out, staged, B):
    t = perf_counter()
    # draft: one drafter pass over [staged, MASK...] -> logits for d_1..d_{B-1}
    if sampler.greedy and getattr(drafter, "has_markov", False):  # each draft sees the one before
        drafted, q = drafter.chain(target, staged, B, context.cache()), None
    else:
        drafted, q = sampler.draft(drafter.propose(target, staged, B, context.cache()))
    mx.eval(drafted)
    t_draft = perf_counter()

    # verify: one target pass over [staged, d_1..d_{B-1}]
    verify_ids = mx.concatenate([mx.array([staged]), drafted.astype(mx.int32)])[None]
    logits, feats, tapes = target.forward(verify_ids, cache, record=target.is_hybrid)
    acc, nxt = sampler.accept(drafted, q, logits[0])
    acc, nxt, drafted = acc.item(), nxt.item(), drafted.tolist()
    t_verify = perf_counter()

    # commit: accepted drafts, then the target's own token (correction or bonus)
    proposed = drafted[acc] if acc < B - 1 else None
    committed = out.emit([(d, "draft", None) for d in drafted[:acc]] + [(nxt, "target", proposed)])

    # rollback: caches keep staged + d_1..d_acc; the drafter sees their features next cycle
    if out.finish is None:
        target.rollback(cache, tapes, B, acc + 1)
        context.add(feats[:, : acc + 1])
        if tapes:
            mx.eval([c.state for c in cache])
    times = (t_draft - t, t_verify - t_draft, perf_counter() - t_verify)
    return tuple(drafted), acc, committed, times


def _tree_cycle(target, drafter, cache, context, out, staged, B, nodes, planner, copy=((), ())):
    t = perf_counter()
    # draft: one drafter pass over the block, then the most probable paths through it (and
    # through a copy from the context)
    logits = drafter.draft_logits(target, staged, B, context.cache())
    ids, logp, bias = tree.draft(drafter, target, logits)
    budget = planner.max_nodes if planner else nodes
    tr = tree.build(staged, ids, logp, budget, bias)
    tr = tree.graft(tr, *copy, budget)
    if planner:
        tr = planner.choose(tr)  # its best-first prefix, or its spine
    tr = tr.spine_first()  # accepted along the spine, the caches only trim
    t_draft = perf_counter()

    # verify: one target pass over every node, each seeing only its ancestors
    logits, feats, _ = target.forward(mx.array([tr.tokens]), cache, tree=tree.Layout.of(tr))
    keep, nxt = tree.accept(tr, mx.argmax(logits[0], axis=-1).tolist())
    t_verify = perf_counter()

    # commit: the accepted path, then the target's own token (correction or bonus)
    acc = len(keep) - 1
    children = [i for i in range(1, len(tr)) if tr.parents[i] == keep[-1]]
    proposed = tr.tokens[children[0]] if children else None  # the best child: its first
    committed = out.emit([(tr.tokens[i], "draft", None) for i in keep[1:]] + [(nxt, "target", proposed)])

    # compact: caches keep the path; the drafter sees its features next cycle
    if out.finish is None:
        tree.compact(cache, len(tr), keep)
        context.add(feats[:, mx.array(keep)])
    times = (t_draft - t, t_verify - t_draft, perf_counter() - t_verify)
    return tr.tokens[1:], acc, committed, times, (tr.parents[1:], tuple(keep[1:]), tr.follow(copy[0]))


class DraftContext:
    """The drafter's context cache, fed lazily: features of committed positions wait here
    until the next draft needs them (plain target steps then cost the drafter nothing)."""

    def __init__(self, drafter):
        self.drafter, self._cache, self.pending = drafter, drafter.make_cache(), []

    def add(self, features: mx.array) -> None:
        self.pending.append(features)

    def cache(self) -> list:
        if self.pending:
            blocks, keep = self.pending, getattr(self.drafter, "context_keep", None)
            if keep is not None:  # a windowed drafter: blocks wholly before its window are
                i, tail = len(blocks), 0  # counted, never gathered (a long prompt's prefill)
                while i > 0 and tail < keep:
                    i, tail = i - 1, tail + blocks[i - 1].shape[1]
                if i:
                    for c in self._cache:
                        c.skip(sum(b.shape[1] for b in blocks[:i]))
                    blocks = blocks[i:]
            self.drafter.extend_context(mx.concatenate(blocks, axis=1), self._cache)
            self.pending = []
        return self._cache


def _target_cycle(target, cache, sampler, out, staged, extend=None):
    t = perf_counter()
    logits, feats, _ = target.forward(mx.array([[staged]]), cache)
    nxt = sampler.sample(logits[0, -1]).item()
    committed = out.emit([(nxt, "target", None)])
    if extend is not None:  # a plain step inside a DFlash run: the drafter still sees it
        extend(feats)
    return (), 0, committed, (0.0, perf_counter() - t, 0.0)


def _summary(cfg, B, out, cycles, n_prompt, ttft, total, verify="") -> Summary:
    n_cycles = len(cycles)
    lengths = tuple(c.accepted for c in cycles)
    offered = sum(len(c.drafted) for c in cycles)
    per_pos = tuple(sum(a > i for a in lengths) / n_cycles if n_cycles else 0.0 for i in range(B - 1))
    tokens = len(out.ids)
    decode_s = (cycles[-1].t - ttft) if cycles else 0.0
    return Summary(
        mode=cfg.mode,
        block_size=B,
        token_ids=tuple(out.ids),
        text=out.text(),
        tokens=tokens,
        cycles=n_cycles,
        tau=(1 + sum(lengths) / n_cycles) if n_cycles else 0.0,
        acceptance_rate=sum(lengths) / offered if offered else 0.0,
        acceptance_lengths=lengths,
        per_position_acceptance=per_pos,
        prompt_tokens=n_prompt,
        ttft_s=ttft,
        decode_s=decode_s,
        decode_tok_s=(tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else 0.0,
        draft_s=sum(c.draft_s for c in cycles),
        verify_s=sum(c.verify_s for c in cycles),
        rollback_s=sum(c.rollback_s for c in cycles),
        finish_reason=out.finish or "length",
        verify=verify,
    )
