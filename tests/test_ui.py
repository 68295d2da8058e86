"""The playground: pure views of events, then the launched app through gradio_client.

The app runs as a subprocess on a free port, on the embedded pair when its drafter is there, else
on the builtin target with a random drafter (outputs must still be identical: DFlash is lossless).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from dflash.events import Cycle, Prefill, Summary, Token
from dflash.registry import BUILTIN_DRAFTER
from dflash.ui import (Run, acceptance_histogram, cycles_chart, metrics_html, pane_html, position_chart,
                       race_chart, verdict_html)
from dflash.verdict import first_divergence

ROOT = Path(__file__).resolve().parent.parent
SHORT = dict(prompt="Count from one to ten:", max_tokens=8, block_size=4, chat=False)
CUSTOM = "Custom target + drafter…"


# ---- pure views ------------------------------------------------------------------------------

def _run() -> Run:
    run = Run("dflash")
    run.add(Prefill("dflash", 5, 0.1, Token(1, "a<b>", "target"), 0.1))
    run.add(Cycle(0, 4, (7, 8, 9), 2, (Token(7, " \n  x", "draft"), Token(8, "", "draft"),
                                       Token(2, "é", "target", 9)), 0.01, 0.02, 0.0, 0.2, 4, 2))
    run.add(Cycle(1, 4, (4, 5, 6), 3, (Token(4, "\t", "draft"), Token(5, "}", "draft"), Token(6, "😀", "draft"),
                                       Token(3, "y", "target")), 0.01, 0.02, 0.0, 0.3, 8, 5))
    return run


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
    assert html.count('class="tk tk-') == 8 + 4  # one span per token (even a "" one), + the legend
    assert "drafter proposed &#x27;P9&#x27;, target chose &#x27;é&#x27;" in html
    assert run.n_tokens == 8 and run.tok_s() == pytest.approx(7 / 0.2)


def _summary(mode, ids, finish="length"):
    return Summary(mode, 4, tuple(ids), "", len(ids), len(ids), 1.0, 0.0, (0,) * len(ids), (0.0,) * 3, 5, 0.1,
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
    assert [sum(t.y[i] for t in bars) for i in range(2)] == [3, 4]
    assert list(acceptance_histogram(run).data[0].y) == [0, 0, 1, 1]
    assert list(position_chart(run).data[0].y) == [1.0, 1.0, 0.5]
    assert len(race_chart([run]).data) == 2
    assert "–" in metrics_html(None, None)


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
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port), *pair_args(tmp)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)
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


def final(updates: list) -> list:
    """The last real value of each output (skipped outputs arrive as {'__type__': 'update'})."""
    last = [None] * len(updates[0])
    for out in updates:
        for i, v in enumerate(out):
            if not (isinstance(v, dict) and v.get("__type__") == "update"):
                last[i] = v
    return last


def race(c, **kw) -> tuple[list, list]:
    job = c.submit(**{**SHORT, **kw}, api_name="/run")
    updates = list(job)
    return updates, final(updates)


def test_generation_end_to_end(app_url):
    updates, (status, target_pane, dflash_pane, verdict, metrics, race_plot, *plots, data) = race(client(app_url))
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
    assert all(p and p["type"] == "plotly" for p in (race_plot, *plots))
    assert len(updates) > 4  # streamed, not only the end


def test_adaptive_verify_length(app_url):
    _, (status, *_, data) = race(client(app_url), adaptive=True, max_tokens=12)
    assert status.startswith("✓ Done"), status
    assert data["target"]["token_ids"] == data["dflash"]["token_ids"]


def test_bad_input_stop_and_queueing(app_url):
    c = client(app_url)
    assert "empty" in race(c, prompt="   ")[1][0]
    assert "neither a directory nor a Hub repo id" in race(c, choice=CUSTOM, custom_target="/no/such/model",
                                                              custom_draft="/no/such/drafter")[1][0]
    assert "no known DFlash drafter" in race(c, choice=CUSTOM, custom_target="org/Unknown-Model-1B")[1][0]
    with pytest.raises(Exception, match="maximum"):
        c.predict(**{**SHORT, "max_tokens": 10**6}, api_name="/run")

    # Stop: a long run is cancelled once it streams; the worker stops within a cycle
    long = c.submit(**{**SHORT, "max_tokens": 1000}, api_name="/run")
    while not (long.outputs() and "Running" in str(long.outputs()[-1][0])):
        time.sleep(0.1)
    time.sleep(1.0)
    long.cancel()
    stopped = time.monotonic()

    # two sessions at once: they queue (never overlap) and both get the target's own output
    clients, spans = [client(app_url), client(app_url)], {}

    def go(i):
        job = clients[i].submit(**SHORT, api_name="/run")
        for out in job:
            if isinstance(out[0], str) and out[0].startswith("▶"):
                spans.setdefault(i, [time.monotonic(), None])
        spans[i][1] = time.monotonic()
        spans[i].append(final(list(job.outputs())))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    (a0, a1, a), (b0, b1, b) = sorted(spans.values())
    assert a0 - stopped < 10, "the stopped run kept the worker busy"
    assert a1 <= b0 + 0.5, "two sessions ran at the same time"
    assert a[-1]["dflash"]["token_ids"] == b[-1]["dflash"]["token_ids"] == a[-1]["target"]["token_ids"]
