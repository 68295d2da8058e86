"""Data-parallel training over an `mx.distributed` group (`--distributed`): which sequences each
process takes, and the few decisions every process must share."""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from ..drafter import Drafter


GROUP = 16  # --group-lengths: steps whose sequences are sorted by length together


def rank_batch(train_ids: np.ndarray, step: int, S: int, seed: int, W: int = 1,
               rank: int = 0, lengths: Optional[np.ndarray] = None) -> np.ndarray:
    """The S training sequences of process `rank` (of W) at `step`: each epoch is one seeded
    permutation cut into consecutive batches, W per step, so the processes never share one.

    lengths (by sequence id; --group-lengths): the permutation is cut into windows of GROUP
    steps, each sorted by length, and the epoch runs its steps in a seeded order, so a step's
    sequences are of similar lengths (a batch pads to its longest) and each is still seen once."""
    per_epoch = max(1, len(train_ids) // (S * W))
    e, k = divmod(step, per_epoch)
    rng = np.random.default_rng([seed, e])
    order = rng.permutation(train_ids)
    if lengths is not None:
        order, win = order[: per_epoch * S * W], GROUP * S * W
        order = np.concatenate([w[np.argsort(lengths[w], kind="stable")]
                                for w in np.split(order, np.arange(win, len(order), win))])
        k = int(rng.permutation(per_epoch)[k])
    j = k * W + rank
    return order[j * S : (j + 1) * S]


def world_group(backend: str):
    """The data-parallel group of this process (None: it trains alone)."""
    if not backend:
        return None
    world = mx.distributed.init(strict=True, backend=backend)
    return world if world.size() > 1 else None


def from_rank0(world, x) -> int:
    """Rank 0's integer `x` on every process: decisions taken from timings (when to stop, how
    many steps) must be the same everywhere or the gradient all-reduce would wait forever."""
    if world is None:
        return int(x)
    return sum_over(world, int(x) if world.rank() == 0 else 0)


def check_replicas(world, drafter: Drafter) -> None:
    """Every process must hold the same weights (same averaged gradients, same updates): each
    compares its per-array sums with rank 0's (sent as a sum with zeros, which is exact)."""
    sums = mx.stack([p.astype(mx.float32).sum() for _, p in tree_flatten(drafter.parameters())])
    rank0 = mx.distributed.all_sum(sums if world.rank() == 0 else mx.zeros_like(sums), group=world)
    if sum_over(world, int(not mx.array_equal(sums, rank0).item())):
        raise RuntimeError("data-parallel replicas diverged: their weights differ")


def sum_over(world, x: int) -> int:
    return int(mx.distributed.all_sum(mx.array(x), group=world).item())
