"""Is DFlash's output the target's own? The first divergence and how close the target was to a tie."""

from __future__ import annotations

from typing import Optional, Sequence

import mlx.core as mx


def first_divergence(a: Sequence[int], b: Sequence[int]) -> Optional[int]:
    """Index of the first position where `a` and `b` differ (or where the shorter one ends);
    None when they are identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def logit_margin(pair, prompt_ids: Sequence[int], prefix_ids: Sequence[int]) -> float:
    """The target's top-1 minus top-2 logit for the token after prompt + prefix.

    A small margin means a near-tie: a different (but equally valid) numeric path may pick the
    other token. Run it on the worker thread (`worker.call`).
    """
    target = pair.target
    logits = target.prefill(list(prompt_ids) + list(prefix_ids), target.make_cache())
    second, first = mx.sort(logits.astype(mx.float32))[-2:].tolist()
    return first - second
