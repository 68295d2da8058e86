"""The MLX worker thread: which pairs stay loaded, and jobs whose requester left."""

from __future__ import annotations

import threading

import pytest

from dflash.registry import BUILTIN_DRAFTER, BUILTIN_TARGET
from dflash.worker import Job, Status, Worker, pair_key


class Loads:
    """A loader that records its calls and fails for names starting with "bad"."""

    def __init__(self):
        self.calls = []

    def __call__(self, model, draft, progress):
        self.calls.append((model, draft))
        progress(f"loading {model}")
        if str(model).startswith("bad"):
            raise ValueError(f"cannot load {model}")
        return f"pair:{model}"


def on_worker(worker, fn):
    """fn() on the worker thread; returns its value or raises its error."""
    return [x for x in worker.call(lambda progress: fn()) if not isinstance(x, Status)][-1]


def test_a_failed_load_evicts_nothing_and_the_pinned_pair_stays():
    loads = Loads()
    w = Worker(loader=loads)
    w.pin(None, None)
    on_worker(w, lambda: w.pair(None, None))
    on_worker(w, lambda: w.pair("org/A", "org/A-d"))
    for _ in range(2):
        with pytest.raises(ValueError, match="cannot load bad"):
            on_worker(w, lambda: w.pair("bad/x", "org/d"))
    assert w.loaded() == [pair_key(None, None), ("org/A", "org/A-d")]
    on_worker(w, lambda: w.pair("org/B", "org/B-d"))  # makes room: the unpinned A goes
    on_worker(w, lambda: w.pair("org/C", "org/C-d"))
    assert w.loaded() == [pair_key(None, None), ("org/C", "org/C-d")]
    assert on_worker(w, lambda: w.pair(None, None)) == "pair:None"
    assert loads.calls.count((None, None)) == 1  # the served pair was never loaded again


def test_one_pair_however_it_is_spelled(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    monkeypatch.chdir(tmp_path)
    same = {pair_key(p, "org/d") for p in ("m", "./m", "m/", str(tmp_path / "m"), "./x/../m")}
    assert same == {(str(tmp_path.resolve() / "m"), "org/d")}
    assert pair_key(None, None) == pair_key(BUILTIN_TARGET, str(BUILTIN_DRAFTER))
    assert pair_key("mlx-community/Qwen3-4B-4bit", None) == ("mlx-community/Qwen3-4B-4bit",
                                                             "z-lab/Qwen3-4B-DFlash-b16")
    loads = Loads()
    w = Worker(loader=loads)
    for p in ("m", "./m", str(tmp_path / "m") + "/"):
        on_worker(w, lambda p=p: w.pair(p, "org/d"))
    assert len(loads.calls) == 1 and len(w.loaded()) == 1


def test_a_job_cancelled_while_waiting_never_runs():
    w, gate, ran = Worker(loader=Loads()), threading.Event(), []
    busy = w.call(lambda progress: gate.wait(10))
    job = Job()
    w.call(lambda progress: ran.append(1), job)
    job.cancel()
    gate.set()
    assert list(busy) == [True] and list(job) == [] and ran == []


def test_a_loaded_pair_has_its_planner_costs_timed_before_the_first_request(monkeypatch):
    import dflash.engine as engine
    from dflash.config import MAX_TREE, GenerationConfig
    from dflash.events import Summary
    from tests.tiny import tiny_drafter, tiny_pair

    probes = []
    measure = engine.measure_costs
    monkeypatch.setattr(engine, "measure_costs", lambda *a, **k: probes.append(k) or measure(*a, **k))
    monkeypatch.setattr(engine, "default_tree_nodes", lambda: "auto")  # a CPU's default
    w = Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter()))
    lines = [x.message for x in w.prepare("tiny", "tiny-d") if isinstance(x, Status)]
    assert any("timing this host's target passes" in m for m in lines)
    assert len(probes) == 1 and probes[0]["tree_nodes"] == MAX_TREE
    events = list(w.generate([1, 2, 3], GenerationConfig(max_tokens=6), "tiny", "tiny-d"))
    assert isinstance(events[-1], Summary) and events[-1].verify == "tree auto"
    assert len(probes) == 1  # the request used the table timed at load

    # nothing to time where the default is a fixed tree (a CUDA GPU) or the target takes no tree
    monkeypatch.setattr(engine, "default_tree_nodes", lambda: MAX_TREE)
    list(Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter())).prepare("t", "d"))
    monkeypatch.setattr(engine, "default_tree_nodes", lambda: "auto")
    list(Worker(loader=lambda model, draft, progress: tiny_pair("qwen3_next", tiny_drafter())).prepare("t", "d"))
    assert len(probes) == 1
