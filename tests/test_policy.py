"""Adaptive verify length: picks k from costs and acceptance, falls back to plain steps, and
never changes the output."""

import math
import random

import numpy as np

from dflash.config import GenerationConfig
from dflash.backends.cpu_rows import call_rows
from dflash.engine import stream
from dflash.policy import (TIMED_SIZES, TREE_SIZES, Planner, _monotone, choose_verify_length, measure_costs,
                           probe_context)
from tests.test_engine import OracleDrafter
from tests.tiny import VOCAB, tiny_drafter, tiny_pair

COSTS = {"step_ms": 10.0, "verify_ms": {k: 10.0 + 1.5 * k for k in range(2, 17)}, "draft_ms": 4.0}
# a probe costing 1.25 plain steps: its cost floor (5 cycles) stays under the doubling intervals
CHEAP = {"step_ms": 10.0, "verify_ms": {k: 12.0 for k in range(2, 17)}, "draft_ms": 0.5}


def test_choose_verify_length():
    sure = [0.95 ** i for i in range(1, 16)]
    assert choose_verify_length(sure, COSTS["verify_ms"], 4.0, 10.0) == 16
    assert choose_verify_length([0.0] * 15, COSTS["verify_ms"], 4.0, 10.0) is None
    short = [0.9, 0.5] + [0.0] * 13  # only the first two drafts ever land
    assert choose_verify_length(short, COSTS["verify_ms"], 4.0, 10.0) in (2, 3)


def test_draft_cost_per_block_length():
    p = [0.7 ** i for i in range(1, 16)]
    verify = {k: 12.0 for k in range(2, 17)}
    assert choose_verify_length(p, verify, 8.0, 10.0) == 16  # flat costs: the longest block
    growing = {k: k * k / 8 for k in range(2, 17)}  # a drafter whose pass grows with the block
    assert 2 < choose_verify_length(p, verify, growing, 10.0) < 16


def probes_while_nothing_lands(costs, cycles, **kw):
    p = Planner(costs, 16, **kw)
    ks = []
    for _ in range(cycles):
        k = p.next_k()
        ks.append(k)
        p.observe(k, 0)  # nothing is ever accepted
    assert set(ks) == {1, 16}
    return [i for i, k in enumerate(ks) if k == 16]


def test_planner_probes_at_doubling_intervals_while_plain_steps_win():
    assert probes_while_nothing_lands(CHEAP, 60, probe_every=4, max_interval=16, prior=0.01) == [
        0, 9, 26, 43]


def test_planner_spaces_costly_probes_by_their_cost():
    """A probe costing 3.8 plain steps (COSTS) comes every 2.8 / 0.05 = 56 cycles at most: the
    drafts that never land cost target-only at most its NOISE margin."""
    probes = probes_while_nothing_lands(COSTS, 200, probe_every=4, max_interval=16, prior=0.01)
    assert probes == [0, 57, 114, 171]
    slow = dict(COSTS, verify_ms={k: 10.0 + 6 * k for k in range(2, 17)})  # probe 11 steps
    assert probes_while_nothing_lands(slow, 300, probe_every=4, max_interval=16, prior=0.01) == [
        0, 201]


def test_planner_follows_a_change_in_acceptance():
    """Drafts that fail for a while (an answer's opening) and then land: counts fade, so the
    planner is drafting again within a few probes, not after the old failures are outvoted."""
    p = Planner(CHEAP, 16, probe_every=4, max_interval=16, prior=0.01)
    for _ in range(60):
        k = p.next_k()
        p.observe(k, 0)
    ks = []
    for _ in range(40):
        k = p.next_k()
        ks.append(k)
        p.observe(k, k - 1)
    assert 1 not in ks[1:] and ks[-10:] == [16] * 10, ks


def test_monotone_costs():
    assert _monotone({2: 69.0, 3: 59.5, 4: 68.7, 8: 74.3, 16: 60.0}) == {2: 59.5, 3: 59.5, 4: 60.0,
                                                                          8: 60.0, 16: 60.0}


def run(pair, prompt, **kw):
    events = list(stream(pair, prompt, GenerationConfig(**kw)))
    return [e for e in events if e.kind == "cycle"], events[-1]


def oracle_setup(family: str):
    """A tiny pair, a prompt, its target-only answer and the reference an OracleDrafter copies."""
    pair = tiny_pair(family, seed=3)
    pair.target.tap_ids = [0]
    pair.tokenizer.eos_token_ids = {VOCAB}
    prompt = [9, 14, 22, 31]
    _, plain = run(pair, prompt, mode="target", max_tokens=80)
    return pair, prompt, plain, prompt + list(plain.token_ids) + [0] * 16


def test_adaptive_is_lossless_and_adapts():
    rng = random.Random(0)
    pair, prompt, plain, reference = oracle_setup("qwen3")
    for error_rate, expect_k in ((0.0, 16), (1.0, 1)):
        pair.drafter = OracleDrafter(reference, 16, error_rate, rng)
        pair.costs = dict(COSTS, block_size=16)
        cycles, fast = run(pair, prompt, max_tokens=80, adaptive=True)
        assert fast.token_ids == plain.token_ids
        ks = [c.block_size for c in cycles]
        assert ks.count(expect_k) > len(ks) / 2, ks


def test_fallback_gives_way_to_plain_steps_only_while_drafting_loses():
    """The host default's fixed shape (policy.Fallback), on real cycle times alone: a verify that
    costs 6 steps and commits 4 tokens runs plain steps (probes at most ~5 % of the time, by
    cost); one that costs 2 steps for 5 tokens drafts every cycle but the steps timed; a
    drafter that starts paying again is drafted again at the next probe."""
    from dflash.policy import RETIME, WARMUP, Fallback

    slow = _fallback_run(Fallback(65), 400, 48.0, 4)
    assert slow[:WARMUP] == [65] * WARMUP and slow[WARMUP] == 1
    drafted_ms = 48.0 * slow.count(65)
    assert drafted_ms < 0.15 * (drafted_ms + 8.0 * slow.count(1)), slow  # mostly plain steps
    fast = Fallback(65)
    # the steps timed: two, then two every RETIME drafted cycles (the first after a draft untimed)
    assert _fallback_run(fast, 200, 16.0, 5).count(1) <= 3 + 2 * (200 // RETIME)
    ks = _fallback_run(fast, 200, 48.0, 4) + _fallback_run(fast, 200, 16.0, 5)  # loses, then pays again
    assert ks[200:300].count(1) > 80 and ks[-50:].count(65) >= 46  # but two steps timed per RETIME


def test_fallback_is_not_fooled_by_one_stalled_step_or_a_grown_context():
    """A first timed step that stalls (a GPU re-capturing its graph: 40 ms against 5.5) must not
    keep a verify that loses (48 ms for 4 tokens) drafting; steps that grow costlier as the
    context grows are re-timed, so a verify that then pays is drafted again."""
    from dflash.policy import Fallback

    step_times = iter([40.0] + [5.5] * 1000)
    ks = _fallback_run(Fallback(65), 200, 48.0, 4, lambda: next(step_times))
    assert ks[-100:].count(1) > 85, ks
    grown = Fallback(65)
    _fallback_run(grown, 100, 30.0, 5, lambda: 8.0)  # 6 ms a token drafted vs 8 a step: pays
    ks = _fallback_run(grown, 300, 30.0, 5, lambda: 20.0)  # steps now cost 20: drafting pays more
    assert ks[-100:].count(65) > 90, ks
    ks = _fallback_run(grown, 300, 30.0, 5, lambda: 4.0)  # steps cheap again: plain steps
    assert ks[-100:].count(1) > 80, ks


def test_fallback_is_not_fooled_by_a_first_cycle_that_compiles():
    """A shape's first cycle may pay a one-off compile (CUDA's tree kernels at a long context:
    ~5.9 s, seen on an H100) or a graph captured again later; neither may make a tree that pays
    (16 ms for 5 tokens against 8 ms steps) look like one that never will."""
    from dflash.policy import Fallback

    tree_times = iter([5900.0] + [16.0] * 60 + [400.0] + [16.0] * 1000)
    ks = _fallback_run(Fallback(65), 200, lambda: next(tree_times), 5)
    assert ks.count(1) <= 3 + 2 * (200 // 32), ks  # only the steps timed
    fb, ks = Fallback(65, chain=16), []
    times = {65: iter([5900.0] + [16.0] * 1000), 16: iter([3000.0] + [14.0] * 1000)}
    for _ in range(200):
        k = fb.next_k()
        fb.observe(k, (4 if k == 65 else 2) if k > 1 else 0, next(times[k]) if k > 1 else 8.0)
        ks.append(k)
    assert ks[-100:].count(65) > 85, ks


def test_fallback_does_not_time_a_step_by_the_one_after_drafted_cycles():
    """On an H100 with CUDA graphs the first plain step after tree passes cost 14-47 ms, the next
    ones 7 (a run of steps): a tree at 50 ms for 4 tokens loses to 7 ms steps, and must not win
    because the switch made a step look slow."""
    from dflash.policy import Fallback

    fb, ks, last = Fallback(65, chain=16), [], 65
    for _ in range(300):
        k = fb.next_k()
        ms = {65: 50.0, 16: 30.0}.get(k, 47.0 if last > 1 else 7.0)
        fb.observe(k, {65: 3, 16: 1}.get(k, 0), ms)
        ks.append(k)
        last = k
    assert ks[-150:].count(1) > 135, ks


def test_fallback_runs_the_tree_its_spine_or_plain_steps_by_what_commits_most():
    """With a tree default, Fallback also weighs the chain along the tree's spine: a tree pass
    that stalls (48 ms for 4 tokens) gives way to the chain (14 ms for 2.5) where that beats
    steps (8 ms), to steps where neither does, and stays where it pays (16 ms for 5)."""
    from dflash.policy import Fallback

    def run(tree, chain, step=8.0, n=300):
        fb, ks = Fallback(65, chain=16), []
        for _ in range(n):
            k = fb.next_k()
            ms, tokens = {65: tree, 16: chain}.get(k, (step, 1))
            fb.observe(k, tokens - 1, ms)
            ks.append(k)
        return ks[-150:]

    assert run((48.0, 4), (14.0, 2.5)).count(16) > 120  # the chain
    assert run((16.0, 5), (14.0, 2.5)).count(65) > 135  # the tree
    assert run((48.0, 4), (20.0, 2)).count(1) > 120  # plain steps


def test_fallback_with_a_prior_times_no_steps_while_drafting_clearly_pays():
    """With the plain steps a GPU's warm generations took as a prior (engine.warm), a short
    answer is not spent timing steps while the tree commits well over a prior step's rate
    (H100: 3 steps of 7-25 cycles on the bench prompts); near or below it, steps are timed and
    decide as without a prior, and a tree that stops paying gives way to them."""
    from dflash.policy import WARMUP, Fallback, step_prior

    prior = ((200, 8.0), (1500, 9.0))
    assert (step_prior(prior, 0), step_prior(prior, 200), step_prior(prior, 2800)) == (8.0, 8.0, 10.0)
    fb = Fallback(65, prior=prior)
    fb.at(300)
    assert _fallback_run(fb, 200, 16.0, 5).count(1) == 0  # 0.31 tokens/ms against a step's 0.125
    assert _fallback_run(Fallback(65), 200, 16.0, 5).count(1) >= 3  # without a prior: timed
    slow = _fallback_run(Fallback(65, prior=prior), 200, 48.0, 4)  # 0.083 tokens/ms: steps win
    assert slow[WARMUP] == 1 and slow[-100:].count(1) > 85, slow
    fb = Fallback(65, prior=prior)
    ks = _fallback_run(fb, 100, 16.0, 5) + _fallback_run(fb, 200, 48.0, 4)  # pays, then does not
    assert ks[:100].count(1) == 0 and ks[-100:].count(1) > 80, ks


def test_a_chain_shaped_cycle_is_the_tree_s_spine():
    from dflash.policy import Fallback
    from dflash.tree import Tree

    tr = Tree((9, 1, 2, 3, 4), (-1, 0, 1, 0, 2), (0, 1, 2, 1, 3), (0.0, -0.1, -0.3, -1.0, -0.5))
    fb = Fallback(65, chain=3)
    fb._shape = fb.shapes[1]
    chain = fb.choose(tr)
    assert chain.tokens == (9, 1, 2) and chain.is_chain
    fb._shape = fb.shapes[0]
    assert fb.choose(tr) is tr


def _fallback_run(fb, n, cycle_ms, tokens, step_ms=lambda: 8.0):
    ks = []
    for _ in range(n):
        k = fb.next_k()
        ms = (cycle_ms() if callable(cycle_ms) else cycle_ms) if k > 1 else step_ms()
        fb.observe(k, tokens - 1 if k > 1 else 0, ms)
        ks.append(k)
    return ks


def test_the_default_chain_falls_back_to_plain_steps_losslessly():
    """A hybrid target's default (the chain; trees need attention-only targets) on real cycle
    times: a drafter that is always wrong gives way to plain steps, a right one drafts; the
    output is target-only's either way. An asked-for block size is verified as asked."""
    rng = random.Random(0)
    pair, prompt, plain, reference = oracle_setup("qwen3_5")
    B = GenerationConfig().verify_length(16)
    for error_rate, expect_k in ((0.0, B), (1.0, 1)):
        pair.drafter = OracleDrafter(reference, 16, error_rate, rng)
        cycles, fast = run(pair, prompt, max_tokens=80)
        assert fast.token_ids == plain.token_ids
        ks = [c.block_size for c in cycles]
        assert ks.count(expect_k) > len(ks) / 2, ks
    cycles, fast = run(pair, prompt, max_tokens=80, block_size=B)
    assert fast.token_ids == plain.token_ids and {c.block_size for c in cycles} == {B}


def test_costs_are_measured_on_the_pair():
    pair = tiny_pair("qwen3_5", tiny_drafter(block_size=4))
    costs = measure_costs(pair, 4, context=16, reps=1)
    assert set(costs["verify_ms"]) == set(costs["draft_ms"]) == {2, 3, 4} and costs["step_ms"] > 0
    assert all(t > 0 for t in costs["draft_ms"].values())
    _, s = run(pair, [5, 6, 7], max_tokens=10, adaptive=True)  # measures, then runs
    assert pair.costs["block_size"] == 4 and s.tokens == 10


def test_costs_are_timed_once_per_host_and_models(monkeypatch, tmp_path):
    """A second start on this host reads the first one's costs back (int keys and all); other
    shapes, other models or an old table are timed again."""
    from dflash import engine, policy

    timed = []

    def fake(pair, B, tree_nodes=None, **kw):
        timed.append((B, tree_nodes))
        return {"step_ms": 10.0, "verify_ms": {3: 11.0, 7: 12.0}, "chain_ms": {3: 11.0}, "draft_ms": 2.0,
                "far": {"context": 2200, "step_ms": 12.0, "verify_ms": {7: 20.0}}, "context": 152}

    monkeypatch.setattr(engine, "measure_costs", fake)
    monkeypatch.setattr(engine, "_costs_dir", lambda: tmp_path)
    pair = tiny_pair("llama", tiny_drafter(block_size=4))
    first = dict(engine._costs(pair, 4, 7))
    pair.costs = None  # a new process: nothing in memory
    assert engine._costs(pair, 4, 7) == first and timed == [(4, 7)]
    assert first["verify_ms"][7] == 12.0 and first["far"]["verify_ms"][7] == 20.0
    pair.costs = None
    engine._costs(pair, 4, 3)
    assert timed == [(4, 7), (4, 3)]
    pair.costs, pair.draft_id = None, "another drafter"
    engine._costs(pair, 4, 7)
    assert len(timed) == 3
    monkeypatch.setattr(policy, "STORED_FOR_S", -1)  # every stored table is too old
    pair.costs = None
    engine._costs(pair, 4, 7)
    assert len(timed) == 4
    monkeypatch.setattr(policy, "STORED_FOR_S", 3600)
    pair.costs = None
    engine._costs(pair, 4, 7)
    assert len(timed) == 4  # stored again by the last call
    import inspect

    from dflash.backends import host_ops

    source = inspect.getsource
    monkeypatch.setattr(inspect, "getsource", lambda m: source(m) + ("#" if m is host_ops else ""))
    pair.costs = None
    engine._costs(pair, 4, 7)  # the passes' code changed since: timed again
    assert len(timed) == 5
    monkeypatch.setattr(inspect, "getsource", source)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")  # a BLAS pinned to other threads
    pair.costs = None
    engine._costs(pair, 4, 7)
    assert len(timed) == 6


TREE_COSTS = {"step_ms": 10.0, "verify_ms": {2: 11.0, 4: 11.5, 8: 12.5, 16: 15.0, 32: 22.0, 64: 60.0},
              "draft_ms": 3.0}


def _tree(p, spine=0, n=64):
    """A drafted tree of n nodes whose node i+1 is accepted with probability p[i]; its first
    `spine` nodes are a chain from the root, the rest hang off the root."""
    from dflash.tree import Tree

    probs = [p[i] if i < len(p) else 1e-3 for i in range(n)]
    parents = [-1] + [i if i < spine else 0 for i in range(n)]
    depths = [0] + [i + 1 if i < spine else 1 for i in range(n)]
    return Tree(tuple(range(n + 1)), tuple(parents), tuple(depths), (0.0, *map(math.log, probs)))


def test_tree_planner_sizes_trees_by_confidence_and_cost():
    from dflash.policy import TreePlanner

    tp = TreePlanner(TREE_COSTS)
    sure = _tree([0.9 ** (i // 4) for i in range(64)])  # many likely nodes: a big tree pays
    assert len(tp.choose(sure)) == 33  # 64 nodes would cost far more per pass than they add
    unsure = _tree([0.6, 0.1] + [0.01] * 62)  # one likely node
    assert len(tp.choose(unsure)) == 3


def test_tree_planner_takes_the_chain_where_its_pass_is_cheaper():
    from dflash.policy import TreePlanner

    costs = dict(TREE_COSTS, chain_ms={2: 10.5, 4: 10.8, 8: 11.0, 15: 11.5})
    tp = TreePlanner(costs)
    spine = _tree([0.95 ** i for i in range(1, 16)] + [0.02] * 49, spine=15)  # the spine is it
    got = tp.choose(spine)
    assert got.is_chain and len(got) == 16 and got.tokens == tuple(range(16))
    bushy = _tree([0.9] * 64, spine=2)  # the mass is off the spine: a tree pays
    assert not tp.choose(bushy).is_chain


def test_tree_planner_calibrates_and_falls_back_to_plain_steps():
    from dflash.policy import TreePlanner

    tp = TreePlanner(TREE_COSTS)
    optimistic = _tree([0.95] * 64)  # the drafter claims a lot; the target accepts nothing
    ks = []
    for _ in range(200):
        k = tp.next_k()
        if k > 1:
            k = len(tp.choose(optimistic))
        tp.observe(k, 0)
        ks.append(k)
    assert tp.accepted / tp.predicted < 0.05  # calibrated down to what the target accepted
    assert ks[-100:].count(1) >= 90  # mostly plain steps now, with probes between them
    probes = [i for i, k in enumerate(ks) if k > 1]
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    # probes keep coming, spaced by the tree they verified (a 64-node pass would force 140+)
    assert len(probes) >= 4 and max(gaps[-3:]) <= 65  # the longest interval, + the probe


def test_tree_planner_keeps_drafting_after_one_miss_and_resumes_when_a_probe_lands():
    """An answer's opening miss must not switch drafting off; after a losing stretch, the first
    probes that land switch it back on at once (not after a slow moving mean catches up)."""
    from dflash.policy import TreePlanner

    tp = TreePlanner(TREE_COSTS)
    fair = _tree([0.7, 0.5, 0.35, 0.25])  # ~1.8 expected accepts: a tree pays at these costs
    tp.observe(len(tp.choose(fair)), 0)  # the opening cycle accepts nothing
    assert tp.next_k() > 1

    for _ in range(120):  # a stretch where nothing lands: mostly plain steps
        k = tp.next_k()
        tp.observe(len(tp.choose(fair)) if k > 1 else 1, 0)
    assert not tp.pays()
    landed = 0
    while landed < 2:  # now every drafted cycle lands all it verifies
        k = tp.next_k()
        if k > 1:
            k = len(tp.choose(fair))
            landed += 1
        tp.observe(k, k - 1)
    assert tp.pays() and tp.next_k() > 1


def test_tree_planner_drafts_where_a_copy_pays_without_moving_its_probes():
    """Between probes, plain steps run; a cycle still drafts when the context offers a copy
    whose own expected accepts pay for it, and a copy that lands nothing leaves the probes'
    schedule as it was."""
    from dflash.lookup import P_NEXT
    from dflash.policy import TreePlanner

    tp = TreePlanner(TREE_COSTS)
    optimistic = _tree([0.95] * 64)
    for _ in range(60):  # the target accepts nothing: plain steps, probes at growing intervals
        k = tp.next_k()
        tp.observe(len(tp.choose(optimistic)) if k > 1 else 1, 0)
    while tp.cycles + 1 >= tp.probe_at:  # not just before a probe
        tp.observe(1, 0)
    assert tp.next_k() == 1
    long_match = np.cumsum(np.log([P_NEXT[-1]] * 32))  # an 8-token match: ~14 expected accepts
    weak = np.cumsum(np.log([P_NEXT[0]] * 32))  # a 1-token match: ~0.25
    assert tp.next_k(weak) == 1
    probe_at, interval = tp.probe_at, tp.interval
    assert tp.next_k(long_match) > 1
    tp.observe(len(tp.choose(optimistic)), 0)  # the copy missed
    assert (tp.probe_at, tp.interval) == (probe_at, interval) and tp.next_k() == 1


def test_tree_planner_weighs_what_cycles_really_cost():
    """Measured on bare passes, a 32-node tree (2 accepts a cycle) loses to a plain step; in the
    loop plain steps cost 2.2x their measure and trees 1.6x, so trees win: the planner learns it."""
    from dflash.policy import TreePlanner

    costs = {"step_ms": 5.0, "verify_ms": {32: 12.0}, "draft_ms": 3.0}
    tr = _tree([0.5] * 4, n=32)

    def run(real_costs: bool) -> list[int]:
        tp, ks = TreePlanner(costs), []
        for _ in range(300):
            k = tp.next_k()
            k = len(tp.choose(tr)) if k > 1 else 1
            tp.observe(k, 2 if k > 1 else 0, (24.0 if k > 1 else 11.0) if real_costs else None)
            ks.append(k)
        return ks

    assert run(real_costs=False)[-100:].count(1) >= 90  # by the bare measures: plain steps
    assert run(real_costs=True)[-100:].count(33) >= 95  # by what the loop pays: trees


def test_tree_planner_times_a_step_when_only_its_trees_slowed():
    """By the bare measures trees pay (4 accepts for 15 ms against 5-ms steps); in the loop a
    tree cycle costs 3x that and a step what it measured. The planner does not assume steps
    slowed as much: it times one, then runs plain steps, probing now and then (and keeps
    drafting where steps slowed as much)."""
    from dflash.policy import TreePlanner

    costs = {"step_ms": 5.0, "verify_ms": {32: 12.0}, "draft_ms": 3.0}
    tr = _tree([0.8] * 6, n=32)
    for slow_steps, want_steps in ((False, True), (True, False)):
        tp, ks = TreePlanner(costs), []
        for _ in range(200):
            k = tp.next_k()
            k = len(tp.choose(tr)) if k > 1 else 1
            tp.observe(k, 4 if k > 1 else 0, 45.0 if k > 1 else (15.0 if slow_steps else 5.0))
            ks.append(k)
        assert ks[:6] == [33] * 4 + [1, 33]  # after the warm-up, one step timed
        assert (ks[-100:].count(1) >= 80) == want_steps  # a whole slow host keeps drafting


def test_tree_costs_are_measured_on_the_pair():
    pair = tiny_pair("qwen3", tiny_drafter(block_size=8))
    costs = measure_costs(pair, 8, context=16, reps=1, tree_nodes=12)
    assert set(costs["verify_ms"]) == {3, 7, 12}  # the planner's sizes up to the tree asked
    assert costs["step_ms"] > 0 and costs["draft_ms"] > 0
    assert list(costs["verify_ms"].values()) == sorted(costs["verify_ms"].values())  # monotone
    assert set(costs["chain_ms"]) == {3, 7}  # chains up to the block's 7 drafts


def test_planner_trees_fill_whole_row_tiles():
    # a pass feeds the staged token and the nodes; where rows pad to 8 (an Intel CPU), a size
    # that spills into a new tile would pay for a tile of rows it does not use
    assert all(call_rows(n + 1, 1) == n + 1 for n in TREE_SIZES) and set(TIMED_SIZES) <= set(TREE_SIZES)


def test_costs_are_timed_with_the_last_key_chunk_half_full():
    # a tree row gathers its last key chunk: timed at a full one, trees look cheaper than the
    # run pays (Intel's 128-key chunks at a 128-token cache)
    for chunk in (64, 128, 256):
        assert probe_context(chunk) % chunk == chunk // 2 and 96 <= probe_context(chunk) <= 192
    from dflash.target import Target
    pair = tiny_pair("llama", tiny_drafter(block_size=4))
    t = pair.target
    plain, padded = (Target(t.model, "llama", t.tap_ids, row_tile=tile) for tile in (0, 8))
    assert (plain.key_chunk, padded.key_chunk) == (256, 128)  # Intel's padded path: shorter chunks
    pair.target = padded
    seen = []
    forward = padded.forward
    padded.forward = lambda ids, cache, **kw: (seen.append(cache[0].offset + ids.shape[1]), forward(ids, cache, **kw))[1]
    costs = measure_costs(pair, 4, reps=1, tree_nodes=3)
    far = costs["far"]["context"]  # the same passes again further on, on stand-in keys
    near = [n for n in seen if n < far]
    assert seen[0] == probe_context(128) and max(near) <= probe_context(128) + 4  # the cache then the passes
    assert far > probe_context(128) + 128 and max(seen) <= far + 4


def test_costs_follow_the_context():
    """Timed near and far: read off at any context, a pass grows by its own rate per token
    (sizes timed near only grow like their neighbours), never less than near."""
    from dflash.policy import costs_at

    costs = dict(TREE_COSTS, chain_ms={2: 10.5, 8: 11.0, 15: 11.5}, context=128,
                 far={"context": 2176, "step_ms": 12.0, "verify_ms": {2: 15.0, 16: 31.0, 64: 108.0},
                      "chain_ms": {15: 15.5}, "draft_ms": 2.0})
    assert costs_at(costs, 128)["verify_ms"] == TREE_COSTS["verify_ms"]
    at = costs_at(costs, 4224)  # twice as far: twice the growth
    assert at["step_ms"] == 14.0 and at["verify_ms"][16] == 47.0 and at["verify_ms"][64] == 156.0
    assert at["verify_ms"][32] == 22.0 + 2 * (16 + 32 * 16 / 48) and at["chain_ms"][15] == 19.5
    assert at["chain_ms"][8] == 11.0 + 2 * (2 + 2 * 8 / 15)  # between a step's growth and the chain's
    assert at["draft_ms"] == 3.0 and costs_at(costs, 64) == costs_at(costs, 128) | {"context": 64}
    assert costs_at(TREE_COSTS, 5000) is TREE_COSTS  # nothing timed far: the same everywhere


def test_the_tree_planner_falls_back_to_plain_steps_where_the_context_makes_trees_too_costly():
    """Drafts that pay on a short context (2.4 tokens a cycle at 1.5 steps) do not at 6k tokens,
    where every tree costs over 2.5 steps: the default then decodes by plain steps, with probes."""
    from dflash.policy import TreePlanner

    costs = dict(TREE_COSTS, context=128, far={"context": 2176, "step_ms": 11.0, "draft_ms": 3.0,
                                               "verify_ms": {2: 25.0, 16: 30.0, 64: 80.0}})
    tree = _tree([0.7, 0.5] + [0.01] * 62)  # ~1.2 drafts accepted a cycle, as predicted
    for context, plain in ((200, False), (6000, True)):
        tp, ks = TreePlanner(costs), []
        for _ in range(100):
            tp.at(context)
            k = tp.next_k()
            if k > 1:
                k = len(tp.choose(tree))
            tp.observe(k, 1 if k > 1 else 0)
            ks.append(k)
        assert (ks[-50:].count(1) >= 40) == plain, (context, ks)


def test_far_costs_are_measured_on_the_pair():
    pair = tiny_pair("qwen3", tiny_drafter(block_size=8))
    costs = measure_costs(pair, 8, context=16, reps=1, tree_nodes=12, far=300)
    far = costs["far"]
    assert far["context"] == 316 and set(far["verify_ms"]) == {3, 12} and set(far["chain_ms"]) == {7}
    assert far["step_ms"] > 0 and far["draft_ms"] > 0
    assert measure_costs(pair, 8, context=16, reps=1, far=300)["far"]["context"] == 316  # the chain planner's
    assert "far" not in measure_costs(pair, 8, context=400, reps=1, far=300)  # no room in a 512 context


def test_cost_rounds_merge_shape_by_shape():
    """measure_costs keeps each shape's fastest over its NEAR_ROUNDS probes, and only the tree
    sizes every round timed (a round may stop early where larger trees cannot pay)."""
    from dflash.policy import _fastest_of

    a = {"step_ms": 5.0, "verify_ms": {3: 7.0, 15: 9.0, 31: 14.0}, "draft_ms": 2.0}
    b = {"step_ms": 4.0, "verify_ms": {3: 8.0, 15: 8.5}, "draft_ms": 2.5}
    assert _fastest_of([a, b]) == {"step_ms": 4.0, "verify_ms": {3: 7.0, 15: 8.5}, "draft_ms": 2.0}
