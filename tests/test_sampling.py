"""Sampling: committed tokens are distributed exactly as the target's sampling distribution.

DFlash samples (speculative rejection sampling, docs/algorithm.md: Sampling) are compared with the EXACT
marginal distributions of tokens 2 and 3 computed by enumerating the tiny target (vocab 64).
Chi-square goodness of fit at alpha = 1e-3 per test, two tests: false-alarm rate <= 0.2%
(the seeds are fixed, so a given build either passes or fails every time).
"""

import mlx.core as mx
import numpy as np
import pytest
from scipy.stats import chisquare

from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.sampling import accept_sampled, sampling_probs
from tests.tiny import VOCAB, tiny_drafter, tiny_pair

TEMP, TOP_P, N = 1.0, 0.95, 3000
PROMPT = [7, 21, 9, 40, 12]


def exact_marginals(target):
    """p(x1), and the marginals of x2 and x3 under the target's own sampling distribution."""
    def next_probs(seqs):
        logits, _, _ = target.forward(mx.array(seqs), target.make_cache())
        return np.array(sampling_probs(logits[:, -1], TEMP, TOP_P))

    p1 = next_probs([PROMPT])[0]
    x1s = np.flatnonzero(p1)
    p2_given = next_probs([PROMPT + [int(a)] for a in x1s])  # [|x1|, V]
    joint12 = p1[x1s, None] * p2_given
    pairs = np.argwhere(joint12 > 0)
    p3_given = next_probs([PROMPT + [int(x1s[i]), int(b)] for i, b in pairs])
    m3 = (joint12[pairs[:, 0], pairs[:, 1], None] * p3_given).sum(0)
    return joint12.sum(0), m3


def goodness_of_fit(samples, probs):
    counts = np.bincount(samples, minlength=VOCAB).astype(float)
    expected = probs.astype(np.float64) * len(samples)
    assert counts[expected == 0].sum() == 0, "sampled a token the target never samples"
    big = expected >= 5  # pool the rare tokens into one bin
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    exp = exp[keep] * obs[keep].sum() / exp[keep].sum()  # float32 probabilities sum to 1 +- 1e-7
    return chisquare(obs[keep], exp).pvalue


@pytest.fixture(scope="module")
def samples():
    pair = tiny_pair("llama", tiny_drafter(block_size=4), seed=4)
    pair.tokenizer.eos_token_ids = {VOCAB}  # never stop: every sample has 3 tokens
    x2, x3, accepted, offered = [], [], 0, 0
    for seed in range(N):
        *_, s = stream(pair, PROMPT, GenerationConfig(max_tokens=3, temperature=TEMP, top_p=TOP_P,
                                                     seed=seed, block_size=4))
        x2.append(s.token_ids[1])
        x3.append(s.token_ids[2])
        accepted += sum(s.acceptance_lengths)
        offered += 3 * s.cycles
    return pair, np.array(x2), np.array(x3), accepted / offered


@pytest.mark.slow
def test_dflash_sampling_matches_target_distribution(samples):
    pair, x2, x3, rate = samples
    assert 0.05 < rate < 0.95, f"both accept and reject paths must be exercised (rate {rate:.2f})"
    m2, m3 = exact_marginals(pair.target)
    assert goodness_of_fit(x2, m2) > 1e-3
    assert goodness_of_fit(x3, m3) > 1e-3


def test_the_check_has_power():
    """Accepting every draft (a wrong rule) is caught: token 2 then follows the drafter."""
    p = mx.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    q = mx.array([[0.1, 0.8, 0.1]])
    firsts = []
    for i in range(4000):
        key = mx.random.key(i)
        d = mx.random.categorical(mx.log(q), key=mx.random.split(key)[0])
        acc, nxt = accept_sampled(d, q, p, mx.random.split(key)[1])
        firsts.append(d.item() if acc.item() == 1 else nxt.item())
    counts = np.bincount(firsts, minlength=3)
    assert chisquare(counts, np.array([0.7, 0.2, 0.1]) * len(firsts)).pvalue > 1e-3
    assert chisquare(np.bincount(np.random.default_rng(0).choice(3, 4000, p=[0.1, 0.8, 0.1]), minlength=3),
                     np.array([0.7, 0.2, 0.1]) * 4000).pvalue < 1e-3


def test_greedy_is_temperature_zero():
    pair = tiny_pair("qwen3", tiny_drafter(), seed=2)
    outs = {tuple(list(stream(pair, PROMPT, GenerationConfig(max_tokens=12, seed=s)))[-1].token_ids)
            for s in range(3)}
    assert len(outs) == 1
