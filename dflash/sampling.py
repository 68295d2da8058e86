"""Sampling and the acceptance rule (docs/algorithm.md: One cycle, Sampling)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

# float32's smallest normal number: a smaller temperature would be 0 (or imprecise) in float32;
# the distribution is the same (the T -> 0 limit: the top token, or a tie's tokens evenly)
MIN_TEMPERATURE = float(np.finfo(np.float32).tiny)


def sampling_probs(logits: mx.array, temperature: float, top_p: float) -> mx.array:
    """The distribution a token is sampled from: softmax(logits / T), then nucleus top-p. The
    logits are shifted to a maximum of 0 first, so that a tiny T overflows only to -inf (a
    probability of 0), never to inf - inf = nan."""
    logits = logits.astype(mx.float32)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = mx.softmax(shifted / max(temperature, MIN_TEMPERATURE), axis=-1)
    if top_p >= 1.0:
        return p
    # keep the smallest set of most likely tokens whose mass reaches top_p (at least the top one,
    # also when top_p is below float32's precision)
    order = mx.argsort(-p, axis=-1)
    sorted_p = mx.take_along_axis(p, order, axis=-1)
    first = mx.arange(p.shape[-1]) == 0
    keep_sorted = ((mx.cumsum(sorted_p, axis=-1) - sorted_p) < top_p) | first
    keep = mx.put_along_axis(mx.zeros_like(keep_sorted), order, keep_sorted, axis=-1)
    p = mx.where(keep, p, 0.0)
    return p / p.sum(axis=-1, keepdims=True)


def accept_greedy(drafted: mx.array, target_logits: mx.array) -> tuple[mx.array, mx.array]:
    """Greedy rule: keep the longest prefix of drafts equal to the target's own argmax.

    drafted d_1..d_{B-1}; target logits rows 0..B-1 give posterior p_0..p_{B-1}.
    acc = number of leading i with d_{i+1} == p_i; the next token is p_acc.
    """
    posterior = mx.argmax(target_logits, axis=-1)
    acc = mx.cumprod(drafted == posterior[:-1]).sum()
    return acc, posterior[acc]


def accept_sampled(drafted, q, p, key) -> tuple[mx.array, mx.array]:
    """Speculative sampling: accept d_i with prob min(1, p(d_i)/q(d_i)); on the first rejection
    sample from norm(max(0, p - q)); after a full block sample the bonus from p_{B-1}.
    Every committed token is then distributed exactly as the target's sampling distribution.

    drafted [B-1] (sampled from q), q [B-1, V] draft probs, p [B, V] target probs.
    """
    k_u, k_next = mx.random.split(key)
    n = drafted.shape[0]
    pd = mx.take_along_axis(p[:-1], drafted[:, None], axis=-1)[:, 0]
    qd = mx.take_along_axis(q, drafted[:, None], axis=-1)[:, 0]
    ok = mx.random.uniform(shape=(n,), key=k_u) * qd < pd
    acc = mx.cumprod(ok).sum()
    q_pad = mx.concatenate([q, mx.zeros_like(q[:1])])  # no draft at the bonus position
    residual = mx.maximum(p[acc] - q_pad[acc], 0.0)
    residual = mx.where(residual.sum() > 0, residual, p[acc])
    nxt = mx.random.categorical(mx.log(residual), key=k_next)
    return acc, nxt


class Sampler:
    """Greedy at temperature 0, else temperature + top-p with its own seeded key stream."""

    def __init__(self, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0):
        self.temperature, self.top_p = temperature, top_p
        self.key = mx.random.key(seed)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def _key(self) -> mx.array:
        self.key, k = mx.random.split(self.key)
        return k

    def probs(self, logits: mx.array) -> mx.array:
        return sampling_probs(logits, self.temperature, self.top_p)

    def sample(self, logits: mx.array) -> mx.array:
        """One token per row of logits [..., V]."""
        if self.greedy:
            return mx.argmax(logits, axis=-1)
        return mx.random.categorical(mx.log(self.probs(logits)), key=self._key())

    def draft(self, logits: mx.array) -> tuple[mx.array, mx.array | None]:
        """Draft ids from the drafter's logits [B-1, V], with their distribution when sampling."""
        if self.greedy:
            return mx.argmax(logits, axis=-1), None
        q = self.probs(logits)
        return mx.random.categorical(mx.log(q), key=self._key()), q

    def accept(self, drafted, q, target_logits) -> tuple[mx.array, mx.array]:
        if self.greedy:
            return accept_greedy(drafted, target_logits)
        return accept_sampled(drafted, q, self.probs(target_logits), self._key())
