"""Context lookup (lookup.py) and its graft into the drafted tree: lossless, past the block."""

import random

import mlx.core as mx
import numpy as np
import pytest

from dflash import lookup, tree
from dflash.events import Cycle
from tests.test_engine import check_events, run
from tests.test_tree import TREE_FAMILIES, _candidates
from tests.tiny import VOCAB, tiny_drafter, tiny_pair


def test_propose_copies_after_the_latest_longest_match():
    idx = lookup.Index([1, 2, 3, 9, 7, 2, 3, 4, 5, 8, 1, 2, 3])
    copy, logp = idx.propose(4)
    assert copy == [9, 7, 2, 3]  # after "1 2 3" (k=3), not after the later "2 3" (k=2)
    want = np.cumsum(np.log([lookup.P_NEXT[k - 1] for k in (3, 4, 5, 6)]))
    assert logp == pytest.approx(want.tolist())
    idx.extend([4])
    assert idx.propose(3)[0] == [5, 8, 1]  # kept up to date as tokens are committed
    assert lookup.Index([1, 2, 3]).propose() == ([], [])  # nothing seen before
    assert lookup.Index([5]).propose() == ([], [])


def test_a_copy_running_into_the_present_repeats_its_period():
    assert lookup.Index([7, 1, 2, 1, 2]).propose(5)[0] == [1, 2, 1, 2, 1]
    assert lookup.Index([3, 3]).propose(4)[0] == [3, 3, 3, 3]


def test_index_matches_a_brute_force_search():
    rng = random.Random(0)
    for _ in range(200):
        ctx = [rng.randrange(4) for _ in range(rng.randint(1, 40))]
        copy, _ = lookup.Index(ctx).propose(6)
        want = []
        for k in range(min(lookup.MAX_MATCH, len(ctx) - 1), 0, -1):
            starts = [s + k for s in range(len(ctx) - k) if ctx[s : s + k] == ctx[-k:]]
            if starts:
                follow = ctx[starts[-1] :]
                want = [follow[j % len(follow)] for j in range(6)]
                break
        assert copy == want, ctx


@pytest.mark.parametrize("seed", range(10))
def test_graft_shares_nodes_keeps_the_best_and_every_prefix_is_a_tree(seed):
    rng = np.random.default_rng(seed)
    ids, logp = _candidates(rng, D=5, W=4)
    base = tree.build(3, ids, logp, 12)
    spine = [base.tokens[i] for i in base.spine()[1:]]
    chain = spine[:2] + [int(rng.integers(100, 200)) for _ in range(6)]  # shares 2 nodes, then new
    chain_lp = np.cumsum(np.log(np.full(8, 0.9))).tolist()
    g = tree.graft(base, chain, chain_lp, 12)
    assert len(g) == 13 and g.tokens[0] == 3
    for i in range(1, len(g)):
        assert g.parents[i] < i and g.depths[i] == g.depths[g.parents[i]] + 1
        assert g.logp[i] <= g.logp[g.parents[i]]
    paths = {tuple(_tokens_to(g, i)) for i in range(1, len(g))}
    for n in range(1, 9):  # the copy's first nodes, the best-scored, are all in
        if chain_lp[n - 1] >= sorted(g.logp[1:])[0]:
            assert tuple(chain[:n]) in paths
    assert len({(g.parents[i], g.tokens[i]) for i in range(1, len(g))}) == len(g) - 1  # no twins
    assert tree.graft(base, [], [], 12) is base


def _tokens_to(t, i):
    out = []
    while i > 0:
        out.append(t.tokens[i])
        i = t.parents[i]
    return out[::-1]


class Blind:
    """A drafter that knows nothing (all its candidates tie): it cannot fill a path deeper than
    its block, a copy can."""

    def __init__(self, block_size):
        self.block_size, self.mask_token_id, self.target_layer_ids = block_size, VOCAB - 1, [0]
        self.token_ids = None

    def make_cache(self):
        return {}

    def extend_context(self, features, cache):
        pass

    def draft_logits(self, target, staged, k, cache):
        return mx.zeros((k - 1, VOCAB))


@pytest.mark.parametrize("family", TREE_FAMILIES)
def test_copies_are_verified_losslessly_past_the_drafters_block(family):
    """A prompt that repeats: copies are accepted, paths run deeper than the block (4), the
    output equals target-only, and without the lookup fewer drafts are accepted."""
    pair = tiny_pair(family, seed=5)
    pair.target.tap_ids = [0]
    rng = random.Random(1)
    deep = accepted = without = 0
    for case in range(6):
        unit = [rng.randrange(4, VOCAB - 3) for _ in range(rng.randint(2, 6))]
        pair.drafter = None
        plain_prompt = unit * 8
        _, plain = run(pair, plain_prompt, mode="target", max_tokens=48)
        pair.drafter = Blind(4)
        events, fast = run(pair, plain_prompt, max_tokens=48, tree=rng.choice([4, 8, 16]))
        assert fast.token_ids == plain.token_ids, case
        check_events(events, fast)
        cycles = [e for e in events if isinstance(e, Cycle)]
        accepted += sum(c.accepted for c in cycles)
        deep += any(c.accepted >= 4 for c in cycles)
        _, off = run(pair, plain_prompt, max_tokens=48, tree=8, lookup=False)
        assert off.token_ids == plain.token_ids
        without += sum(off.acceptance_lengths)
    assert deep > 0 and accepted > 2 * without, (deep, accepted, without)
