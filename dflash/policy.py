"""Verify length from measured costs: the k that maximises expected tokens per second.

The drafter always fills its full block (it was trained on B positions); the target verifies
only [staged, d_1..d_{k-1}]. Whether draft i is accepted does not depend on k, so one acceptance
profile measured at B serves every k:  E[tokens | k] = 1 + sum_{i=1}^{k-1} P(first i accepted).
"""

from __future__ import annotations

from typing import Optional, Sequence

NOISE = 1.05  # DFlash must beat target-only by this factor, or target-only runs


def expected_tokens(per_position: Sequence[float], k: int) -> float:
    """Committed tokens per cycle when k tokens are verified; per_position[i-1] = P(first i accepted)."""
    return 1.0 + sum(per_position[: k - 1])


def choose_verify_length(per_position: Sequence[float], verify_ms: dict[int, float],
                         draft_ms: float, step_ms: float, overhead_ms: float = 0.0,
                         noise: float = NOISE) -> Optional[int]:
    """The verify length k (2..B) with the highest tokens/s, or None when target-only is faster.

    Args:
        per_position: observed per-position acceptance (Summary.per_position_acceptance).
        verify_ms: measured t(k) of a k-token target forward, for the k to consider.
        draft_ms: one drafter pass over the full block (incl. its lm_head).
        step_ms: t(1) of the FASTEST target-only configuration on this machine.
        overhead_ms: host time per cycle outside the model forwards (accept, rollback, emit).
    """
    def rate(k: int) -> float:
        return expected_tokens(per_position, k) / (verify_ms[k] + draft_ms + overhead_ms)

    candidates = [k for k in verify_ms if 2 <= k <= len(per_position) + 1]
    if not candidates:
        return None
    best = max(candidates, key=rate)
    return best if rate(best) >= noise / step_ms else None
