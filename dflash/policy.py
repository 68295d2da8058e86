"""Verify length from measured costs: the k that maximises expected tokens per second.

Whether draft i is accepted hardly depends on the block length, so one acceptance profile serves
every k:  E[tokens | k] = 1 + sum_{i=1}^{k-1} P(first i accepted), and the best k maximises
E[tokens | k] / (t_verify(k) + t_draft). When no k beats a plain target step, a plain step runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from . import tree as tree_mod

NOISE = 1.05  # DFlash must beat target-only by this factor, or target-only runs


def expected_tokens(per_position: Sequence[float], k: int) -> float:
    """Committed tokens per cycle when k tokens are verified; per_position[i-1] = P(first i accepted)."""
    return 1.0 + sum(per_position[: k - 1])


def choose_verify_length(per_position: Sequence[float], verify_ms: dict[int, float],
                         draft_ms: float | dict[int, float], step_ms: float, overhead_ms: float = 0.0,
                         noise: float = NOISE) -> Optional[int]:
    """The verify length k (2..B) with the highest tokens/s, or None when target-only is faster.

    Args:
        per_position: observed per-position acceptance (Summary.per_position_acceptance).
        verify_ms: measured t(k) of a k-token target forward, for the k to consider.
        draft_ms: one drafter pass (incl. its lm_head), per block length k or one for all.
        step_ms: t(1) of the FASTEST target-only configuration on this machine.
        overhead_ms: host time per cycle outside the model forwards (accept, rollback, emit).
    """
    def rate(k: int) -> float:
        return expected_tokens(per_position, k) / (verify_ms[k] + _at(draft_ms, k) + overhead_ms)

    candidates = [k for k in verify_ms if 2 <= k <= len(per_position) + 1]
    if not candidates:
        return None
    best = max(candidates, key=rate)
    return best if rate(best) >= noise / step_ms else None


def _at(draft_ms: float | dict[int, float], k: int) -> float:
    """The draft cost read out at k positions: per block length, or one for all."""
    return draft_ms[k] if isinstance(draft_ms, dict) else draft_ms


CANDIDATE_KS = (2, 3, 4, 6, 8, 12, 16, 24, 32)
# Drafted nodes TreePlanner may verify: a pass feeds the staged token too, so these fill 4, 8,
# 16, 24, ... rows, whole row tiles where a host pads rows to 8 (cpu_rows.call_rows: on an Intel
# CPU a tree of 16 nodes cost 2.25 target steps, one of 15 1.90).
TREE_SIZES = (3, 7, 15, 23, 31, 47, 63)
TIMED_SIZES = (3, 7, 15, 31, 63)  # of those, timed; a pass's cost is near affine in its row tiles
MAX_TREE_STEPS = 6.0  # a tree pass costing more target steps than this is not measured further


FAR = 2048  # costs are timed again this many tokens further into the context (costs_at)
FAR_REPS = 1  # after a warm-up run: a growth rate, not a ranking; each far pass is slow on a CPU
MIN_FAR = 128  # a target whose context leaves less room is timed near only
# the near table is the per-shape fastest of this many probes run back to back: on a 2-core VM one
# probe's shapes moved +-20-30 % between probes, two merged +-3 % (lab/bench/results/s41/ab56.txt)
NEAR_ROUNDS = 2


STORED_FOR_S = 7 * 24 * 3600  # a host's stored costs are timed again after a week


def stored_costs(folder: Path, key: dict) -> Optional[dict]:
    """Costs `store_costs` kept for this key (host, backend, models, shapes), unless too old."""
    try:
        doc = json.loads(_cost_file(folder, key).read_text())
    except (OSError, ValueError):
        return None
    if doc.get("key") != key or time.time() - doc.get("measured_at", 0) > STORED_FOR_S:
        return None
    return _int_keys(doc["costs"])


def store_costs(folder: Path, key: dict, costs: dict) -> None:
    """Keep measured costs for the next process on this host (atomically: a reader never sees half)."""
    path = _cost_file(folder, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "measured_at": time.time(), "costs": costs}))
        tmp.replace(path)
    except OSError:  # a read-only cache: time them again next start
        pass


def _cost_file(folder: Path, key: dict) -> Path:
    return Path(folder) / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24] + ".json")


def _int_keys(d):
    """JSON's string keys back to the ints the cost tables use (tree sizes, block lengths)."""
    if not isinstance(d, dict):
        return d
    return {int(k) if isinstance(k, str) and k.isdigit() else k: _int_keys(v) for k, v in d.items()}


def probe_context(key_chunk: int) -> int:
    """The cache length costs are timed at: ~128 committed tokens, placed so that the last key
    chunk (the target's `key_chunk`) is half full. A tree row's attention gathers that chunk's
    keys and its ancestors, so a row costs by the chunk's fill, which a run sweeps through:
    timed at a full chunk (128 tokens in chunks of 128), trees of 31 nodes cost 9 % less than
    the engine's cycles then paid on an Intel CPU, and the planner bought trees too large."""
    return 128 // key_chunk * key_chunk + key_chunk // 2


def measure_costs(pair, block_size: int, context: Optional[int] = None, reps: int = 3,
                  tree_nodes: Optional[int] = None, same: Optional[Callable[[float], float]] = None,
                  far: Optional[int] = FAR) -> dict:
    """Ms of a target step, and of a k-token verify and a draft read out at k positions
    (k = 2..block_size; the drafter always fills its whole block), on a `context`-token cache:
    what `Planner` weighs. With tree_nodes: verify_ms[n] is a tree pass of n drafted nodes
    (n in TREE_SIZES up to tree_nodes; timed at TIMED_SIZES, linear between), chain_ms[n] a
    chain pass of n drafts (timed at 2, 8 and the block's), and draft_ms one draft plus its
    tree build, what `TreePlanner` weighs. Each is the fastest of `reps` runs (_fastest_ms) in
    NEAR_ROUNDS whole probes, at `probe_context` unless given. `same` maps each value to the one
    every rank uses (a sharded target: rank 0's, so that all ranks choose and run alike).

    A pass's attention grows with the context, and a tree's or a block's faster than a step's,
    so a few of the same passes are timed again `far` tokens further on (the caches grown with
    stand-in keys: no prefill), under "far"; `costs_at` reads the costs off at any context."""
    import mlx.core as mx

    target, drafter = pair.target, pair.drafter
    context = context or probe_context(target.key_chunk)
    ids = mx.array([[(7 * i + 10) % target.vocab_size for i in range(context)]])  # in the vocabulary: the gather is unchecked
    cache, dcache = target.make_cache(), drafter.make_cache()
    _, feats, _ = target.forward(ids, cache)
    drafter.extend_context(feats, dcache)
    mx.eval([c.state for c in cache], [c.state for c in dcache])

    def timed(fn, n=reps) -> float:
        return _fastest_ms(fn, n, same)

    def verify(k, tree=None):
        def run():
            layout = None if tree is None else tree_mod.Layout.of(tree)
            logits, _, tapes = target.forward(ids[:, :k], cache, record=target.is_hybrid, tree=layout)
            out = mx.argmax(logits, -1)
            mx.eval(out)
            target.rollback(cache, tapes, k, 0)
            return out
        return run

    chain_draft = lambda k: lambda: drafter.propose(target, 5, k, dcache)  # noqa: E731

    def near():  # (costs, the passes timed again further on)
        if tree_nodes:
            step_ms = timed(verify(1))
            timed_ms = {}
            for n in sorted({n for n in TIMED_SIZES if n < tree_nodes} | {tree_nodes}):
                timed_ms[n] = timed(verify(n + 1, _sample_tree(n, block_size - 1)))
                if timed_ms[n] > MAX_TREE_STEPS * step_ms:  # larger trees cannot pay here
                    break
            verify_ms = _monotone(_between(timed_ms, [*TREE_SIZES, tree_nodes]))
            sizes = sorted(verify_ms)
            b = block_size - 1
            chains = [n for n in TREE_SIZES if n < b] + [b]
            timed_chains = {min(n, b) for n in TIMED_SIZES[:2]} | {b}
            chain_ms = _monotone(_between({n: timed(verify(n + 1)) for n in timed_chains}, chains))

            def tree_draft():
                return tree_mod.build(5, *tree_mod.candidates(
                    drafter.draft_logits(target, 5, block_size, dcache), token_ids=drafter.token_ids),
                    sizes[-1]).tokens
            costs = {"step_ms": step_ms, "verify_ms": verify_ms, "chain_ms": chain_ms, "draft_ms": timed(tree_draft)}
            far_shapes = {"verify_ms": {n: verify(n + 1, _sample_tree(n, b)) for n in _far_sizes(sizes)},
                          "chain_ms": {b: verify(b + 1)}, "draft_ms": tree_draft}
        else:
            ks = [k for k in CANDIDATE_KS if k < block_size] + [block_size]
            verify_ms = _monotone({k: timed(verify(k)) for k in [1] + ks})
            step_ms = verify_ms.pop(1)
            costs = {"step_ms": step_ms, "verify_ms": verify_ms, "draft_ms": _monotone({k: timed(chain_draft(k)) for k in ks})}
            far_shapes = {"verify_ms": {k: verify(k) for k in {min(4, block_size), block_size}},
                          "draft_ms": {block_size: chain_draft(block_size)}}
        return costs, far_shapes

    # a slow stretch of the host rarely covers a shape in every round; the fewest sizes first
    tables = sorted((near() for _ in range(NEAR_ROUNDS)), key=lambda t: len(t[0]["verify_ms"]))
    costs = _fastest_of([t[0] for t in tables])
    far = min(far or 0, (target.max_context or 1 << 30) - context - (tree_nodes or block_size) - 1)
    if far >= MIN_FAR:
        _stand_in_context(cache, far)
        _stand_in_context(dcache, far)
        costs["far"] = {"context": context + far, **_timed_all(timed, {"step_ms": verify(1), **tables[0][1]})}
    return dict(costs, context=context)


def _timed_all(timed, shapes: dict) -> dict:
    """FAR_REPS timed runs of every pass in `shapes` (nested dicts alike)."""
    return {k: _timed_all(timed, f) if isinstance(f, dict) else timed(f, FAR_REPS) for k, f in shapes.items()}


def _fastest_of(tables: list[dict]) -> dict:
    """Cost tables merged shape by shape: each entry the fastest every table timed (a tree size
    one probe found too costly to time is left out)."""
    keys = [k for k in tables[0] if all(k in t for t in tables)]
    return {k: _fastest_of([t[k] for t in tables]) if isinstance(tables[0][k], dict) else min(t[k] for t in tables)
            for k in keys}


def _fastest_ms(fn, reps: int, same: Optional[Callable[[float], float]] = None) -> float:
    """The fastest of `reps` evaluations of fn() after a warm-up run (first-use kernels), in ms,
    through `same` where every rank must use rank 0's. The fastest: another process or a GPU
    clock only ever adds time, and a median of three noisy GPU runs ranked trees of 16 and 64
    nodes the wrong way round in some processes."""
    import mlx.core as mx

    times = []
    for _ in range(reps + 1):
        t = time.perf_counter()
        mx.eval(fn())
        times.append((time.perf_counter() - t) * 1000)
    ms = min(times[1:])
    return same(ms) if same else ms


def _far_sizes(sizes: list[int]) -> list[int]:
    """The tree sizes timed again further into the context: a small, a middle and the largest."""
    return sorted({sizes[0], min(sizes, key=lambda n: abs(n - 15)), sizes[-1]})


def _stand_in_context(cache: list, n: int) -> None:
    """Grow every attention cache by n positions of stand-in keys and values (a pass costs the
    same whatever they hold); recurrent states (GatedDeltaNet) do not grow."""
    import mlx.core as mx

    key = mx.random.key(0)  # not the global generator: sampling must not move
    for c in cache:
        if getattr(c, "keys", None) is None or not hasattr(c, "update_and_fetch"):
            continue
        k, v = c.keys[..., : c.offset, :], c.values[..., : c.offset, :]
        shape = (*k.shape[:2], n, k.shape[-1])
        c.update_and_fetch(mx.random.normal(shape, key=key).astype(k.dtype),
                           mx.random.normal((*shape[:3], v.shape[-1]), key=key).astype(v.dtype))
    mx.eval([c.state for c in cache if getattr(c, "keys", None) is not None])


def costs_at(costs: dict, context: int) -> dict:
    """The measured costs read off at a `context`-token cache: each the near value plus its
    growth per token (near to far, never negative) times the tokens past the near context. Sizes
    not timed far grow like their neighbours in rows (a step is a pass of 0 drafted nodes)."""
    far = costs.get("far")
    if far is None:
        return costs
    span, past = far["context"] - costs["context"], max(context - costs["context"], 0)

    def grow(near, far_ms) -> float:
        return max(far_ms - near, 0.0) / span

    step = grow(costs["step_ms"], far["step_ms"])
    out = {"step_ms": costs["step_ms"] + step * past, "context": context}
    for key in ("verify_ms", "chain_ms"):
        if key not in costs:
            continue
        timed = {n: grow(costs[key][n], ms) for n, ms in far[key].items()}
        xs = [0 if "chain_ms" in costs else 1, *sorted(timed)]  # where a step sits: 0 nodes, 1 token
        ys = [step, *(timed[n] for n in sorted(timed))]
        out[key] = _monotone({n: ms + float(np.interp(n, xs, ys)) * past for n, ms in costs[key].items()})
    d = costs["draft_ms"]
    if isinstance(d, dict):
        (k, far_d), = far["draft_ms"].items()
        out["draft_ms"] = {n: ms + grow(d[k], far_d) * past for n, ms in d.items()}
    else:
        out["draft_ms"] = d + grow(d, far["draft_ms"]) * past
    return out


def _sample_tree(n: int, depth: int):
    """A tree of n nodes shaped like drafted ones and laid out as the engine lays them out,
    spine first (for timing: a pass costs by rows, depth and how many rows are the spine's)."""

    w = tree_mod.WIDTH
    logp = -(0.4 * np.arange(depth)[:, None] + 0.9 * np.arange(w)[None])
    return tree_mod.build(5, np.arange(depth * w).reshape(depth, w) + 10, logp, n).spine_first()


def _between(ms: dict[int, float], sizes) -> dict[int, float]:
    """The timed costs, and linear between the timed sizes for the other `sizes` in their range
    (timing every size would hold up a CPU's first cycle ~3x as long)."""
    xs = sorted(ms)
    ys = [ms[x] for x in xs]
    return {n: ms.get(n, float(np.interp(n, xs, ys)))
            for n in sorted(set(sizes) | set(xs)) if xs[0] <= n <= xs[-1]}


def _monotone(ms: dict[int, float]) -> dict[int, float]:
    """A k-token pass never costs more than a longer one: t(k) = min over k' >= k (timing noise
    on a short pass must not hide it)."""
    out, best = {}, float("inf")
    for k in sorted(ms, reverse=True):
        best = min(best, ms[k])
        out[k] = best
    return dict(sorted(out.items()))


CONTEXT_STEP = 64  # a planner reads its costs off anew each time the context grows this much


class _Costed:
    """A planner's costs: as measured, and read off at the context the engine is at."""

    def __init__(self, costs: dict):
        self.measured, self.costs = costs, costs_at(costs, costs.get("context", 0))

    def at(self, context: int) -> None:
        """Before each cycle: the cache holds `context` tokens."""
        if "far" in self.measured and abs(context - self.costs["context"]) >= CONTEXT_STEP:
            self.costs = costs_at(self.measured, context)


class Planner(_Costed):
    """Picks each cycle's verify length from measured costs and the acceptance seen so far.

    k = 1 means a plain target step (nothing drafted). A full block is drafted now and then
    anyway (a probe), so the acceptance profile stays observed while plain steps win; while
    probes keep losing, they come at doubling intervals (8, 16, ... 64 cycles) and never closer
    than their extra cost over a plain step (in steps) / (NOISE - 1) cycles, so a drafter that
    does not pay costs at most the NOISE margin (a 16-token probe cost ~3 plain steps on the AMD
    CPU host and ~10 on an Intel one, where doubling alone spent ~20 %). Acceptance counts fade
    by `decay` per cycle: an answer's opening tokens are often harder to draft than its body,
    and the estimate must follow that.
    """

    def __init__(self, costs: dict, block_size: int, probe_every: int = 8, max_interval: int = 64,
                 prior: float = 1.0, decay: float = 0.97):
        super().__init__(costs)
        self.B = block_size
        self.base, self.max_interval, self.interval = probe_every, max_interval, probe_every
        self.prior, self.decay = prior, decay  # pseudo-counts: with no evidence, optimistic
        self.accepted = [0.0] * (block_size - 1)
        self.offered = [0.0] * (block_size - 1)
        self.cycles, self.probe_at, self.choice = 0, 0, None

    @property
    def min_gap(self) -> int:
        """Cycles between probes that lose, at the least: a losing probe still commits one
        token, so its extra cost is probe - step."""
        probe_ms = self.costs["verify_ms"][self.B] + _at(self.costs["draft_ms"], self.B)
        return math.ceil((probe_ms / self.costs["step_ms"] - 1) / (NOISE - 1))

    def per_position(self) -> list[float]:
        """P(first i drafts accepted), i = 1..B-1, from per-position conditional rates."""
        p, out = 1.0, []
        for a, o in zip(self.accepted, self.offered):
            p *= (a + self.prior) / (o + self.prior)
            out.append(p)
        return out

    def next_k(self, copy_logp=()) -> int:
        """copy_logp: unused (a chain verifies no copy from the context)."""
        return self.B if self.cycles >= self.probe_at else (self.choice or 1)

    def observe(self, k: int, acc: int, ms: Optional[float] = None) -> None:
        """After each cycle: k tokens verified, acc accepted (ms, the cycle's real cost: unused,
        the chain's costs are its measured ones)."""
        probe = self.cycles >= self.probe_at
        self.cycles += 1
        for i in range(self.B - 1):  # position i+1 was verified if i < k-1; accepted if acc > i
            self.offered[i] = self.decay * self.offered[i] + (i < k - 1)
            self.accepted[i] = self.decay * self.accepted[i] + (i < k - 1 and acc > i)
        self.choice = choose_verify_length(self.per_position(), self.costs["verify_ms"],
                                           self.costs["draft_ms"], self.costs["step_ms"])
        if probe:
            self.interval = (self.base if self.choice else
                             max(min(2 * self.interval, self.max_interval), self.min_gap))
            self.probe_at = self.cycles + self.interval


SHAPE_WEIGHT = 0.2  # TreePlanner: a drafted cycle's weight in the moving means of its shape
COST_WEIGHT = 0.1  # TreePlanner: a cycle's weight in the moving ratio of real to measured cost
RECHECK = 1.25  # TreePlanner: drafted cycles this much costlier than measured: time a plain step
WARMUP = 4  # TreePlanner: drafted cycles before drafting may be judged not to pay


STEP_SAMPLES = 3  # Fallback: a plain step's cost is the median of the last this many timed
RETIME = 32  # Fallback: while drafting pays, one plain step re-timed every this many drafted cycles
PRIOR_MARGIN = 1.5  # Fallback: drafting this far ahead of a prior step's rate: no step timed


class _Shape:
    """A verify shape's real cycles: moving means of tokens committed and ms per cycle, and when
    it is next probed while another shape runs."""

    def __init__(self, k: int, interval: int):
        self.k, self.tokens, self.ms, self.cycles, self.interval, self.probe_at = k, None, None, 0, interval, 0

    def rate(self) -> float:
        return self.tokens / self.ms if self.cycles else 0.0

    def add(self, tokens: int, ms: float, weight: float) -> None:
        self.tokens = tokens if self.tokens is None else (1 - weight) * self.tokens + weight * tokens
        if self.ms is None or (self.cycles == 1 and ms < self.ms):
            self.ms = ms  # the lower of its first two: the first may have compiled (CUDA's kernels)
        else:  # a later stall (a graph captured again) moves the mean by <= 3x its weight
            self.ms = (1 - weight) * self.ms + weight * min(ms, 3 * self.ms)
        self.cycles += 1


class Fallback:
    """The host's default verify shape, fixed (a tree of n nodes or a chain), against the cheaper
    shapes below it: for a tree, the chain along its spine (`chain`: its verify length); for
    either, plain target steps. Each cycle runs the shape whose cycles commit the most tokens
    per second, drafting only while that beats plain steps by the NOISE margin.

    Judged only on what cycles really commit and cost, not on probed passes: on MLX's CUDA
    backend a long context's tree pass inside a captured graph costs several times the same pass
    timed alone (docs/performance.md). A plain step's ms is the median of the last STEP_SAMPLES
    timed (two after WARMUP drafted cycles, then one every RETIME drafted cycles: one stalled
    step, or a context that grew, must not decide alone), never the first step after drafted
    cycles: on an H100 with CUDA graphs that one cost 14-47 ms against 7 in a run of steps. A
    shape that is not the best is probed at doubling intervals, never closer than its extra cost
    over a step allows (as Planner's probes), so a shape that does not pay costs at most about
    the NOISE margin.

    `prior`: (context, ms) of the fastest plain steps this process's warm generations took
    (engine.warm, on a GPU). Timing steps costs a short answer several one-token cycles; with a
    prior they are timed only while the best drafted shape commits less than PRIOR_MARGIN
    times a prior step's tokens per ms (a real step in a run is no faster than the prior's).
    """

    def __init__(self, k: int, chain: int = 0, probe_every: int = 8, max_interval: int = 64,
                 weight: float = 0.25, prior: Optional[tuple] = None):
        self.shapes = [_Shape(k, probe_every)] + ([_Shape(chain, probe_every)] if chain else [])
        self.steps: list[float] = []  # the last STEP_SAMPLES plain steps' ms
        self.prior, self.context = prior, 0
        self.weight, self.base, self.max_interval = weight, probe_every, max_interval
        self.cycles = self.since_step = 0
        self._shape = self.shapes[0]  # the drafted shape of the cycle under way
        self._after_draft = False  # the next plain step follows a drafted cycle: not timed

    @property
    def k(self) -> int:
        return self.shapes[0].k

    @property
    def max_nodes(self) -> int:
        return self.k - 1

    @property
    def step_ms(self) -> Optional[float]:
        """The timed steps' median; before any, the prior's at this context (None: no prior)."""
        if self.steps:
            return float(np.median(self.steps))
        return step_prior(self.prior, self.context) if self.prior else None

    def at(self, context: int) -> None:
        """The context length, for the prior; the real cycles' costs already follow it."""
        self.context = context

    def _step_in_doubt(self) -> bool:
        """Whether plain steps must be timed: always once timed or without a prior; with one,
        while the best drafted shape is within PRIOR_MARGIN of a prior step's rate."""
        if self.steps or not self.prior:
            return True
        return max(s.rate() for s in self.shapes) < PRIOR_MARGIN / self.step_ms

    def choose(self, tr: tree_mod.Tree) -> tree_mod.Tree:
        """The drafted tree, or its spine where the chain's turn has come."""
        return tr if self._shape is self.shapes[0] else tr.path(tr.spine()[: self._shape.k])

    def _best(self) -> Optional[_Shape]:
        """The drafted shape that commits the most tokens per second, None where steps win."""
        best = max(self.shapes, key=_Shape.rate)
        return best if self.step_ms is None or best.rate() >= NOISE / self.step_ms else None

    def pays(self) -> bool:
        return self._best() is not None

    def next_k(self, copy_logp=()) -> int:
        full = self.shapes[0]
        if full.cycles < WARMUP:
            self._shape = full
        elif (len(self.steps) < 2 or self.since_step >= RETIME) and self._step_in_doubt():
            return 1  # time what a plain step costs here (again)
        elif (new := next((s for s in self.shapes if s.cycles < 2), None)) is not None:
            self._shape = new  # the chain's first cycles
        else:
            best = self._best()
            due = [s for s in self.shapes if s is not best and self.cycles >= s.probe_at]
            if best is None and not due:
                return 1
            self._shape = due[0] if due else best
        return self._shape.k

    def observe(self, k: int, acc: int, ms: Optional[float] = None) -> None:
        self.cycles += 1
        if ms is None:
            return
        if k == 1:
            if self._after_draft:  # the switch's cost, not a step's (see the class's docstring)
                self._after_draft = False
                return
            self.steps = [*self.steps, ms][-STEP_SAMPLES:]
            self.since_step = 0
            return
        self.since_step += 1
        self._after_draft = True
        shape = self._shape
        shape.add(1 + acc, ms, self.weight)
        if shape is self._best() or self.step_ms is None:
            shape.interval = self.base
        else:  # it lost: its next probe waits twice as long, and never costs more than NOISE
            min_gap = math.ceil((shape.ms / self.step_ms - 1) / (NOISE - 1))
            shape.interval = max(min(2 * shape.interval, self.max_interval), min_gap)
            shape.probe_at = self.cycles + shape.interval


def step_prior(points: tuple, context: int) -> float:
    """A plain step's ms at `context`, read linearly off (context, ms) points (Fallback's prior),
    never below the fastest of them."""
    (c0, m0), (c1, m1) = points[0], points[-1]
    if c1 == c0:
        return min(m0, m1)
    return max(min(m0, m1), m0 + (m1 - m0) * (context - c0) / (c1 - c0))


class TreePlanner(_Costed):
    """Picks each cycle's verify shape, a tree of n drafted nodes or a chain of n, from
    measured costs.

    A best-first tree of n nodes is the first n nodes of a larger one, and its expected accepted
    drafts are the sum of its nodes' path probabilities (tree.expected_accepts); the chain is
    the tree's spine (each node's most probable child), whose pass costs less where a tree's
    attention gathers ancestors (the CPU). Those are the drafter's own probabilities, so they
    are scaled by what the target really accepted against what they predicted (counts fading by
    `decay`, from `prior` pseudo-counts). An answer's first tokens are often the hardest to
    draft, so the first WARMUP cycles draft whatever they predict. Each drafted cycle verifies
    the shape with the most expected tokens per second. Whether drafting pays at all is judged
    on the typical shape (moving means of the chosen shapes' predicted accepts and costs) at the
    current scale, so a probe that lands counts at once; while it loses to a plain target step
    by the NOISE margin, plain steps run, with probes spaced as in Planner (the extra cost of a
    probe is that of the shape the last one verified), and a cycle drafts between probes when
    the context offers a copy whose own expected accepts pay for it (repetition the drafter's
    record cannot foresee). The costs were measured on bare passes; a real cycle also pays the
    host's work around them (the tree's build, syncs, the emitted events), so each kind of
    cycle's real time, when the engine gives it, scales its measured cost: drafted cycles by one
    moving ratio, plain steps by another. Where drafted cycles cost RECHECK times their
    measure or more before any plain step ran, one plain step is run to time it rather than
    assume steps slowed as much (a long context's tree passes can slow where steps do not).
    """

    def __init__(self, costs: dict, probe_every: int = 8, max_interval: int = 64,
                 prior: float = 4.0, decay: float = 0.97):
        super().__init__(costs)
        self.sizes = sorted(costs["verify_ms"])
        self.decay, self.predicted, self.accepted = decay, prior, prior
        self.shape = None  # moving means (predicted accepts, measured ms) of the chosen shapes
        self.base, self.max_interval, self.interval = probe_every, max_interval, probe_every
        self.cycles, self.probe_at, self.drafted = 0, 0, 0
        self.slow_cycle, self.slow_step = 1.0, None  # real / measured cost, drafted and plain
        self._by_copy = False  # the cycle drafts because a copy from the context pays

    @property
    def max_nodes(self) -> int:
        return self.sizes[-1]

    @property
    def scale(self) -> float:
        """Accepted drafts per drafted ones the drafter's probabilities predicted."""
        return self.accepted / self.predicted

    def step_ms(self) -> float:
        """A plain target step's cost as the loop pays it."""
        return self.costs["step_ms"] * (self.slow_step or self.slow_cycle)

    def pays(self) -> bool:
        if self.drafted < WARMUP:  # an answer's opening is no sample of its drafts: optimistic
            return True
        expected, ms = self.shape
        return self._beats_a_step(self.scale * expected, ms)

    def _beats_a_step(self, accepts: float, ms: float) -> bool:
        """Whether a drafted cycle of measured cost `ms` committing 1 + `accepts` tokens beats
        plain target steps by the NOISE margin, both at what the loop really pays."""
        return (1 + accepts) / (ms * self.slow_cycle) >= NOISE / self.step_ms()

    def next_k(self, copy_logp=()) -> int:
        """Tokens to verify next: a tree of up to max_nodes (+ the staged token), or 1 (a plain
        target step) while trees lose, no probe is due and no copy from the context would pay
        by itself (copy_logp: its tokens' path log-probabilities, lookup.py)."""
        self._by_copy = False
        if self.slow_step is None and self.drafted >= WARMUP and self.slow_cycle >= RECHECK:
            return 1  # what a plain step costs here, timed once
        if self.pays() or self.cycles >= self.probe_at:
            return self.max_nodes + 1
        self._by_copy = self._copy_pays(copy_logp)
        return self.max_nodes + 1 if self._by_copy else 1

    def _copy_pays(self, copy_logp) -> bool:
        """Whether a cycle of the typical shape pays on the copy's expected accepts alone: a
        text that repeats itself is worth drafting however the drafter did before it."""
        if not len(copy_logp) or self.shape is None:
            return False
        return self._beats_a_step(float(np.exp(copy_logp).sum()), self.shape[1])

    def choose(self, tr: tree_mod.Tree) -> tree_mod.Tree:
        """What to verify of a drafted tree: its first n nodes, or the first n of its spine."""
        draft_ms = self.costs["draft_ms"]
        tree_exp, spine = tree_mod.expected_accepts(tr), tr.spine()
        chain_exp = np.concatenate([[0.0], np.cumsum(np.exp([tr.logp[i] for i in spine[1:]]))])
        shapes = [(n, False, tree_exp[n], ms) for n, ms in self.costs["verify_ms"].items() if n < len(tr)]
        shapes += [(n, True, chain_exp[n], ms) for n, ms in self.costs.get("chain_ms", {}).items()
                   if n < len(spine)]
        rate = [(1 + self.scale * e) / (ms + draft_ms) for _, _, e, ms in shapes]
        n, is_chain, self._expected, ms = shapes[int(np.argmax(rate))]
        self._cycle_ms = ms + draft_ms
        return tr.path(spine[: n + 1]) if is_chain else tr.prefix(n)

    def observe(self, k: int, acc: int, ms: Optional[float] = None) -> None:
        """After each cycle: k tokens verified (1: a plain step), acc drafts accepted, and the
        cycle's real cost in ms if known."""
        self.cycles += 1
        if ms is not None:  # clipped: one outlier (a first-use compile) moves a ratio by <= 0.2
            ratio = min(max(ms / (self.costs["step_ms"] if k == 1 else self._cycle_ms), 1 / 3), 3.0)
            if k == 1:  # the first timed step stands for steps until more come
                self.slow_step = ratio if self.slow_step is None else (1 - COST_WEIGHT) * self.slow_step + COST_WEIGHT * ratio
            else:
                self.slow_cycle = (1 - COST_WEIGHT) * self.slow_cycle + COST_WEIGHT * ratio
        if k == 1:
            return
        self.drafted += 1
        self.predicted = self.decay * self.predicted + self._expected
        self.accepted = self.decay * self.accepted + acc
        now = np.array([self._expected, self._cycle_ms])
        self.shape = now if self.shape is None else (1 - SHAPE_WEIGHT) * self.shape + SHAPE_WEIGHT * now
        if self.pays():
            self.interval = self.base
        elif not self._by_copy:  # a losing probe (a copy's cycle is none: the schedule stands):
            # the next one comes later, never sooner than its cost allows
            min_gap = math.ceil((self._cycle_ms * self.slow_cycle / self.step_ms() - 1) / (NOISE - 1))
            self.interval = max(min(2 * self.interval, self.max_interval), min_gap)
            self.probe_at = self.cycles + self.interval
