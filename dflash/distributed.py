"""A target sharded over processes with MLX's distributed runtime (run under `mlx.launch`).

Every rank loads the same pair, shards the target with mlx-lm's own tensor-parallel `shard()`
and keeps a whole copy of the drafter; then all ranks run the same engine loop on the same ids
(SPMD). Each layer's output is all-summed across the ranks, so the hidden states the drafter
taps are the full ones and every rank computes the same logits. The accept decision must still
be the same everywhere: `Agreement` gathers a digest of each cycle's decision from every rank
and raises on all of them, naming the ranks, when one differs.

Serving with rank 0 alone talking to users, the other ranks following it, is cluster.py.
"""

from __future__ import annotations

import math
import os
import sys
import time
import zlib
from typing import Callable, Optional

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import gather_last_axis

from .events import Cycle
from .target import Target

# Families whose mlx-lm model class has shard() (tensor parallel). qwen3_next has only
# pipeline(), whose stages hand activations on with send/recv inside mlx-lm's own forward:
# the target adapter walks the layers itself and does not do that.
SHARDABLE = ("llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_5", "qwen3_5_moe")
BACKENDS = ("any", "ring", "mpi", "nccl", "jaccl")


class RankMismatch(RuntimeError):
    """Ranks took different decisions: their outputs would silently diverge."""


def init(backend: str = "any") -> mx.distributed.Group:
    """The group of all processes started by `mlx.launch`; refuses a lone process."""
    if backend not in BACKENDS:
        raise ValueError(f"distributed backend {backend!r} is not one of {BACKENDS}")
    try:
        group = mx.distributed.init(strict=True, backend=backend)
    except RuntimeError as e:
        raise ValueError(f"cannot start MLX's distributed backend {backend!r} (run under "
                         f"mlx.launch): {' '.join(str(e).split())}") from None
    if group.size() < 2:
        raise ValueError("--distributed needs 2 or more processes: start them with mlx.launch")
    return group


def rank0_only(group, log: Callable[[str], None]) -> Callable[[str], None]:
    """Only rank 0 talks to the user: the others' stdout goes nowhere and their log is silent
    (errors still reach their stderr)."""
    if group.rank() == 0:
        return log
    sys.stdout = open(os.devnull, "w")
    return lambda m: None


def shard_pair(pair, group: mx.distributed.Group) -> None:
    """Shard `pair`'s target over `group` in place and make its cycles check agreement."""
    t = pair.target
    if t.model_type not in SHARDABLE:
        raise ValueError(f"a {t.model_type!r} target cannot be sharded (mlx-lm has no shard() "
                         f"for it); families that shard: {', '.join(SHARDABLE)}")
    _check_divisible(t, group.size())
    t.model.shard(group)
    if t.model_type.startswith("qwen3_5"):
        _own_the_sums(t.model, group)
        lm = t.model.language_model
        t.head = None if lm.args.tie_word_embeddings else lm.lm_head  # now the gathering head
    mx.eval(t.model.parameters())  # the slices, so that the whole weights can be freed
    t.layers_changed()
    pair.agree = Agreement(group)


def sharded_load(load: Callable, group) -> Callable:
    """`load` (load_pair's signature) whose pairs come back sharded over `group`."""
    def load_sharded(*args, **kw):
        pair = load(*args, **kw)
        shard_pair(pair, group)
        return pair
    return load_sharded


def _check_divisible(target: Target, n: int) -> None:
    """mlx-lm's shard() divides head counts and widths with //: a remainder would be lost."""
    sizes = {}
    for layer in target.layers:
        a = getattr(layer, "self_attn", None)
        if a is not None and hasattr(a, "n_heads"):  # llama, qwen2, qwen3(_moe)
            sizes.update(attention_heads=a.n_heads, kv_heads=a.n_kv_heads)
        elif a is not None:  # qwen3_5: kv heads fewer than ranks are repeated
            sizes.update(attention_heads=a.num_attention_heads)
        if getattr(layer, "is_linear", False):
            sizes.update(linear_key_heads=layer.linear_attn.num_k_heads,
                         linear_value_heads=layer.linear_attn.num_v_heads)
    if target.head is not None and target.model_type.startswith("qwen3_5"):
        sizes["vocab_size"] = target.vocab_size  # its untied head is split over the vocabulary
    bad = [f"{k} {v}" for k, v in sizes.items() if v % n]
    if bad:
        raise ValueError(f"this target does not split over {n} ranks: {', '.join(bad)} "
                         f"not divisible by {n}; {_rank_counts_that_split(sizes)}")


def _rank_counts_that_split(sizes: dict) -> str:
    """The rank counts (mlx.launch -n) that divide every size: the divisors of their gcd."""
    g = math.gcd(*sizes.values())
    counts = [d for d in range(2, g + 1) if g % d == 0]
    if not counts:
        return "no rank count divides them all: this target cannot be sharded"
    return f"rank counts that divide them all: {', '.join(map(str, counts[:8]))}" + (
        ", ..." if len(counts) > 8 else "")


class _SumAfter(nn.Module):
    """A sharded-to-all projection whose all_sum mlx-lm does in the calling module."""

    def __init__(self, proj: nn.Module, group):
        super().__init__()
        self.proj, self.group = proj, group

    def __call__(self, x):
        return mx.distributed.all_sum(self.proj(x), group=self.group)


class _GatherVocab(nn.Module):
    """A head split over the vocabulary whose gather mlx-lm does in the calling module."""

    def __init__(self, head: nn.Module, group):
        super().__init__()
        self.head, self.group = head, group

    def __call__(self, x):
        return gather_last_axis(self.head(x), self.group)


def _own_the_sums(model, group) -> None:
    """qwen3_5 sums its GatedDeltaNet output and gathers its head's vocabulary slices in
    mlx-lm's own forward; the adapter calls those layers' parts itself (tape.py, logits()), so
    the collectives move into the parts, and mlx-lm's copies are switched off."""
    lm = model.language_model
    for layer in lm.model.layers:
        if layer.is_linear:
            layer.linear_attn.out_proj = _SumAfter(layer.linear_attn.out_proj, group)
            layer.linear_attn.sharding_group = None
    if lm.sharding_group is not None:
        lm.lm_head = _GatherVocab(lm.lm_head, group)
        lm.sharding_group = None


def broadcast(group, x: mx.array) -> mx.array:
    """Rank 0's `x` on every rank (the others pass an array of the same shape and dtype)."""
    if group.rank() != 0:
        x = mx.zeros_like(x)
    x = mx.distributed.all_sum(x, group=group)
    mx.eval(x)
    return x


class Agreement:
    """`agree(cycle, finish)`, once per engine cycle on every rank: raises RankMismatch on all
    ranks when any took another decision (one all_gather of a 4-byte digest per cycle). For
    the adaptive planners: `same` (rank 0's cost measurements everywhere) and `planner`."""

    def __init__(self, group):
        self.group = group

    def __call__(self, c: Cycle, finish: Optional[str]) -> None:
        decision = (c.drafted, c.parents, c.path, c.accepted, tuple(t.id for t in c.committed), finish)
        self.check(decision, f"the accept decision of cycle {c.index}")

    def check(self, value, what: str) -> None:
        """Raises RankMismatch on every rank unless all ranks hold the same `value`."""
        digest = zlib.crc32(repr(value).encode()) & 0x7FFFFFFF
        seen = mx.distributed.all_gather(mx.array([digest], dtype=mx.int32), group=self.group).tolist()
        if len(set(seen)) > 1:
            ranks: dict[int, list[int]] = {}
            for rank, d in enumerate(seen):
                ranks.setdefault(d, []).append(rank)
            sides = " vs ".join("ranks " + ",".join(map(str, r)) for r in ranks.values())
            raise RankMismatch(f"ranks disagree on {what} ({sides}): their outputs would diverge")

    def same(self, ms: float) -> float:
        """A cost measurement as every rank uses it: rank 0's (measure_costs' `same`)."""
        return broadcast(self.group, mx.array([ms], dtype=mx.float32)).item()

    def planner(self, planner):
        return _CheckedPlanner(planner, self)


class _CheckedPlanner:
    """An adaptive planner on a sharded target. Every rank runs its own, on the same costs
    (rank 0's) and the same observations, so all choose alike; each choice is still compared
    before a pass of its shape runs (one all_gather), so a rank that chose otherwise stops
    every rank with RankMismatch instead of leaving them in mismatched collectives."""

    def __init__(self, inner, agree: Agreement):
        self.inner, self.agree = inner, agree

    @property
    def max_nodes(self) -> int:
        return self.inner.max_nodes

    def at(self, context: int) -> None:
        self.inner.at(context)

    def next_k(self, copy_logp=()) -> int:
        k = self.inner.next_k(copy_logp)
        self.agree.check(k, "the next verify length")
        return k

    def choose(self, tr):
        chosen = self.inner.choose(tr)
        self.agree.check((chosen.tokens, chosen.parents), "the tree to verify")
        return chosen

    def observe(self, k: int, acc: int, ms=None) -> None:
        self.inner.observe(k, acc, None if ms is None else self.agree.same(ms))  # rank 0's cost


def comm_ms(group, hidden_size: int, rows: int, dtype=mx.float32, reps: int = 20) -> float:
    """Median ms of one all_sum of a [1, rows, hidden_size] activation: what a sharded layer
    pays per collective (a llama-family layer has two, after attention and after the MLP)."""
    x = mx.ones((1, rows, hidden_size), dtype=dtype)
    times = []
    for _ in range(reps + 1):  # the first warms up the connection
        t = time.perf_counter()
        mx.eval(mx.distributed.all_sum(x, group=group))
        times.append((time.perf_counter() - t) * 1000)
    return sorted(times[1:])[reps // 2]


def describe(group, backend: str, pair, rows: Optional[list[int]] = None) -> dict:
    """What bench JSON / logs record about the sharding: world size, backend, comm costs."""
    t = pair.target
    rows = rows or [1]
    dtype = t.backbone.norm.weight.dtype
    per_sum = {k: comm_ms(group, t.hidden_size, k, dtype) for k in rows}
    n = 2 * t.num_layers  # after attention (or GatedDeltaNet) and after the MLP, per layer
    return dict(world_size=group.size(), backend=backend, sharding="tensor (mlx-lm shard())",
                all_sums_per_pass=n, all_sum_ms=per_sum,
                pass_comm_ms={k: n * v for k, v in per_sum.items()}, comm_measured=COMM_MEASURED)


COMM_MEASURED = ("before the run: the median of 20 all_sums of a [1, k, hidden] activation in the "
                 "target's dtype, timed alone, times all_sums_per_pass; inside a pass the collectives "
                 "also wait for the slowest rank's compute, which this does not include")
