"""One long-lived thread that owns every MLX call (model loading and generation).

MLX streams belong to the thread that made them, and two generations on one device would spoil
each other's timing, so the UI and the server hand work to this thread and read events back.
Requests run one at a time, in arrival order.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from .config import GenerationConfig
from .engine import stream, warm
from .load import Pair, encode_prompt, load_pair
from .registry import BUILTIN_TARGET, find_drafter


@dataclass(frozen=True)
class Status:
    """A progress line while a pair is being prepared (not an engine event)."""

    message: str
    kind: str = "status"


_DONE = object()
MAX_PAIRS = 2  # the served pair and one the playground picked


def pair_key(model: Optional[str], draft: Optional[str]) -> tuple[str, Optional[str]]:
    """One key per pair, however it is spelled: the defaults filled in (the builtin target, the
    registry's drafter) and local paths made absolute, so "./m", "m/" and "/abs/m" share a load."""
    model = _spelling(model) or BUILTIN_TARGET
    return model, _spelling(draft) or _spelling(find_drafter(model))


def _spelling(name: Optional[str]) -> Optional[str]:
    if not name:
        return None
    path = Path(name).expanduser()
    if name.startswith((".", "/", "~")) or path.exists():  # load.resolve's rule: else a Hub id
        return str(path.resolve())
    return name


class Job:
    """Events of one request, read from any thread. Iterating re-raises the worker's error."""

    def __init__(self):
        self.events: queue.Queue = queue.Queue()
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def __iter__(self) -> Iterator:
        while (item := self.events.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item


class Worker:
    """`loader`: load_pair's signature; `run`: the engine's `stream` signature (a sharded
    target's rank 0 passes cluster.Leader.stream, which feeds the other ranks first)."""

    def __init__(self, loader: Callable[..., Pair] = load_pair, run: Callable[..., Iterator] = stream):
        self._loader, self._run = loader, run
        self._pairs: dict[tuple, Pair] = {}
        self._pinned: set[tuple] = set()
        self._requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="mlx-worker", daemon=True).start()

    def pin(self, model: Optional[str], draft: Optional[str]) -> None:
        """Never evict this pair (the one the API serves): other loads make room around it."""
        self._pinned.add(pair_key(model, draft))

    def pair(self, model: Optional[str], draft: Optional[str], progress=None) -> Pair:
        """Load (or reuse) a pair. Call only on the worker thread, e.g. inside `call`.

        A new pair is loaded before an older one is forgotten, so a failed load (a bad path, no
        network) leaves every loaded pair in place; pinned pairs are never forgotten.
        """
        key = pair_key(model, draft)
        if key in self._pairs:
            return self._pairs[key]
        progress = progress or (lambda m: None)
        pair = self._loader(model, draft, progress=progress)
        warm(pair, progress)  # the planner's cost probe now, not in the first request
        unpinned = [k for k in self._pairs if k not in self._pinned]  # oldest first
        while unpinned and len(self._pairs) >= MAX_PAIRS:
            del self._pairs[unpinned.pop(0)]
        self._pairs[key] = pair
        return pair

    def loaded(self) -> list[tuple]:
        """Keys (`pair_key`) of the pairs in memory, oldest first."""
        return list(self._pairs)

    def prepare(self, model: Optional[str], draft: Optional[str]) -> Job:
        """Load (or reuse) a pair on the worker: Status lines while it loads, then the Pair."""
        return self.call(lambda progress: self.pair(model, draft, progress))

    def call(self, fn: Callable[[Callable[[str], None]], object], job: Optional[Job] = None) -> Job:
        """Run fn(progress) on the worker thread; its events / return value arrive through the job.

        fn may return an iterator (each item is forwarded) or a single value.
        """
        job = job or Job()
        self._requests.put((fn, job))
        return job

    def generate(self, prompt: str | list[int], cfg: GenerationConfig, model: Optional[str] = None,
                 draft: Optional[str] = None, chat_template: bool = True) -> Job:
        """Stream the events of one generation (Status lines first if the pair must load)."""

        def work(progress):
            pair = self.pair(model, draft, progress)
            ids = prompt if isinstance(prompt, list) else encode_prompt(pair.tokenizer, prompt, chat_template)
            return self._run(pair, ids, cfg, cancel=job.cancelled)

        job = Job()
        return self.call(work, job)

    def _loop(self) -> None:
        while True:
            fn, job = self._requests.get()
            if job.cancelled.is_set():  # its requester left while it waited in line
                job.events.put(_DONE)
                continue
            try:
                result = fn(lambda m: job.events.put(Status(m)))
                if hasattr(result, "__next__"):
                    for item in result:
                        job.events.put(item)
                else:
                    job.events.put(result)
            except Exception as e:  # reported to the requester; the worker keeps serving
                job.events.put(e)
            finally:
                job.events.put(_DONE)
