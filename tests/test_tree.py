"""Tree verification (dflash/tree.py): the best-first build, acceptance, the tree pass and cache
compaction against brute force, and DFlash with trees == target-only on every attention family."""

import itertools
import random

import mlx.core as mx
import numpy as np
import pytest

from dflash import tree
from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.events import Cycle
from tests.test_engine import check_events, run
from tests.tiny import VOCAB, tiny_drafter, tiny_pair

TREE_FAMILIES = ["llama", "qwen2", "qwen3", "qwen3_moe"]


def _candidates(rng, D=5, W=4):
    ids = rng.permutation(np.arange(10, 10 + D * W)).reshape(D, W)
    logp = -np.sort(rng.random((D, W)) * 4, axis=1)  # distinct, sorted best first
    return ids, logp


@pytest.mark.parametrize("seed", range(6))
def test_build_keeps_the_most_probable_paths(seed):
    """Best-first = the N highest-probability root paths of the candidate grid (brute force)."""
    rng = np.random.default_rng(seed)
    D, W = 4, 3
    ids, logp = _candidates(rng, D, W)
    paths = []  # every path of depth 1..D: (log-prob, ranks)
    for d in range(1, D + 1):
        for ranks in itertools.product(range(W), repeat=d):
            paths.append((sum(logp[i, r] for i, r in enumerate(ranks)), ranks))
    paths.sort(reverse=True)
    for n in (1, 2, 7, 20, 60):
        t = tree.build(99, ids, logp, n)
        assert len(t) == n + 1 and t.tokens[0] == 99 and t.parents[0] == -1
        got = set()
        for i in range(1, len(t)):
            toks, j = [], i
            while j > 0:
                toks.append(t.tokens[j])
                j = t.parents[j]
            got.add(tuple(reversed(toks)))
            assert t.parents[i] < i and t.depths[i] == t.depths[t.parents[i]] + 1
        want = {tuple(ids[k, r] for k, r in enumerate(ranks)) for _, ranks in paths[:n]}
        assert got == want
        assert tree.expected_accepts(t)[-1] == pytest.approx(sum(np.exp(p) for p, _ in paths[:n]))
        assert t.prefix(n // 2).tokens == tree.build(99, ids, logp, n // 2).tokens  # nested


def test_candidates_are_the_top_tokens_with_their_log_probs():
    """Top-W per position, best first, with log-softmax values; draft-vocabulary columns map
    to their token ids exactly as the same logits scattered over the whole vocabulary."""
    rng = np.random.default_rng(5)
    sub = rng.normal(size=(3, 40)).astype(np.float32) * 3
    token_ids = np.sort(rng.choice(100, 40, replace=False)).astype(np.int32)
    ids, logp = tree.candidates(mx.array(sub), width=4, token_ids=token_ids)
    full = np.full((3, 100), -np.inf, np.float32)
    full[:, token_ids] = sub
    ref = full - np.log(np.exp(sub).sum(-1, keepdims=True))
    for d in range(3):
        best = np.argsort(-full[d])[:4]
        assert list(ids[d]) == list(best)
        np.testing.assert_allclose(logp[d], ref[d, best], rtol=1e-5)
    plain_ids, plain_logp = tree.candidates(mx.array(full), width=4)
    assert (plain_ids == ids).all() and np.allclose(plain_logp, logp)
    for x in (sub, full):  # the GPU's path gives the CPU's
        host, device = tree._top_on_host(mx.array(x), 4), tree._host(*tree._top_on_device(mx.array(x), 4))
        assert (host[0] == device[0]).all() and np.allclose(host[1], device[1], rtol=1e-5)


@pytest.mark.parametrize("layout", ["random", "one block", "one a block", "ties"])
def test_top_columns_from_the_best_blocks_are_the_top_values(layout):
    """The CPU's candidates read only the blocks with the highest maxima: still each row's top-W
    values, whether they crowd into one block, spread one to a block, or tie."""
    rng = np.random.default_rng(11)
    D, n, w = 6, 16384, 8
    x = rng.normal(size=(D, n)).astype(np.float32)
    if layout == "one block":
        x[:, 128 * 7 : 128 * 8] += 10
    elif layout == "one a block":  # the best w in w different blocks, the block maxima close
        for j in range(w):
            x[:, 128 * (13 * j + 5) + j] = 9 - 0.01 * j
    elif layout == "ties":
        x = np.round(x, 1)
    cols = tree._top_columns(x, w)
    assert all(len(set(r)) == w for r in cols)
    np.testing.assert_array_equal(np.sort(np.take_along_axis(x, cols, -1), -1), np.sort(x, -1)[:, -w:])


def test_transitions_rescore_children_and_zero_transitions_change_nothing():
    rng = np.random.default_rng(1)
    ids, logp = _candidates(rng, 4, 3)
    base = tree.build(7, ids, logp, 12)
    assert tree.build(7, ids, logp, 12, np.zeros((4, 3, 3))) == base
    boost = np.zeros((4, 3, 3))
    boost[1, :, 2] = 10.0  # at depth 2, every parent now favours its last candidate
    t = tree.build(7, ids, logp, 2, boost)
    assert t.tokens[1:] == (ids[0, 0], ids[1, 2])


def test_spine_is_the_argmax_chain_and_verifies_as_a_plain_block():
    rng = np.random.default_rng(3)
    ids, logp = _candidates(rng, 5, 4)
    t = tree.build(9, ids, logp, 30)
    spine = t.spine()
    assert [t.tokens[i] for i in spine[1:]] == list(ids[:, 0])  # candidates come sorted
    chain = t.path(spine[:4])
    assert chain.is_chain and chain.tokens == (9, *ids[:3, 0]) and not t.is_chain
    assert tree.Layout.of(chain).chain and not tree.Layout.of(t).chain
    target = tiny_pair("llama").target
    ids_in = mx.array([list(chain.tokens)])
    c1, c2 = target.make_cache(), target.make_cache()
    for c in (c1, c2):
        target.forward(mx.array([[3, 4, 5]]), c)
    plain = target.forward(ids_in, c1)[0]
    as_tree = target.forward(ids_in, c2, tree=tree.Layout.of(chain))[0]
    assert mx.array_equal(plain, as_tree).item()


@pytest.mark.parametrize("seed", range(20))
def test_accept_equals_brute_force(seed):
    """The accepted path = the deepest node whose every token is the target's choice at its
    parent; the next token is the target's choice after it."""
    rng = np.random.default_rng(seed)
    ids, logp = _candidates(rng, 5, 3)
    t = tree.build(1, ids, logp, int(rng.integers(1, 40)))
    posterior = [int(rng.choice(ids.ravel())) if rng.random() < 0.7 else 0 for _ in range(len(t))]
    keep, nxt = tree.accept(t, posterior)

    def ok(i):
        while i > 0:
            if posterior[t.parents[i]] != t.tokens[i]:
                return False
            i = t.parents[i]
        return True

    deepest = max((i for i in range(len(t)) if ok(i)), key=lambda i: t.depths[i])
    assert keep[-1] == deepest and nxt == posterior[deepest]
    assert all(t.parents[b] == a for a, b in zip(keep, keep[1:]))


def _path(t, i):
    out = []
    while i >= 0:
        out.append(i)
        i = t.parents[i]
    return out[::-1]


@pytest.mark.parametrize("family,n_prompt,spine_first", [
    *((f, 300, False) for f in TREE_FAMILIES),
    ("llama", 300, True),  # the nodes in the last key chunk: the chain's attention with the tree's
    # mask on Sandybridge kernels; on Intel's padded path the spine's rows in place, others gathered
    ("qwen3", 252, True),  # the nodes spill into the next key chunk (256): ancestors by depth
    ("qwen2", 252, False),
])
def test_tree_rows_equal_their_path_decoded_alone(family, n_prompt, spine_first):
    """Each node's logits from one tree pass == feeding its root path token by token; after
    compaction the caches equal decoding the committed sequence token by token and, where the
    kernels' rows never depend on the row count (all but Intel's padded path, whose tiles
    cover verify passes, not a long prefill: cpu_rows.MAX_ROWS), the same prompt then the path
    as one block (a prompt chunk of more than cpu_attention.PREFILL_ROWS rows takes the cheap
    prefill path, which both modes share and no decode is compared with)."""
    pair = tiny_pair(family, seed=4)
    target = pair.target
    rng = np.random.default_rng(3)
    prompt = [int(x) for x in rng.integers(4, VOCAB - 1, n_prompt)]  # past a key chunk (256; 128 on Intel's padded path)
    ids, logp = _candidates(rng, 6, 4)
    ids = ids % (VOCAB - 4) + 4
    t = tree.build(prompt[-1], ids, logp, 30)
    t = t.spine_first() if spine_first else t
    cache = target.make_cache()
    target.forward(mx.array([prompt[:-1]]), cache)
    logits, feats, _ = target.forward(mx.array([t.tokens]), cache, tree=tree.Layout.of(t))
    for r in range(len(t)):
        alone_cache = target.make_cache()
        target.forward(mx.array([prompt[:-1]]), alone_cache)
        for i in _path(t, r):
            alone, alone_feats, _ = target.forward(mx.array([[t.tokens[i]]]), alone_cache)
        assert mx.array_equal(alone[0, -1], logits[0, r]).item(), f"row {r}"

    keep = max((_path(t, r) for r in range(len(t))), key=len)
    tree.compact(cache, len(t), keep)
    # what target-only decoding holds after the same tokens: the prompt, then one token a step
    stepped = target.make_cache()
    target.forward(mx.array([prompt[:-1]]), stepped)
    for i in keep:
        target.forward(mx.array([[t.tokens[i]]]), stepped)
    refs = [stepped]
    if target.row_tile == 0:  # kernels whose rows never depend on the row count: a fresh prefill too
        fresh = target.make_cache()
        target.forward(mx.array([prompt[:-1]]), fresh)
        target.forward(mx.array([[t.tokens[i] for i in keep]]), fresh)  # one block
        refs.append(fresh)
    for ref in refs:
        for c, f in zip(cache, ref):
            assert c.offset == f.offset
            for name in ("keys", "values"):
                a, b = (getattr(x, name)[..., : x.offset, :] for x in (c, f))
                assert mx.array_equal(a, b).item(), name


@pytest.mark.parametrize("family,n_prompt", [*((f, 150) for f in TREE_FAMILIES), ("qwen3", 124)])
def test_padded_rows_path_keeps_block_and_tree_rows_exact(family, n_prompt):
    """Intel's path (cpu_rows.py: q|k|v and gate|up fused, each matmul padded to the row tile
    found for it on this host), run here on this host's kernels: a block's and a tree's rows
    == their tokens decoded alone, and the same tokens as the plain path. The tree is spine
    first, as the engine's are; at 124 prompt tokens its spine's tail crosses a key chunk."""
    from dflash.target import Target

    pair = tiny_pair(family, seed=4)
    plain = pair.target
    padded = Target(plain.model, family, plain.tap_ids, row_tile=8)
    assert padded._linears is not None
    rng = np.random.default_rng(5)
    prompt = [int(x) for x in rng.integers(4, VOCAB - 1, n_prompt)]  # past its 128-key chunk
    ids, logp = _candidates(rng, 6, 4)
    t = tree.build(prompt[-1], ids % (VOCAB - 4) + 4, logp, 20).spine_first()
    assert tree.Layout.of(t).spine == len(t.spine()) > 2
    for target in (padded, plain):
        cache = target.make_cache()
        target.forward(mx.array([prompt[:-1]]), cache)
        block, _, _ = target.forward(mx.array([prompt[-1:] + list(t.tokens[1:10])]), cache)
        tree.compact(cache, 10, [])
        logits, _, _ = target.forward(mx.array([t.tokens]), cache, tree=tree.Layout.of(t))
        if target is padded:
            first = (block, logits)
        else:  # another kernel path: the same model up to rounding
            assert mx.allclose(first[0], block, atol=1e-4).item() and mx.allclose(first[1], logits, atol=1e-4).item()
            continue
        for r in range(len(t)):
            alone_cache = target.make_cache()
            target.forward(mx.array([prompt[:-1]]), alone_cache)
            for i in _path(t, r):
                alone, _, _ = target.forward(mx.array([[t.tokens[i]]]), alone_cache)
            assert mx.array_equal(alone[0, -1], logits[0, r]).item(), f"tree row {r}"
        alone_cache = target.make_cache()
        target.forward(mx.array([prompt[:-1]]), alone_cache)
        for j, x in enumerate(prompt[-1:] + list(t.tokens[1:10])):
            alone, _, _ = target.forward(mx.array([[x]]), alone_cache)
            assert mx.array_equal(alone[0, -1], block[0, j]).item(), f"block row {j}"


def test_spine_first_keeps_the_tree_and_puts_its_spine_in_front():
    rng = np.random.default_rng(5)
    ids, logp = _candidates(rng, 6, 4)
    t = tree.build(9, ids, logp, 40)
    s = t.spine_first()
    n = len(t.spine())
    assert s.spine() == list(range(n))
    assert all(s.parents[i] < i for i in range(1, len(s)))  # parents before children
    paths = lambda x: sorted(tuple(x.tokens[j] for j in _path(x, i)) for i in range(len(x)))
    assert paths(s) == paths(t) and sorted(s.logp) == sorted(t.logp)


@pytest.mark.parametrize("diverge", [None, 0, 2])
def test_compaction_keeps_any_root_path_of_a_spine_first_tree(diverge):
    """The spine kept whole is a trim; a path leaving it at depth `diverge` copies only the
    nodes after the ones already in place. Either way: a fresh prefill's caches."""
    pair = tiny_pair("qwen3", seed=4)
    target = pair.target
    rng = np.random.default_rng(7)
    prompt = [int(x) for x in rng.integers(4, VOCAB - 1, 40)]
    ids, logp = _candidates(rng, 5, 3)
    t = tree.build(prompt[-1], ids % (VOCAB - 4) + 4, logp, 25).spine_first()
    spine = t.spine()
    if diverge is None:
        keep = spine
    else:  # off the spine after spine[diverge], then down the first children
        keep = spine[: diverge + 1]
        keep.append(next(i for i in range(1, len(t)) if t.parents[i] == keep[-1] and i not in spine))
        while (child := next((i for i in range(1, len(t)) if t.parents[i] == keep[-1]), None)):
            keep.append(child)
    cache = target.make_cache()
    target.forward(mx.array([prompt[:-1]]), cache)
    target.forward(mx.array([t.tokens]), cache, tree=tree.Layout.of(t))
    tree.compact(cache, len(t), keep)
    fresh = target.make_cache()
    target.forward(mx.array([prompt[:-1] + [t.tokens[i] for i in keep]]), fresh)
    for c, f in zip(cache, fresh):
        assert c.offset == f.offset
        for name in ("keys", "values"):
            a, b = (getattr(x, name)[..., : x.offset, :] for x in (c, f))
            assert mx.array_equal(a, b).item(), name


class TreeOracle:
    """Drafts the target's own continuation, the right token sometimes ranked 2nd-4th or absent,
    so accepted paths run through siblings (see tests/test_engine.py's OracleDrafter)."""

    def __init__(self, reference, block_size, rng):
        self.reference, self.block_size, self.rng = reference, block_size, rng
        self.mask_token_id, self.target_layer_ids = VOCAB - 1, [0]
        self.token_ids = None  # columns are token ids

    def make_cache(self):
        return {"n": 0}

    def extend_context(self, features, cache):
        cache["n"] += features.shape[1]

    def draft_logits(self, target, staged, k, cache):
        rows = []
        for j in range(1, k):
            pos = cache["n"] + j
            right = self.reference[pos] if pos < len(self.reference) else 0
            scores = np.array([self.rng.random() for _ in range(VOCAB)])
            rank = self.rng.choice([0, 0, 1, 2, 3, 50])  # 50: not a candidate at all
            scores[right] = np.sort(scores)[::-1][rank] + 1e-3 if rank < 50 else -1.0
            rows.append(scores * 8)
        return mx.array(np.array(rows, np.float32))


@pytest.mark.parametrize("family", TREE_FAMILIES)
def test_trees_are_lossless(family):
    """Trees of 1..64 nodes == target-only, stop tokens and max_tokens inside accepted paths."""
    rng = random.Random(TREE_FAMILIES.index(family))
    pair = tiny_pair(family, seed=3)
    pair.target.tap_ids = [0]
    stats = {"sibling_accepted": 0, "cut_in_path": 0}
    for case in range(24):
        prompt = [rng.randrange(4, VOCAB - 1) for _ in range(rng.randint(1, 30))]
        max_tokens = rng.randint(1, 40)
        pair.tokenizer.eos_token_ids = {VOCAB}
        pair.drafter = None
        _, long = run(pair, prompt, mode="target", max_tokens=max_tokens + 16)
        if case % 3 == 0:
            pair.tokenizer.eos_token_ids = {long.token_ids[rng.randrange(len(long.token_ids))]}
        _, plain = run(pair, prompt, mode="target", max_tokens=max_tokens)
        pair.drafter = TreeOracle(prompt + list(long.token_ids), 16, rng)
        nodes = rng.choice([1, 2, 5, 8, 16, 33, 64])
        events, fast = run(pair, prompt, max_tokens=max_tokens, tree=nodes)
        assert fast.token_ids == plain.token_ids, f"case {case}"
        assert fast.finish_reason == plain.finish_reason and fast.verify == f"tree {nodes}"
        check_events(events, fast)
        for c in (e for e in events if isinstance(e, Cycle)):
            assert len(c.drafted) == len(c.parents) <= nodes and len(c.path) == c.accepted
            n = min(c.accepted, len(c.committed))  # a stop token or max_tokens may cut the path
            assert [c.drafted[i - 1] for i in c.path][:n] == [t.id for t in c.committed][:n]
            first_child = {}
            for i, p in enumerate(c.parents, 1):
                first_child.setdefault(p, i)
            stats["sibling_accepted"] += any(first_child[c.parents[b - 1]] != b for b in c.path)
            stats["cut_in_path"] += len(c.committed) < c.accepted + 1
    assert all(v > 0 for v in stats.values()), stats


def test_hybrid_target_says_it_verifies_the_chain():
    pair = tiny_pair("qwen3_5", tiny_drafter(block_size=8), seed=2)
    events, fast = run(pair, [5, 6, 7], max_tokens=12, tree=8)
    _, plain = run(pair, [5, 6, 7], mode="target", max_tokens=12)
    assert fast.token_ids == plain.token_ids and fast.verify.startswith("chain")
    assert "GatedDeltaNet" in events[0].note
    sampled = list(stream(pair, [5], GenerationConfig(max_tokens=4, tree=8, temperature=0.7)))
    assert sampled[0].note  # the chain, said once, whatever the reason


def test_auto_tree_is_the_default_and_lossless(monkeypatch):
    """Unasked, a CPU sizes each cycle's tree (the planner), a CUDA GPU verifies MAX_TREE nodes
    (or its spine as a chain, or plain steps, where they commit more: policy.Fallback)."""
    from dflash import engine
    from dflash.config import MAX_TREE, default_tree_nodes

    assert default_tree_nodes(on_cuda=False) == "auto" and default_tree_nodes(on_cuda=True) == MAX_TREE
    pair = tiny_pair("qwen3", tiny_drafter(block_size=8), seed=2)
    events, fast = run(pair, [5, 6, 7, 9], max_tokens=30)
    _, plain = run(pair, [5, 6, 7, 9], mode="target", max_tokens=30)
    assert fast.verify == f"tree {default_tree_nodes()}" and fast.token_ids == plain.token_ids
    assert events[0].note is None
    monkeypatch.setattr(engine, "default_tree_nodes", lambda: MAX_TREE)  # as on a CUDA GPU
    events, gpu = run(pair, [5, 6, 7, 9], max_tokens=30)
    assert gpu.verify == f"tree {MAX_TREE}" and gpu.token_ids == plain.token_ids
    ks = [c.block_size for c in events if isinstance(c, Cycle)]
    # the tree, its spine (8 tokens, fewer where the tree is shallower) or plain steps
    assert all(k == MAX_TREE + 1 or k <= 8 for k in ks) and ks[0] == MAX_TREE + 1
    events, asked = run(pair, [5, 6, 7, 9], max_tokens=30, tree=MAX_TREE)  # asked for: verified as asked
    assert asked.token_ids == plain.token_ids
    assert {c.block_size for c in events if isinstance(c, Cycle)} == {MAX_TREE + 1}
    _, chain = run(pair, [5, 6, 7, 9], max_tokens=30, block_size=4)  # a chain length asked for
    assert chain.verify == "chain 4" and chain.token_ids == plain.token_ids
    with pytest.raises(ValueError, match="tree"):
        run(pair, [5], tree=65)


def _with_markov_head(drafter, vocab=None, seed=0):
    import dataclasses

    from dflash.drafter import Drafter

    mx.random.seed(seed)
    d = Drafter(dataclasses.replace(drafter.args, markov_rank=4),
                head_rows=None if vocab is None else len(vocab.ids))
    d.update(drafter.parameters())
    d.vocab = vocab
    d.markov.out_proj.weight = mx.random.normal(d.markov.out_proj.weight.shape) * 3
    return d


@pytest.mark.parametrize("draft_vocab", [False, True])
def test_markov_transitions_are_the_heads_bias_on_candidates(draft_vocab):
    """tree.transitions computes only the candidates' entries of the head's full bias rows."""
    from dflash.drafter import DraftVocab

    vocab = DraftVocab(np.arange(1, VOCAB, 2)) if draft_vocab else None
    d = _with_markov_head(tiny_drafter(block_size=8), vocab)
    pair = tiny_pair("llama", d)
    ids = np.array([[1, 3, 5], [7, 9, 11], [13, 15, 17]])
    got = tree.transitions(d, pair.target, ids)

    def row(prev):
        return np.array(d.transition_bias(pair.target, mx.array([int(prev)])))[0]

    assert not got[0].any()  # depth 1 takes no bias: its block input is the staged token
    for depth in (1, 2):
        for i in range(3):
            assert np.allclose(got[depth, i], row(ids[depth - 1, i])[ids[depth]], atol=1e-5)


@pytest.mark.parametrize("on_device", [False, True])
@pytest.mark.parametrize("draft_vocab", [False, True])
def test_draft_gives_candidates_and_transitions_in_one_go(draft_vocab, on_device, monkeypatch):
    """tree.draft (the engine's: one device round trip on a GPU) equals tree.candidates then
    tree.transitions, on the host's path and on the GPU's (forced here)."""
    from dflash.drafter import DraftVocab

    vocab = DraftVocab(np.arange(1, VOCAB, 2)) if draft_vocab else None
    d = _with_markov_head(tiny_drafter(block_size=8), vocab)
    pair = tiny_pair("llama", d)
    logits = mx.random.normal((5, VOCAB // 2 if draft_vocab else VOCAB), key=mx.random.key(3)) * 2
    want_ids, want_logp = tree.candidates(logits, width=4, token_ids=d.token_ids)
    if on_device:
        monkeypatch.setattr(tree, "_top_on_host", tree._top_on_device)
    ids, logp, bias = tree.draft(d, pair.target, logits, width=4)
    assert (ids == want_ids).all() and np.allclose(logp, want_logp, rtol=1e-5)
    assert np.allclose(bias, tree.transitions(d, pair.target, ids), atol=1e-5)


@pytest.mark.parametrize("tree_nodes", [0, 6, 24])
def test_a_drafter_with_a_markov_head_stays_lossless(tree_nodes):
    pair = tiny_pair("qwen3", _with_markov_head(tiny_drafter(block_size=8)), seed=2)
    prompt = [5, 6, 7, 9, 11]
    _, plain = run(pair, prompt, mode="target", max_tokens=30)
    events, fast = run(pair, prompt, max_tokens=30, tree=tree_nodes)
    assert fast.token_ids == plain.token_ids
    check_events(events, fast)
