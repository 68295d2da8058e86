"""The playground: pure views of events, then the launched app through gradio_client.

The app runs as a subprocess on a free port, on the embedded pair when its drafter is there, else
on the builtin target with a random drafter (outputs must still be identical: DFlash is lossless).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from dataclasses import replace
from types import SimpleNamespace

import httpx
import pytest

from app import (CUSTOM, CUSTOM_OFF, NO_NETWORK, RUN_OUT, VIEWS, Playground, custom_models_allowed,
                 model_choices, parse_settings)
from dflash.config import MAX_TOKENS_LIMIT
from dflash.events import Cycle, Prefill, Summary, Token
from dflash.registry import BUILTIN_DRAFTER, PICKER
from dflash.replay import duration
from dflash.ui import (Race, Run, acceptance_histogram, cycles_chart, metrics_html, pane_html, position_chart,
                       race_chart, verdict_html)
from dflash.verdict import first_divergence
from dflash.worker import Worker, pair_key
from tests.tiny import FakeDetokenizer, tiny_drafter, tiny_pair

ROOT = Path(__file__).resolve().parent.parent
SHORT = dict(prompt="Count from one to ten:", max_tokens=8, block_size=4, chat=False, tree="chain")
# what the API returns of RUN_OUT (gr.State outputs stay on the server)
API_OUT = tuple(name for name in RUN_OUT if name not in ("history", "loaded"))


# ---- pure views ------------------------------------------------------------------------------

def _run() -> Run:
    run = Run("dflash")
    run.add(Prefill("dflash", 5, Token(1, "a<b>", "target"), 0.1))
    run.add(Cycle(0, 4, (7, 8, 9), 2, (Token(7, " \n  x", "draft"), Token(8, "", "draft"),
                                       Token(2, "é", "target", 9)), 0.01, 0.02, 0.0, 0.2, 4, 2))
    run.add(Cycle(1, 4, (4, 5, 6), 3, (Token(4, "\t", "draft"), Token(5, "}", "draft"), Token(6, "😀", "draft"),
                                       Token(3, "y", "target")), 0.01, 0.02, 0.0, 0.3, 8, 5))
    return run


def test_accepted_copies_have_their_own_colour():
    """A tree cycle's accepted nodes that copied the context (Cycle.copied) show as copies."""
    run = Run("dflash")
    run.add(Prefill("dflash", 5, Token(1, "a", "target"), 0.1))
    # cycle 0 accepts the copy's two nodes; cycle 1 accepts node 1 while the copy was node 3
    run.add(Cycle(0, 4, (7, 8, 9), 2, (Token(7, "x", "draft"), Token(8, "y", "draft"), Token(2, "z", "target", 9)),
                  0.01, 0.02, 0.0, 0.2, 4, 2, parents=(0, 1, 0), path=(1, 2), copied=(1, 2)))
    run.add(Cycle(1, 4, (4, 5, 6), 1, (Token(4, "u", "draft"), Token(3, "v", "target", 5)),
                  0.01, 0.02, 0.0, 0.3, 6, 3, parents=(0, 1, 0), path=(1,), copied=(3,)))
    assert [k for _, k in run.tokens()] == ["first", "copied", "copied", "correction", "draft", "correction"]
    assert 'class="tk tk-copied"' in pane_html(run, "dflash")


def test_the_copy_colour_and_the_block_used_in_the_cycles_chart():
    run = Run("dflash")
    run.add(Prefill("dflash", 5, Token(1, "a", "target"), 0.1))
    # a tree of depth 2 whose path is the copy; then a chain cycle of a 3-token block
    run.add(Cycle(0, 4, (7, 8, 9), 2, (Token(7, "x", "draft"), Token(8, "y", "draft"), Token(2, "z", "target", 9)),
                  0.01, 0.02, 0.0, 0.2, 4, 2, parents=(0, 1, 0), path=(1, 2), copied=(1, 2)))
    run.add(Cycle(1, 3, (4, 5), 1, (Token(4, "u", "draft"), Token(3, "v", "target", 5)), 0.01, 0.02, 0.0, 0.3, 6, 3))
    bars = {t.name: list(t.y) for t in cycles_chart(run).data}
    assert bars["accepted copy"] == [2, 0] and bars["accepted draft"] == [0, 1] and bars["correction"] == [1, 1]
    assert bars["block used"] == [3, 3]  # the tree's depth + 1, the chain's block
    assert "accepted copy" not in {t.name for t in cycles_chart(_run()).data}  # no copies: no legend entry


def test_the_speedup_says_how_far_to_trust_it():
    def race(load, steps):
        target = Run("target")
        for i, s in enumerate(steps):
            target.add(Cycle(i, 1, (), 0, (Token(i, "t", "target"),), 0.0, s, 0.0, 0.1 * (i + 1), i + 2, 0))
        return Race(target, Run("dflash"), "p", {}, "pair", "box", load=load, cores=2)

    calm = race((0.2, 1.1), [0.05] * 10)
    assert calm.trust() == ("host load 0.2 → 1.1 on 2 cores; target-only step 50 ms (p90 50 ms)", False)
    assert race((1.6, 2.5), [0.05] * 10).trust()[1]  # other work held most of the cores
    assert race((0.1, 1.0), [0.05] * 8 + [0.2] * 2).trust()[1]  # the target's steps were disturbed
    assert "Busy host" in metrics_html(None, None, race((1.6, 2.5), [0.05] * 10).trust())
    assert "Busy host" not in metrics_html(None, None, calm.trust())
    tree = replace(_summary("dflash", [1, 2]), verify="tree 8", acceptance_rate=0.29)
    assert "29%<br><small>of every tree node offered" in metrics_html(None, tree)


def test_the_long_preset_is_a_long_context_within_the_playground_s_limit():
    import app
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    from dflash.builtin import ensure_builtin_target

    long = app.load_presets()["long"]
    assert len(long) <= app.MAX_PROMPT_CHARS and app.parse_settings(long, 8, 4, 0, 0)
    assert len(load_tokenizer(ensure_builtin_target()).encode(long)) > 2500  # a pasted document


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2


def test_logit_margin_is_the_targets_top2_gap():
    import mlx.core as mx

    from dflash.verdict import logit_margin
    from tests.tiny import tiny_pair

    pair = tiny_pair("llama")
    top = mx.sort(pair.target.model(mx.array([[5, 6, 7, 8, 9]]))[0, -1])
    assert logit_margin(pair, [5, 6, 7], [8, 9]) == pytest.approx((top[-1] - top[-2]).item(), abs=1e-4)


def test_token_pane_is_faithful_and_coloured():
    run = _run()
    assert [k for _, k in run.tokens()] == ["first", "draft", "draft", "correction", "draft", "draft", "draft",
                                            "bonus"]
    html = pane_html(run, "dflash", decode=lambda i: f"P{i}")
    assert "a&lt;b&gt;" in html and " \n  x" in html and "\t" in html and "😀" in html
    assert html.count('class="tk tk-') == 8 + 5  # one span per token (even a "" one), + the legend
    # the correction's hover card (CSS, focusable for touch): the texts as shown, no Python quotes
    assert '<span class="tk tk-correction" tabindex="0" data-tip="drafter proposed “P9”\ntarget chose “é”">' in html
    assert run.n_tokens == 8 and run.tok_s() == pytest.approx(7 / 0.2)


def _summary(mode, ids, finish="length"):
    return Summary(mode, 4, tuple(ids), "", len(ids), len(ids), 1.0, 0.0, (0,) * len(ids), (0.0,) * 3, 5,
                   0.1, 1.0, 10.0, 0.0, 1.0, 0.0, finish)


def test_verdict():
    t = _summary("target", [1, 2, 3])
    assert "Outputs identical" in verdict_html(t, _summary("dflash", [1, 2, 3]))
    diff = verdict_html(t, _summary("dflash", [1, 5, 3]), decode=lambda i: f"w{i}", margin=0.01)
    assert "token 1" in diff and "&#x27;w2&#x27;" in diff and "&#x27;w5&#x27;" in diff and "near-tie" in diff
    assert "need not match" in verdict_html(t, _summary("dflash", [1, 5]), temperature=0.7)
    assert "Stopped" in verdict_html(t, _summary("dflash", [1], "cancelled"))


def test_charts_and_metrics_build():
    run = _run()
    bars = cycles_chart(run).data
    assert [sum(t.y[i] for t in bars if t.type == "bar") for i in range(2)] == [3, 4]
    assert list(acceptance_histogram(run).data[0].y) == [0, 0, 1, 1]
    assert list(position_chart(run).data[0].y) == [1.0, 1.0, 0.5]
    assert len(race_chart([run]).data) == 2
    assert "–" in metrics_html(None, None)


def test_small_views_say_what_they_show():
    one = Run("target")
    one.add(Prefill("target", 3, Token(1, "a", "target"), 0.1))
    target_pane = pane_html(one, "target")
    assert "1 token<" in target_pane and "tk-first" in target_pane.split('class="legend"')[1]  # in its legend
    for chart in (cycles_chart(_run()), acceptance_histogram(_run()), race_chart([_run()])):
        assert chart.layout.yaxis.dtick == 1  # whole-number ticks on counts
    assert parse_settings("hi", MAX_TOKENS_LIMIT, 4, 0, 0).max_tokens == MAX_TOKENS_LIMIT  # the CLI's limit
    with pytest.raises(ValueError, match=f"1..{MAX_TOKENS_LIMIT}"):
        parse_settings("hi", MAX_TOKENS_LIMIT + 1, 4, 0, 0)


# ---- the handlers, on a worker with tiny models -----------------------------------------------

class Gate:
    """Blocks the worker at the `after`-th token of generation number `run` until opened."""

    def __init__(self, run: int, after: int = 3):
        self.event, self.run, self.after, self.runs = threading.Event(), run, after, 0

    def detokenizer(self):
        gate = self

        class Gated(FakeDetokenizer):
            def reset(self):
                super().reset()
                gate.runs += 1

            def add_token(self, t):
                super().add_token(t)
                if gate.runs == gate.run and len(self.tokens) == gate.after:
                    gate.event.wait(60)

        return Gated()


def tiny_playground(gate=None, allow_custom=True, calls=None):
    """A Playground whose "tiny" pick is a random tiny pair; other names go to the real loader."""
    from dflash.load import load_pair

    def loader(model, draft, progress):
        (calls if calls is not None else []).append((model, draft))
        if model != "tiny-llama":
            return load_pair(model, draft, progress=progress)
        pair = tiny_pair("llama", tiny_drafter())
        pair.tokenizer.decode = lambda ids: f"<{ids[0]}>"
        if gate:
            pair.tokenizer.detokenizer = gate.detokenizer()
        return pair

    hub = next(label for label in PICKER if "Qwen3-4B" in label)
    choices = {"tiny": ("tiny-llama", "tiny-drafter"), hub: PICKER[hub]}
    return Playground(Worker(loader=loader), {**choices, CUSTOM: None} if allow_custom else choices,
                      allow_custom, machine="a test box")


def session(name="s"):
    return SimpleNamespace(session_hash=name)


def run_args(**kw):
    args = dict(prompt="hello there", max_tokens=24, block_size=4, temperature=0, seed=0, chat=False,
                choice="tiny", custom_target="", custom_draft="", adaptive=False, history=None, loaded="tiny",
                tree="chain")
    return {**args, **kw}


def views(update, names=RUN_OUT) -> dict:
    return dict(zip(names, update))


def test_stop_shows_what_was_produced_and_replays():
    gate = Gate(run=2)  # the DFlash run waits at its third token
    pg = tiny_playground(gate)
    frames = pg.run(**run_args(max_tokens=200), request=session())
    for update in frames:
        if '<pre class="tokens"><span' in str(views(update)["dflash"]):  # DFlash has begun
            break
    pg.stop(session())
    gate.event.set()
    last = views(list(frames)[-1])
    assert last["status"].startswith("■ Stopped")
    assert "max tokens" in last["target"] and "stopped" in last["dflash"] and "generating" not in last["dflash"]
    assert "Stopped: the first" in last["verdict"] and "identical" in last["verdict"]
    assert last["metrics"].count("tok/s") == 2 and "stopped" in last["metrics"]
    assert last["data"]["dflash"]["finish_reason"] == "cancelled"
    # the stopped race replays: both panes grow, then end exactly as the live run ended
    replay = [views(u, VIEWS) for u in pg.replay(last["history"], 0, "2×", session())]
    assert replay[-1]["target"] == last["target"] and replay[-1]["dflash"] == last["dflash"]
    grown = [u for u in replay if isinstance(u["dflash"], str) and "▶ replay" in u["dflash"]]
    assert grown and all("max tokens" not in u["target"] for u in grown[:1])


def test_a_queued_session_sees_its_place_in_line():
    gate = Gate(run=1)
    pg = tiny_playground(gate)
    first = pg.run(**run_args(), request=session("a"))
    assert "Preparing" in next(first)[0]  # session a holds the worker
    second = pg.run(**run_args(), request=session("b"))
    assert next(second)[0] == "⏳ Waiting for another run (position 1 in line)…"
    gate.event.set()
    assert views(list(first)[-1])["status"].startswith("✓ Done")
    assert views(list(second)[-1])["status"].startswith("✓ Done")


def test_a_failed_pick_says_what_to_do_and_returns_to_the_loaded_pair(monkeypatch, tmp_path):
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)  # no network in tests, and none needed
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))
    calls = []
    pg = tiny_playground(calls=calls)
    assert list(pg.choose("tiny", "tiny"))[-1][0] == "✓ tiny is ready."
    hub_pick = next(label for label in pg.choices if "Hub" in label)
    for _ in range(2):
        status, model, loaded = list(pg.choose(hub_pick, "tiny"))[-1]
        assert status == f"⚠ {' + '.join(pg.choices[hub_pick])} did not load: {NO_NETWORK}"  # named
        assert model == {"__type__": "update", "value": "tiny"}
    assert pg.worker.loaded() == [pair_key("tiny-llama", "tiny-drafter")] and calls.count(calls[0]) == 1
    assert views(list(pg.run(**run_args(), request=session()))[-1])["status"].startswith("✓ Done")


def test_custom_paths_what_to_do(tmp_path):
    pg = tiny_playground()
    missing = pg.run(**run_args(choice=CUSTOM, custom_target=str(tmp_path / "nope")), request=session())
    assert "does not exist on this machine" in list(missing)[-1][0]
    unknown = list(pg.run(**run_args(choice=CUSTOM, custom_target="org/Unknown-Model-1B"), request=session()))
    assert "drafter box" in unknown[-1][0] and "--draft" not in unknown[-1][0]
    # an id typed into the picker is the custom target: used, or named in what to do
    typed = list(pg.run(**run_args(choice="org/Unknown-Model-1B"), request=session()))[-1][0]
    assert typed == unknown[-1][0]
    box, target, said, model = pg.typed("org/Unknown-Model-1B", "tiny")
    assert box["visible"] and target == "org/Unknown-Model-1B" and model["value"] == CUSTOM
    assert said.startswith("⚠ No DFlash drafter is known for org/Unknown-Model-1B")


def test_custom_models_only_when_allowed(tmp_path):
    calls = []
    pg = tiny_playground(allow_custom=False, calls=calls)
    said = {list(pg.run(**run_args(choice=CUSTOM, custom_target=t), request=session()))[-1][0]
            for t in (str(tmp_path), str(tmp_path / "nope"), "org/Model")}
    assert said == {f"⚠ {CUSTOM_OFF}"} and calls == []  # nothing loaded, nothing revealed
    # an id typed into the picker is named, refused, and the picker goes back to the loaded pair
    typed = list(pg.run(**run_args(choice="org/Model"), request=session()))[-1][0]
    assert typed == f"⚠ org/Model was not loaded. {CUSTOM_OFF}" and calls == []
    assert pg.typed("org/Model", "tiny")[2:] == (typed, {"__type__": "update", "value": "tiny"})
    assert CUSTOM not in model_choices(None, None, allow_custom=False) and CUSTOM in model_choices(None, None)
    assert custom_models_allowed("127.0.0.1", None) and not custom_models_allowed("0.0.0.0", None)
    assert custom_models_allowed("0.0.0.0", True) and not custom_models_allowed("127.0.0.1", False)


def test_replay_of_a_finished_race_and_its_results():
    pg = tiny_playground()
    last = views(list(pg.run(**run_args(), request=session()))[-1])
    replay = [views(u, VIEWS) for u in pg.replay(last["history"], 0, "2×", session())]
    assert replay[-1]["dflash"] == last["dflash"] and replay[-1]["target"] == last["target"]
    cursors = [u["race"].layout.shapes[0].x0 for u in replay if hasattr(u["race"], "layout") and u["race"].layout.shapes]
    assert cursors[0] == 0 and cursors == sorted(cursors)  # the race chart's cursor follows the clock
    assert cursors[-1] == pytest.approx(duration(last["history"][0].runs))
    race = last["history"][0]
    assert race.load and race.cores and "Measured with" in last["metrics"] and "host load" in last["metrics"]
    # the tree view says why it has nothing to draw (this race verified chains)
    said = {n: pg.tree(last["history"], 0, n).layout.annotations[0].text for n in (None, 1, 9999, "x")}
    assert "verified no tree" in said[None] and "a chain, not a tree" in said[1]
    assert said[9999] == f"There is no cycle 9999: this race's DFlash run has cycles 1 to {len(race.dflash.cycles)}."
    assert "whole number" in said["x"] and "Run a race first" in pg.tree([], None, 3).layout.annotations[0].text
    md = pg.results(last["history"], 0)
    d, t = last["data"]["dflash"], last["data"]["target"]
    for text in (f"{t['decode_tok_s']:.1f} tok/s", f"{d['decode_tok_s']:.1f} tok/s", f"{d['tau']:.2f}",
                 "a test box", "block_size 4", "| Target only | DFlash |"):
        assert text in md
    assert "Nothing to replay" in list(pg.replay([], None, "1×", session()))[-1][0]
    # an older race of the session's history replays too, and ends on its own live view
    again = run_args(prompt="another one", max_tokens=9, history=last["history"])
    newer = views(list(pg.run(**again, request=session()))[-1])
    assert [r.prompt for r in newer["history"]] == ["another one", "hello there"]
    assert views(list(pg.replay(newer["history"], 1, "2×", session()))[-1], VIEWS)["dflash"] == last["dflash"]


# ---- the launched app ------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pair_args(tmp: Path) -> list[str]:
    """The embedded pair when its drafter exists, else the builtin target + a random drafter."""
    if (BUILTIN_DRAFTER / "config.json").exists():
        return []
    import mlx.core as mx

    from dflash.drafter import Drafter, DrafterArgs, default_taps, save_drafter

    mx.random.seed(0)
    args = DrafterArgs(hidden_size=576, intermediate_size=1536, num_hidden_layers=1, num_attention_heads=9,
                       num_key_value_heads=3, vocab_size=49152, num_target_layers=30, mask_token_id=0,
                       target_layer_ids=default_taps(30, 2), block_size=16, head_dim=64)
    return ["--draft", str(save_drafter(Drafter(args), tmp / "random-drafter"))]


@contextlib.contextmanager
def launched_app(tmp: Path):
    """`python app.py` on a free port; yields its URL once it answers."""
    port = free_port()
    log = open(tmp / "app.log", "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # no network in tests: a Hub pick fails at once
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port), *pair_args(tmp)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, (tmp / "app.log").read_text()
            assert time.monotonic() < deadline, "the app did not start"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/config", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    with launched_app(tmp_path_factory.mktemp("app")) as url:
        yield url


def client(url):
    from gradio_client import Client

    return Client(url, verbose=False)


def final(updates: list) -> dict:
    """The last real value of each output (skipped outputs arrive as {'__type__': 'update'})."""
    last = [None] * len(updates[0])
    for out in updates:
        for i, v in enumerate(out):
            if not (isinstance(v, dict) and v.get("__type__") == "update"):
                last[i] = v
    return dict(zip(API_OUT, last))


def race(c, **kw) -> tuple[list, dict]:
    job = c.submit(**{**SHORT, **kw}, api_name="/run")
    updates = list(job)
    return updates, final(updates)


def test_the_lookup_switch_reaches_the_engine():
    pg = tiny_playground()
    copied = {}
    for lookup in (True, False):
        last = views(list(pg.run(**run_args(prompt="ab cd " * 8, tree="8", lookup=lookup), request=session()))[-1])
        race = last["history"][0]
        assert race.settings["lookup"] is lookup and race.settings["tree"] == 8
        copied[lookup] = sum(len(c.copied) for c in race.dflash.cycles)
    assert copied[True] > 0 and copied[False] == 0, copied


def test_tree_settings():
    assert parse_settings("hi", 8, 4, 0, 0, tree="auto", lookup=False).lookup is False
    assert parse_settings("hi", 8, 4, 0, 0, tree="chain").tree == 0
    auto = parse_settings("hi", 8, 4, 0, 0, tree="auto")
    assert auto.tree is None and auto.block_size is None and auto.wants_tree()
    assert parse_settings("hi", 8, 4, 0, 0, tree="16").tree == 16
    with pytest.raises(ValueError, match="Tree budget"):
        parse_settings("hi", 8, 4, 0, 0, tree="65")


def test_tree_race_shows_a_drafted_tree(app_url):
    c = client(app_url)
    _, out = race(c, tree="8", max_tokens=24)
    d = out["data"]["dflash"]
    assert out["data"]["target"]["token_ids"] == d["token_ids"] and d["verify"] == "tree 8"
    assert out["tree_plot"] and out["tree_plot"]["type"] == "plotly" and int(out["tree_cycle"]) >= 1
    fig = c.predict(None, 1, api_name="/tree")  # the first cycle of the newest race
    assert fig and fig["type"] == "plotly"


def test_generation_end_to_end(app_url):
    updates, out = race(client(app_url))
    status, dflash_pane, verdict, metrics, data = (out[k] for k in ("status", "dflash", "verdict", "metrics", "data"))
    assert status.startswith("✓ Done"), status
    t, d = data["target"], data["dflash"]
    assert t["token_ids"] == d["token_ids"] and data["first_divergence"] is None
    assert "Outputs identical" in verdict
    for s in (t, d):
        assert s["tokens"] == len(s["token_ids"]) == SHORT["max_tokens"] or s["finish_reason"] == "stop"
        assert s["cycles"] == len(s["acceptance_lengths"])
    lengths, B = d["acceptance_lengths"], d["block_size"]
    assert B == SHORT["block_size"] and t["tau"] == 1.0
    assert d["tau"] == pytest.approx(1 + sum(lengths) / len(lengths))
    assert d["acceptance_rate"] == pytest.approx(sum(lengths) / (len(lengths) * (B - 1)))
    assert d["per_position_acceptance"][0] == pytest.approx(sum(a > 0 for a in lengths) / len(lengths))
    assert dflash_pane.count('class="tk tk-') >= 4 + 1 and f'{d["tokens"]} tokens' in dflash_pane
    assert f'{d["decode_tok_s"]:.1f} tok/s' in metrics
    assert all(out[p] and out[p]["type"] == "plotly" for p in ("race", "cycles", "hist", "pos"))
    assert len(updates) > 4  # streamed, not only the end


def test_adaptive_verify_length(app_url):
    _, out = race(client(app_url), adaptive=True, max_tokens=12)
    assert out["status"].startswith("✓ Done"), out["status"]
    assert out["data"]["target"]["token_ids"] == out["data"]["dflash"]["token_ids"]


def test_bad_input_stop_and_queueing(app_url):
    c = client(app_url)
    assert "empty" in race(c, prompt="   ")[1]["status"]
    assert "does not exist" in race(c, choice=CUSTOM, custom_target="/no/such/model",
                                    custom_draft="/no/such/drafter")[1]["status"]
    assert "drafter box" in race(c, choice=CUSTOM, custom_target="org/Unknown-Model-1B")[1]["status"]
    with pytest.raises(Exception, match="maximum"):
        c.predict(**{**SHORT, "max_tokens": 10**6}, api_name="/run")

    # Stop: a long run is cancelled once it streams; the worker stops within a cycle
    long = c.submit(**{**SHORT, "max_tokens": 1000}, api_name="/run")
    while not (long.outputs() and "Running" in str(long.outputs()[-1][0])):
        time.sleep(0.1)
    time.sleep(1.0)
    long.cancel()
    stopped = time.monotonic()

    # two sessions at once: they queue (never overlap), the second sees its place in line, and both
    # get the target's own output
    clients, spans, waited = [client(app_url), client(app_url)], {}, []

    def go(i):
        job = clients[i].submit(**SHORT, api_name="/run")
        for out in job:
            if isinstance(out[0], str) and out[0].startswith("▶"):
                spans.setdefault(i, [time.monotonic(), None])
            if out[0] == "⏳ Waiting for another run (position 1 in line)…":
                waited.append(i)
        spans[i][1] = time.monotonic()
        spans[i].append(final(list(job.outputs()))["data"])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    (a0, a1, a), (b0, b1, b) = sorted(spans.values())
    assert a0 - stopped < 10, "the stopped run kept the worker busy"
    assert a1 <= b0 + 0.5, "two sessions ran at the same time"
    assert len(set(waited)) == 1
    assert a["dflash"]["token_ids"] == b["dflash"]["token_ids"] == a["target"]["token_ids"]


def test_stop_leaves_what_was_produced(app_url):
    """Stop through the API: the run ends with its partial text, "stopped" and the partial metrics
    (it used to be cut off mid-stream: panes "generating…", verdict and metrics blank)."""
    c = client(app_url)
    job = c.submit(**{**SHORT, "max_tokens": 1000}, api_name="/run")
    while not (job.outputs() and '<pre class="tokens"><span' in str(job.outputs()[-1][API_OUT.index("target")])):
        time.sleep(0.1)
    c.predict(api_name="/stop")
    out = final(list(job))
    assert out["status"].startswith("■ Stopped"), out["status"]
    assert "stopped" in out["target"] and "generating" not in out["target"] and "not run" in out["dflash"]
    assert "Stopped before" in out["verdict"] and "tok/s" in out["metrics"]
    assert out["data"]["target"]["finish_reason"] == "cancelled"
    assert 1 <= out["data"]["target"]["tokens"] < 1000
