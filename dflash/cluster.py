"""Serving a sharded target (`serve` / the playground with --distributed): rank 0 talks to users,
the other ranks follow it.

Rank 0 serves HTTP as without --distributed; on its MLX worker thread its `Leader` sends each
request (a 3-int header, then the prompt ids and the settings as JSON bytes) to the other ranks
before running it. Every other rank runs `follow`: it waits for rank 0's next request and runs
it, the same engine loop on the same ids, until rank 0 sends STOP. The engine's cancel flag is
rank 0's, read by every rank once per cycle (`SharedCancel`), so all ranks stop after the same
cycle. Nothing but MLX's collectives connects the ranks: requests and cancellation each move as
a broadcast, an all_sum to which only rank 0 gives non-zeros (distributed.broadcast).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import asdict
from typing import Callable, Iterator, Optional

import mlx.core as mx

from .config import GenerationConfig
from .distributed import RankMismatch, broadcast, describe, init, rank0_only, shard_pair
from .engine import stream
from .verdict import logit_margin

STOP, GENERATE, PREFILL = 0, 1, 2  # what rank 0 asks the others to run


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
