"""Lossless: DFlash ids == target-only greedy ids, on tiny llama / qwen3 / qwen3_5 targets."""

import random

import mlx.core as mx
import pytest

from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.events import Cycle, Prefill, Summary
from tests.tiny import VOCAB, tiny_drafter, tiny_pair

FAMILIES = ["llama", "qwen3", "qwen3_5"]


class OracleDrafter:
    """Proposes the target's own continuation, with errors injected at random positions.

    The engine tells it where it is through the context it appends: after prefill and each
    commit, the number of context positions is exactly the staged token's position.
    """

    def __init__(self, reference: list[int], block_size: int, error_rate: float, rng):
        self.reference, self.block_size, self.error_rate, self.rng = reference, block_size, error_rate, rng
        self.mask_token_id, self.target_layer_ids = VOCAB - 1, [0]

    def make_cache(self):
        return {"n": 0}

    def extend_context(self, features, cache):
        cache["n"] += features.shape[1]

    def propose(self, target, staged, block_size, cache):
        ids = []
        for j in range(1, block_size):
            pos = cache["n"] + j
            tok = self.reference[pos] if pos < len(self.reference) else self.rng.randrange(VOCAB)
            if self.rng.random() < self.error_rate:
                tok = (tok + 1 + self.rng.randrange(VOCAB - 1)) % VOCAB
            ids.append(tok)
        return mx.eye(VOCAB)[mx.array(ids)] * 10.0

    draft_logits = propose  # a tree's candidates: the columns are the token ids
    token_ids = None


def run(pair, prompt, **kw):
    events = list(stream(pair, prompt, GenerationConfig(**kw)))
    return events, events[-1]


def check_events(events, summary):
    assert isinstance(events[0], Prefill) and isinstance(summary, Summary)
    cycles = [e for e in events if isinstance(e, Cycle)]
    emitted = ([events[0].first.id] if events[0].first else []) + [
        t.id for c in cycles for t in c.committed]
    assert tuple(emitted) == summary.token_ids
    for c in cycles:
        assert len(c.committed) <= c.accepted + 1
        assert [t.source for t in c.committed] == (["draft"] * c.accepted + ["target"])[: len(c.committed)]
    assert summary.cycles == len(cycles)
    if cycles:
        assert summary.tau == pytest.approx(1 + sum(c.accepted for c in cycles) / len(cycles))


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.mark.slow
def test_lossless_oracle_drafter(family):
    """>= 70 cases per family: prompts, lengths, block sizes, error rates, EOS, max_tokens."""
    rng = random.Random(FAMILIES.index(family))  # not hash(): str hashes change per process
    pair = tiny_pair(family, seed=3)
    pair.target.tap_ids = [0]  # the oracle reads no features, but counts them
    stats = {"partial": 0, "full": 0, "eos_in_block": 0, "cut_mid_block": 0}
    for case in range(72):
        prompt = [rng.randrange(4, VOCAB - 1) for _ in range(rng.randint(1, 30))]
        max_tokens = rng.randint(1, 40)
        B = rng.choice([2, 3, 4, 8, 16])
        pair.tokenizer.eos_token_ids = {VOCAB}  # unreachable: the long reference never stops
        pair.drafter = None
        _, long = run(pair, prompt, mode="target", max_tokens=max_tokens + 16)
        if case % 3 == 0:  # stop on a token the continuation really produces
            pair.tokenizer.eos_token_ids = {long.token_ids[rng.randrange(len(long.token_ids))]}
        _, plain = run(pair, prompt, mode="target", max_tokens=max_tokens)
        reference = prompt + list(long.token_ids)
        pair.drafter = OracleDrafter(reference, 16, rng.choice([0.0, 0.03, 0.1, 0.3, 1.0]), rng)
        events, fast = run(pair, prompt, mode="dflash", max_tokens=max_tokens, block_size=B)
        assert fast.token_ids == plain.token_ids, f"case {case}"
        assert fast.finish_reason == plain.finish_reason
        check_events(events, fast)
        for c in (e for e in events if isinstance(e, Cycle)):
            stats["full" if c.accepted == B - 1 else "partial"] += c.accepted > 0
            if len(c.committed) < c.accepted + 1:
                stats["eos_in_block" if fast.finish_reason == "stop" else "cut_mid_block"] += 1
    assert all(v > 0 for v in stats.values()), stats


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5"])
def test_lossless_random_drafter(family):
    """A real (random-weight) drafter: mostly rejections, still the target's exact output."""
    rng = random.Random(7)
    pair = tiny_pair(family, tiny_drafter(block_size=16), seed=5)
    for _ in range(10):
        prompt = [rng.randrange(4, VOCAB - 1) for _ in range(rng.randint(1, 60))]
        kw = dict(max_tokens=rng.randint(1, 30))
        _, plain = run(pair, prompt, mode="target", **kw)
        events, fast = run(pair, prompt, mode="dflash", block_size=rng.randint(2, 16), **kw)
        assert fast.token_ids == plain.token_ids
        check_events(events, fast)


def test_long_prompt_is_chunked_and_lossless(monkeypatch):
    import dflash.target

    monkeypatch.setattr(dflash.target, "PREFILL_CHUNK", 16)
    pair = tiny_pair("qwen3_5", tiny_drafter(), seed=2)
    prompt = [4 + i % 50 for i in range(100)]
    _, plain = run(pair, prompt, mode="target", max_tokens=20)
    _, fast = run(pair, prompt, mode="dflash", max_tokens=20)
    assert fast.token_ids == plain.token_ids


@pytest.mark.parametrize("tree", [None, 0, 8])  # the host's default, the chain, a fixed tree
def test_a_windowed_drafter_is_lossless_across_the_window_the_key_chunks_and_to_the_last_position(tree):
    """Contexts crossing the drafter's window (12), the target's 256-key chunks and ending at the
    target's last position (512) give target-only's tokens; one token more is a clear error."""
    from dflash.config import MAX_TREE

    pair = tiny_pair("llama", tiny_drafter(block_size=8, window=12), seed=3)
    assert all(l.self_attn.window == 12 for l in pair.drafter.layers)
    fed = 8 if tree == 0 else 1 + (tree or MAX_TREE)  # tokens a verify pass feeds
    for n, max_tokens in ((10, 30), (240, 40), (512 - 40 - fed, 40)):
        prompt = [4 + (7 * i) % (VOCAB - 6) for i in range(n)]
        _, plain = run(pair, prompt, mode="target", max_tokens=max_tokens)
        events, fast = run(pair, prompt, mode="dflash", max_tokens=max_tokens, tree=tree,
                           block_size=8 if tree == 0 else None)
        assert fast.token_ids == plain.token_ids and len(fast.token_ids) == max_tokens
        check_events(events, fast)
    with pytest.raises(ValueError, match="exceeds the target's context of 512"):
        run(pair, prompt + [5], mode="dflash", max_tokens=40, tree=tree, block_size=8 if tree == 0 else None)


def test_limits_and_bad_input():
    pair = tiny_pair("llama", tiny_drafter(block_size=8))
    with pytest.raises(ValueError, match="context"):
        run(pair, [5] * 400, max_tokens=200)
    with pytest.raises(ValueError, match="block_size"):
        run(pair, [5], block_size=9)
    with pytest.raises(ValueError, match="empty"):
        run(pair, [], max_tokens=4)
    with pytest.raises(ValueError, match="temperature"):
        run(pair, [5], temperature=-1.0)
    events, s = run(pair, [5, 6], max_tokens=0)
    assert s.tokens == 0 and s.finish_reason == "length" and events[0].first is None
    pair.drafter = None
    with pytest.raises(ValueError, match="needs a drafter"):
        run(pair, [5], mode="dflash")


def test_cancel_stops_between_cycles():
    import threading

    pair = tiny_pair("llama", tiny_drafter())
    cancel = threading.Event()
    events = []
    for ev in stream(pair, [5, 6, 7], GenerationConfig(max_tokens=100), cancel=cancel):
        events.append(ev)
        if isinstance(ev, Cycle) and ev.index == 2:
            cancel.set()
    assert events[-1].finish_reason == "cancelled" and events[-1].cycles == 3


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_draft_vocab_keeps_output_and_drafts_inside_it(temperature):
    """With a draft vocabulary the drafter never proposes a token outside it, and greedy output
    stays identical to target-only (sampled output stays a valid, seeded generation)."""
    import numpy as np

    from dflash.drafter import DraftVocab

    pair = tiny_pair("llama", tiny_drafter(block_size=8))
    ids = np.arange(1, VOCAB, 2, dtype=np.int32)
    pair.drafter.vocab = DraftVocab(ids)
    pair.tokenizer.eos_token_ids = {VOCAB}  # unreachable: a sampled run goes on to max_tokens
    prompt = [5, 9, 13, 2]
    kw = dict(max_tokens=40, temperature=temperature, seed=3)
    *_, ref = stream(pair, prompt, GenerationConfig(mode="target", **kw))
    events = list(stream(pair, prompt, GenerationConfig(mode="dflash", **kw)))
    drafted = {t for e in events if e.kind == "cycle"  # copies from the context may hold any id
               for i, t in enumerate(e.drafted, 1) if i not in e.copied}
    assert drafted and drafted <= set(ids.tolist())
    if temperature == 0.0:
        assert events[-1].token_ids == ref.token_ids
    else:
        assert events[-1].tokens == 40


def test_default_verify_length_is_short_on_a_cpu():
    """The chain (tree=0) with no block size asked for: 5 on a CPU (a verify pass there grows
    with every token), the drafter's block on a GPU or as the bound of an adaptive length; an
    explicit one always wins."""
    from dflash.config import CPU_BLOCK_SIZE, default_block_size

    assert default_block_size(16, on_cpu=True) == CPU_BLOCK_SIZE < 16
    assert default_block_size(3, on_cpu=True) == min(3, CPU_BLOCK_SIZE)
    assert default_block_size(16, on_cpu=False) == 16
    assert GenerationConfig().verify_length(16, on_cpu=True) == CPU_BLOCK_SIZE
    assert GenerationConfig(adaptive=True).verify_length(16, on_cpu=True) == 16
    assert GenerationConfig(block_size=12).verify_length(16, on_cpu=True) == 12
    assert default_block_size(16) == (5 if mx.default_device() == mx.cpu else 16)
    pair = tiny_pair("qwen3", tiny_drafter(block_size=8), seed=3)
    _, plain = run(pair, [5, 9, 11], mode="target", max_tokens=20)
    events, fast = run(pair, [5, 9, 11], max_tokens=20, tree=0)
    assert fast.token_ids == plain.token_ids
    assert fast.block_size == default_block_size(8)
    assert {c.block_size for c in events if isinstance(c, Cycle)} == {fast.block_size}
