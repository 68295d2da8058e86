"""The race replayed: both recorded runs on one clock.

The playground runs target-only, then DFlash, one after the other (each timed alone). Their events
carry the time they happened (`Prefill.t`, `Cycle.t`: seconds since that run started), so a replay
shows, at each clock value, the events each run had emitted by then: a view of the recording,
never a second generation.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterator

from .ui import Run

SPEEDS = {"0.25×": 0.25, "0.5×": 0.5, "1×": 1.0, "2×": 2.0}


def end(run: Run) -> float:
    """When the run's last event happened (0 for a run with none)."""
    if run.cycles:
        return run.cycles[-1].t
    return run.prefill.t if run.prefill else 0.0


def duration(runs: list[Run]) -> float:
    return max((end(r) for r in runs), default=0.0)


def at(run: Run, clock: float) -> Run:
    """The run as it stood `clock` seconds after it started; past its end, the whole run (its
    Summary included, so the final numbers are the live run's own)."""
    if clock >= end(run):
        return run
    view = Run(run.mode)
    if run.prefill is not None and run.prefill.t <= clock:
        view.prefill = run.prefill
        view.cycles = run.cycles[: bisect_right(run.cycles, clock, key=lambda c: c.t)]
    return view


def schedule(total: float, speed: float, every: float) -> Iterator[tuple[float, float]]:
    """(wall seconds since the replay started, clock) for one frame every `every` wall seconds;
    the clock runs at `speed` x the recorded time and the last frame is exactly at `total`."""
    if speed <= 0 or every <= 0:
        raise ValueError(f"speed and frame interval must be positive (got {speed}, {every})")
    step, k = every * speed, 0
    while k * step < total:
        yield k * every, k * step
        k += 1
    yield total / speed, total
