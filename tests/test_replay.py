"""The replay timeline: recorded runs on one clock, no model and no browser."""

from __future__ import annotations

import pytest

from dflash.events import Cycle, Prefill, Summary, Token
from dflash.replay import SPEEDS, at, duration, end, schedule
from dflash.ui import Run, pane_html


def recorded(mode: str, times: list[float], per_cycle: int, finish: str = "length") -> Run:
    """A run whose prefill ends at times[0] and whose cycles end at times[1:]."""
    run, n, ids = Run(mode), 1, [1]
    run.add(Prefill(mode, 4, Token(1, "a", "target"), times[0]))
    for i, t in enumerate(times[1:]):
        toks = tuple(Token(10 + n + j, f" w{n + j}", "draft" if j < per_cycle - 1 else "target")
                     for j in range(per_cycle))
        n, ids = n + per_cycle, ids + [tok.id for tok in toks]
        run.add(Cycle(i, per_cycle, (), per_cycle - 1, toks, 0.0, 0.0, 0.0, t, n, 0))
    decode_s, lengths = times[-1] - times[0], (per_cycle - 1,) * (len(times) - 1)
    run.add(Summary(mode, per_cycle, tuple(ids), "", n, len(lengths), float(per_cycle), 0.0, lengths, (), 4,
                    times[0], decode_s, (n - 1) / decode_s, 0.0, 0.0, 0.0, finish))
    return run


def test_at_shows_what_each_run_had_emitted_by_the_clock():
    target = recorded("target", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 1)
    dflash = recorded("dflash", [0.15, 0.25, 0.35], 3)
    assert end(target) == 0.6 and duration([target, dflash]) == 0.6
    assert at(target, 0.05).prefill is None and at(target, 0.05).n_tokens == 0
    assert [at(r, 0.3).n_tokens for r in (target, dflash)] == [3, 4]  # DFlash ahead mid-race
    mid = at(dflash, 0.3)
    assert mid.summary is None and mid.tok_s() == pytest.approx(3 / 0.1)  # a moving counter
    assert at(dflash, 0.35) is dflash and at(target, 0.59).summary is None
    assert at(target, 10) is target and target.summary.decode_tok_s == pytest.approx(5 / 0.5)


def test_a_replay_ends_on_the_live_runs_own_view():
    run = recorded("dflash", [0.1, 0.2, 0.3], 4, finish="cancelled")  # a stopped run replays too
    views = [pane_html(at(run, c), "dflash") for _, c in schedule(end(run), 0.25, 0.1)]
    assert views[-1] == pane_html(run, "dflash")
    assert len(set(views)) > 3  # it grew on the way


@pytest.mark.parametrize("speed", SPEEDS.values())
def test_schedule_runs_the_clock_at_the_speed(speed):
    frames = list(schedule(2.0, speed, 0.1))
    assert frames[0] == (0.0, 0.0) and frames[-1] == pytest.approx((2.0 / speed, 2.0))
    assert all(c == pytest.approx(w * speed) for w, c in frames)
    assert all(b[0] > a[0] for a, b in zip(frames, frames[1:]))
    assert len(frames) == pytest.approx(2.0 / speed / 0.1 + 1, abs=1)


def test_schedule_of_an_empty_run_and_bad_speeds():
    assert list(schedule(0.0, 1.0, 0.1)) == [(0.0, 0.0)]
    with pytest.raises(ValueError):
        next(schedule(1.0, 0.0, 0.1))
