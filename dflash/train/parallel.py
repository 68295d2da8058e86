"""Data-parallel training over an `mx.distributed` group (`--distributed`): which sequences each
process takes, and the few decisions every process must share."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from ..drafter import Drafter


def rank_batch(train_ids: np.ndarray, step: int, S: int, seed: int, W: int = 1,
               rank: int = 0) -> np.ndarray:
    """The S training sequences of process `rank` (of W) at `step`: each epoch is one seeded
    permutation cut into consecutive batches, W per step, so the processes never share one."""
    per_epoch = max(1, len(train_ids) // (S * W))
    e, k = divmod(step, per_epoch)
    j = k * W + rank
    return np.random.default_rng([seed, e]).permutation(train_ids)[j * S : (j + 1) * S]


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
