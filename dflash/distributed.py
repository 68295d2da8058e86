"""A target sharded over processes with MLX's distributed runtime (run under `mlx.launch`).

Every rank loads the same pair, shards the target with mlx-lm's own tensor-parallel `shard()`
and keeps a whole copy of the drafter; then all ranks run the same engine loop on the same ids
(SPMD). Each layer's output is all-summed across the ranks, so the hidden states the drafter
taps are the full ones and every rank computes the same logits. The accept decision must still
be the same everywhere: `Agreement` gathers a digest of each cycle's decision from every rank
and raises on all of them, naming the ranks, when one differs.

Serving (`serve` / the playground with --distributed): only rank 0 talks to users. Its `Leader`
sends each request (prompt ids and settings) to the other ranks before running it, and the
others run `follow`, a loop that receives and runs each request. Everything moves through MLX's
own collectives: a broadcast is an all_sum to which only rank 0 gives non-zeros.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import zlib
from dataclasses import asdict
from typing import Callable, Iterator, Optional

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import gather_last_axis

from .config import GenerationConfig
from .engine import stream
from .events import Cycle
from .target import Target
from .verdict import logit_margin

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
                         f"not divisible by {n}")


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

    def next_k(self) -> int:
        k = self.inner.next_k()
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


# ---- serving: rank 0 feeds the other ranks its requests ----

STOP, GENERATE, PREFILL = 0, 1, 2  # what rank 0 asks the others to run


def broadcast(group, x: mx.array) -> mx.array:
    """Rank 0's `x` on every rank (the others pass an array of the same shape and dtype)."""
    if group.rank() != 0:
        x = mx.zeros_like(x)
    x = mx.distributed.all_sum(x, group=group)
    mx.eval(x)
    return x


class SharedCancel:
    """The engine's cancel flag for a sharded target: rank 0's flag, read by every rank at each
    check (one all_sum of one int per cycle), so all ranks stop after the same cycle."""

    def __init__(self, group, flag: Optional[threading.Event] = None):
        self.group, self.flag = group, flag

    def is_set(self) -> bool:
        mine = int(self.flag is not None and self.flag.is_set())
        return bool(broadcast(self.group, mx.array([mine], dtype=mx.int32)).item())


def _send(group, op: int, ids: list[int] = (), cfg: Optional[GenerationConfig] = None) -> None:
    blob = list(json.dumps(asdict(cfg)).encode()) if cfg is not None else []
    broadcast(group, mx.array([op, len(ids), len(blob)], dtype=mx.int32))
    if ids or blob:
        broadcast(group, mx.array(list(ids) + blob, dtype=mx.int32))


def _receive(group) -> tuple[int, list[int], Optional[GenerationConfig]]:
    op, n, m = broadcast(group, mx.zeros((3,), dtype=mx.int32)).tolist()
    body = broadcast(group, mx.zeros((n + m,), dtype=mx.int32)).tolist() if n + m else []
    cfg = GenerationConfig(**json.loads(bytes(body[n:]))) if m else None
    return op, body[:n], cfg


class Leader:
    """Rank 0's side, used on its MLX worker thread: every request is sent to the other ranks
    before rank 0 runs it. `stream` is the engine's signature (Worker's `run`)."""

    def __init__(self, group):
        self.group = group

    def stream(self, pair, ids: list[int], cfg: GenerationConfig,
               cancel: Optional[threading.Event] = None) -> Iterator:
        _send(self.group, GENERATE, ids, cfg)
        return stream(pair, ids, cfg, cancel=SharedCancel(self.group, cancel))

    def margin(self, pair, prompt_ids: list[int], prefix_ids: list[int]) -> float:
        """verdict.logit_margin on the sharded target (its prefill runs on every rank)."""
        _send(self.group, PREFILL, list(prompt_ids) + list(prefix_ids))
        return logit_margin(pair, prompt_ids, prefix_ids)

    def stop(self) -> None:
        """The other ranks leave `follow` (rank 0 is shutting down)."""
        _send(self.group, STOP)


def follow(pair, group, log: Callable[[str], None]) -> int:
    """The other ranks' loop: run each request rank 0 sends, in step with it, until it sends
    STOP; returns the number of requests run. A request's error is raised on every rank alike
    (the same checks on the same input), so it is logged and the loop goes on."""
    rank, n = group.rank(), 0
    while True:
        op, ids, cfg = _receive(group)
        if op == STOP:
            return n
        n += 1
        try:
            if op == PREFILL:
                mx.eval(pair.target.prefill(ids, pair.target.make_cache()))
                continue
            *_, s = stream(pair, ids, cfg, cancel=SharedCancel(group))
            log(f"rank {rank}: request {n}: {s.finish_reason} after {s.cycles} cycles, {s.tokens} tokens")
        except (ValueError, RankMismatch) as e:
            log(f"rank {rank}: request {n}: {e}")


def serving_loader(load: Callable, group) -> Callable:
    """`load` for a server's Worker: the one pair every rank loaded at startup, sharded; any
    other pair is refused (the other ranks would not have it)."""
    keys: list = []

    def load_once(model, draft, **kw):
        from .worker import pair_key

        if keys and pair_key(model, draft) != keys[0]:
            raise ValueError("with --distributed only the pair the server started with runs "
                             "(every rank loaded it): restart with the other pair")
        pair = load(model, draft, **kw)
        shard_pair(pair, group)
        keys.append(pair_key(model, draft))
        return pair
    return load_once


def serving_record(group, backend: str, pair) -> dict:
    """`describe` for /metrics, on every rank at startup (the all_sums are timed together):
    a step and a verify pass of the default length, chosen by rank 0."""
    k = GenerationConfig().verify_length(pair.drafter.block_size) if pair.drafter else 1
    rows = broadcast(group, mx.array([1, k], dtype=mx.int32)).tolist()
    return describe(group, backend, pair, rows=sorted(set(rows)))



class Rank0:
    """What serve / the playground need on rank 0: `worker` feeds the other ranks each request;
    `margin` is verdict.logit_margin for that worker's pair (run it on the worker thread)."""

    def __init__(self, group, backend: str):
        from .load import load_pair
        from .worker import Worker

        self.group, self.backend, self.leader = group, backend, Leader(group)
        self.worker = Worker(serving_loader(load_pair, group), run=self.leader.stream)
        self.margin = self.leader.margin

    def record(self, pair) -> dict:
        """The sharding record for /metrics, measured with the other ranks once `pair` is loaded."""
        return self._on_worker(lambda: serving_record(self.group, self.backend, pair))

    def stop(self) -> None:
        """Shutdown: the other ranks leave `follow` and exit (after any running request ends)."""
        self._on_worker(self.leader.stop)

    def _on_worker(self, fn):
        return list(self.worker.call(lambda progress: fn()))[-1]


def serve_ranks(backend: str, model: Optional[str], draft: Optional[str]) -> Optional[Rank0]:
    """--distributed for `serve` and the playground: a Rank0 on rank 0; on the other ranks, load
    and shard the same pair, follow rank 0's requests until it stops, and return None."""
    group = init(backend)
    if group.rank() == 0:
        return Rank0(group, backend)
    from .load import load_pair

    rank0_only(group, print)
    pair = load_pair(model, draft, progress=lambda m: None)
    shard_pair(pair, group)
    serving_record(group, backend, pair)
    n = follow(pair, group, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"rank {group.rank()}: stopped by rank 0 after {n} requests", file=sys.stderr, flush=True)
    return None
