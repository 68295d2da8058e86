"""The HTTP server against tiny random models, through a real HTTP client on a free port."""

from __future__ import annotations

import json
import random
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import uvicorn

from dflash.registry import BUILTIN_DRAFTER
from dflash.openai_request import MAX_CHARS_PER_TOKEN, MAX_STOP_CHARS
from dflash.server import ShortestFirst, StopCutter, create_app
from dflash.worker import Worker
from tests.tiny import tiny_drafter, tiny_pair


def _serve(app, server_class=uvicorn.Server):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = server_class(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="module")
def url():
    # the loader runs on the worker thread, like the real one
    worker = Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter()))
    server, thread, base = _serve(create_app(worker, model="tiny-llama"))
    yield base
    server.should_exit = True
    thread.join(10)


TIMEOUT = 600  # generous: the embedded pair is slow on a busy CPU
JSON = {"Content-Type": "application/json"}


def post(url, path, **body):
    return requests.post(url + path, json=body, timeout=TIMEOUT)


def sse(url, path, **body):
    """(chunks, saw_done) of a streaming request."""
    with requests.post(url + path, json={**body, "stream": True}, stream=True, timeout=TIMEOUT) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [l for l in r.iter_lines(decode_unicode=True) if l.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(l[6:]) for l in lines[:-1]]


def metrics(url):
    return requests.get(url + "/metrics", timeout=10).json()


def streamed_text(chunks, chat):
    if chat:
        return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    return "".join(c["choices"][0]["text"] for c in chunks)


def test_models(url):
    data = requests.get(url + "/v1/models", timeout=10).json()["data"]
    assert [m["id"] for m in data] == ["tiny-llama"]


@pytest.mark.parametrize("names", [(None, None), ("{tmp}/My-Model", "{tmp}/my-drafter")])
def test_models_show_no_paths_of_this_machine(tmp_path, names):
    model, draft = (n and n.format(tmp=tmp_path) for n in names)
    server, thread, base = _serve(create_app(Worker(loader=None), model, draft))
    try:
        text = requests.get(base + "/v1/models", timeout=10).text
    finally:
        server.should_exit = True
        thread.join(10)
    (m,) = json.loads(text)["data"]
    assert str(tmp_path) not in text and str(BUILTIN_DRAFTER.parent) not in text
    if model:
        assert (m["id"], m["dflash"]["draft"]) == ("My-Model", "my-drafter")
    else:
        assert m["dflash"]["draft"] == BUILTIN_DRAFTER.name


def test_completion_and_chat_streaming_equal_whole(url):
    for path, chat, req in [("/v1/completions", False, {"prompt": "hello"}),
                            ("/v1/chat/completions", True, {"messages": [
                                {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})]:
        whole = post(url, path, max_tokens=20, **req).json()
        choice = whole["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        assert whole["object"] == ("chat.completion" if chat else "text_completion")
        assert text and choice["finish_reason"] == "length"
        assert whole["usage"]["completion_tokens"] == 20 == whole["dflash"]["tokens"]
        assert whole["usage"]["total_tokens"] == whole["usage"]["prompt_tokens"] + 20
        assert set(whole["dflash"]) >= {"tau", "acceptance_rate", "cycles", "decode_tok_s", "mode"}
        assert whole["dflash"]["mode"] == "dflash" and 1.0 <= whole["dflash"]["tau"]

        chunks = sse(url, path, max_tokens=20, **req)
        assert streamed_text(chunks, chat) == text
        if chat:
            assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        last = chunks[-1]
        assert last["choices"][0]["finish_reason"] == "length" and last["usage"] == whole["usage"]
        assert all(c["id"] == last["id"] for c in chunks)

        # the same output from the target alone (greedy decoding is lossless)
        target = post(url, path, max_tokens=20, mode="target", **req).json()
        assert target["dflash"]["mode"] == "target"
        assert target["choices"][0] == choice


def test_stop_strings(url):
    full = post(url, "/v1/completions", prompt="abc", max_tokens=30).json()["choices"][0]["text"]
    stop = full[14:19]  # spans token boundaries: "<id>" texts
    cut = full[: full.find(stop)]
    for stream in (False, True):
        if stream:
            chunks = sse(url, "/v1/completions", prompt="abc", max_tokens=30, stop=[stop, "never"])
            text, finish = streamed_text(chunks, False), chunks[-1]["choices"][0]["finish_reason"]
        else:
            r = post(url, "/v1/completions", prompt="abc", max_tokens=30, stop=[stop, "never"]).json()
            text, finish = r["choices"][0]["text"], r["choices"][0]["finish_reason"]
            rec = next(x for x in metrics(url)["requests"] if x["id"] == r["id"])
            assert rec["tokens"] == r["usage"]["completion_tokens"] < r["dflash"]["tokens"]
        assert (text, finish) == (cut, "stop")
    # a stop string that starts like the output but never completes: all text, held back then sent
    chunks = sse(url, "/v1/completions", prompt="abc", max_tokens=30, stop=full[-3:] + "#")
    assert streamed_text(chunks, False) == full


def test_stop_cutter_holds_back_prefixes():
    c = StopCutter(("STOP",))
    assert [c.add(p) for p in ["ab", "cS", "T", "x", "yST", "OPz"]] == ["ab", "c", "", "STx", "y", ""]
    assert c.stopped and c.text == "abcSTxy"


class QuadraticCutter(StopCutter):
    """The former StopCutter, the reference: a `find` per stop and a suffix scan per token."""

    def add(self, piece: str) -> str:
        if self.stopped:
            return ""
        self.text += piece
        hits = [i for s in self.stops if (i := self.text.find(s, self.sent)) >= 0]
        if hits:
            self.text, self.stopped = self.text[: min(hits)], True
            return self.flush()
        hold = max((k for s in self.stops for k in range(1, len(s)) if self.text.endswith(s[:k])), default=0)
        return self._release(max(self.sent, len(self.text) - hold))


def test_stop_cutter_matches_the_reference_on_random_pieces():
    rng = random.Random(0)
    for _ in range(3000):
        stops = tuple("".join(rng.choices("ab", k=rng.randint(1, 5))) for _ in range(rng.randint(1, 3)))
        pieces = ["".join(rng.choices("abc", k=rng.randint(0, 4))) for _ in range(rng.randint(1, 8))]
        fast, slow = StopCutter(stops), QuadraticCutter(stops)
        assert [fast.add(p) for p in pieces] == [slow.add(p) for p in pieces], (stops, pieces)
        assert (fast.flush(), fast.text, fast.stopped) == (slow.flush(), slow.text, slow.stopped)


def test_long_stop_strings_cost_linear_time():
    """Four stops of the longest length, each one character from matching at every token: the
    former cutter took 4 s here (quadratic in the stop's length, per token), this one 15 ms."""
    stops = tuple("a" * (MAX_STOP_CHARS - 1) + end for end in "bcde")
    c, t = StopCutter(stops), time.perf_counter()
    sent = "".join(c.add("a") for _ in range(4000))
    assert time.perf_counter() - t < 1.0
    assert sent == "a" * (4000 - MAX_STOP_CHARS + 1) and not c.stopped  # a possible stop's start held back
    assert c.add("b") == "" and c.stopped and c.text == sent


BAD = [  # (path, body, status, param)
    ("/v1/chat/completions", "{not json", 400, None),
    ("/v1/chat/completions", [1, 2], 400, None),
    ("/v1/chat/completions", {}, 400, "messages"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
    ("/v1/completions", {}, 400, "prompt"),
    ("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10**6}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": 11}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, 400, "top_p"),
    ("/v1/completions", {"prompt": "x", "seed": -1}, 400, "seed"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "x", "stop": [""]}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "mode": "fast"}, 400, "mode"),
    ("/v1/completions", {"prompt": "x", "n": 2}, 400, "n"),
    ("/v1/completions", {"prompt": "x", "model": "gpt-4"}, 404, "model"),
    ("/v1/completions", {"prompt": "x", "block_size": 99}, 400, "block_size"),  # drafter's block: 8
    ("/v1/completions", {"prompt": "x", "tree": 65}, 400, "tree"),
    ("/v1/completions", {"prompt": "x", "tree": "auto"}, 400, "tree"),  # omit it for auto
    ("/v1/completions", {"prompt": "x", "lookup": "no"}, 400, "lookup"),
    ("/v1/completions", {"prompt": [1000]}, 400, "prompt"),  # outside the vocabulary
    ("/v1/completions", {"prompt": "x" * 600, "max_tokens": 8}, 400, None),  # past the context
    ("/v1/completions", {"prompt": "x" * 600, "max_tokens": 8, "stream": True}, 400, None),
    # not Unicode text, and too deep: bad input, not a server fault
    ("/v1/completions", '{"prompt": "hi \\ud800 there"}', 400, "prompt"),
    ("/v1/completions", '{"prompt": "hi \\udfff", "stream": true}', 400, "prompt"),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "a\\ud800"}]}', 400,
     "messages[0].content"),
    ("/v1/completions", "[" * 100000 + "]" * 100000, 400, None),
    ("/v1/completions", '{"prompt": "x", "metadata": ' + "[" * 40 + "]" * 40 + "}", 400, None),
    # numbers Python's float cannot hold, stop strings past their bound
    ("/v1/completions", '{"prompt": "x", "temperature": 1' + "0" * 400 + "}", 400, "temperature"),
    ("/v1/completions", '{"prompt": "x", "top_p": 1' + "0" * 400 + "}", 400, "top_p"),
    ("/v1/completions", {"prompt": "x", "stop": "s" * (MAX_STOP_CHARS + 1)}, 400, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    # what we cannot honour is refused by name, never silently ignored
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": True}, 400, "logprobs"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
     400, "tools"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "response_format": {"type": "json_object"}}, 400, "response_format"),
    ("/v1/completions", {"prompt": "x", "logprobs": 0}, 400, "logprobs"),
    ("/v1/completions", {"prompt": "x", "echo": True}, 400, "echo"),
    ("/v1/completions", {"prompt": "x", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ("/v1/completions", {"prompt": "x", "max_token": 5}, 400, "max_token"),  # a typo, not ignored
]


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(url):
    before = requests.get(url + "/metrics", timeout=10).json()["totals"]["errors"]
    for path, body, status, param in BAD:
        kw = {"data": body, "headers": JSON} if isinstance(body, str) else {"json": body}
        r = requests.post(url + path, timeout=60, **kw)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        assert err["type"] == "invalid_request_error" and err["param"] == param, (body, err)
    assert requests.get(url + "/v1/nothing", timeout=10).json()["error"]["message"]
    seed = post(url, "/v1/completions", prompt="x", seed=2**64).json()["error"]["message"]
    ten = post(url, "/v1/completions", prompt="x", max_tokens="ten").json()["error"]["message"]
    assert "0..2**63-1" in seed and "must be an integer" in ten, (seed, ten)  # the engine's range
    before += 2
    assert requests.get(url + "/metrics", timeout=10).json()["totals"]["errors"] == before + len(BAD)
    assert post(url, "/v1/completions", prompt="x", max_tokens=4).json()["usage"]["completion_tokens"] == 4


def test_tiny_temperature_or_top_p_is_the_greedy_answer(url):
    """1e-300 is 0 in float32: the sampler used to divide by it and answer "" (finish "stop")."""
    greedy = post(url, "/v1/completions", prompt="abc", max_tokens=12).json()["choices"][0]
    for fields in ({"temperature": 1e-300}, {"temperature": 1e-45}, {"temperature": 1e-30},
                   {"temperature": 1.0, "top_p": 1e-300}):
        r = post(url, "/v1/completions", prompt="abc", max_tokens=12, **fields).json()
        assert r["choices"][0] == greedy, fields


def test_a_prompt_too_long_for_any_tokenization_is_refused_before_tokenizing(url):
    n = MAX_CHARS_PER_TOKEN * 512 + 1  # the tiny target's context: 512
    r = post(url, "/v1/completions", prompt="x" * n, max_tokens=1)
    assert r.status_code == 400 and f"prompt's {n} characters cannot fit" in r.json()["error"]["message"]
    r = post(url, "/v1/completions", prompt=[5] * 600, max_tokens=1)  # token ids: counted as they are
    assert r.status_code == 400 and "prompt (600 tokens)" in r.json()["error"]["message"]


def test_tokenizing_goes_to_the_shortest_prompt_first():
    gate, order, ready = ShortestFirst(), [], threading.Event()

    def tokenize(size):
        with gate.turn(size):
            ready.set()
            order.append(size)
            time.sleep(0.2 if size == 10**6 else 0)

    first = threading.Thread(target=tokenize, args=(10**6,))
    first.start()
    ready.wait()
    queued = [threading.Thread(target=tokenize, args=(size,)) for size in (10**6 - 1, 900_000, 20)]
    for t in queued:
        t.start()
        time.sleep(0.02)
    for t in [first, *queued]:
        t.join()
    assert order == [10**6, 20, 900_000, 10**6 - 1]


def test_tree_field(url):
    """`tree`: drafted nodes per pass (0 = the chain); the response and /metrics say how drafts
    were verified; every setting gives the target's own output."""
    target = post(url, "/v1/completions", prompt="trees", max_tokens=16, mode="target").json()
    for tree, verify in [(None, "tree auto"), ({"lookup": False}, "tree auto"), (0, "chain"), (6, "tree 6")]:
        body = tree if isinstance(tree, dict) else {} if tree is None else {"tree": tree}
        r = post(url, "/v1/completions", prompt="trees", max_tokens=16, **body).json()
        assert r["dflash"]["verify"].startswith(verify) and "note" not in r["dflash"]
        assert r["choices"][0]["text"] == target["choices"][0]["text"]
    rec = next(x for x in requests.get(url + "/metrics", timeout=10).json()["requests"] if x["id"] == r["id"])
    assert rec["verify"] == "tree 6"


def test_a_hybrid_target_says_it_verifies_the_chain():
    worker = Worker(loader=lambda model, draft, progress: tiny_pair("qwen3_next", tiny_drafter()))
    server, thread, base = _serve(create_app(worker, model="tiny-hybrid"))
    try:
        r = post(base, "/v1/completions", prompt="trees", max_tokens=6, tree=8).json()
        rec = requests.get(base + "/metrics", timeout=10).json()["requests"][-1]
    finally:
        server.should_exit = True
        thread.join(10)
    assert r["dflash"]["verify"].startswith("chain") and "GatedDeltaNet" in r["dflash"]["note"]
    assert rec["note"] == r["dflash"]["note"]


def test_metrics(url):
    r = post(url, "/v1/completions", prompt="metrics", max_tokens=9).json()
    m = requests.get(url + "/metrics", timeout=10).json()
    rec = next(x for x in m["requests"] if x["id"] == r["id"])
    assert rec["tokens"] == 9 and rec["finish_reason"] == "length"
    assert rec["tokens_per_cycle"] == r["dflash"]["tau"] and rec["cycles"] == r["dflash"]["cycles"]
    assert {"acceptance_rate", "decode_tok_s", "ttft_s"} <= set(rec)
    t = m["totals"]
    assert t["requests"] == len(m["requests"]) and t["tokens"] == sum(x["tokens"] for x in m["requests"])
    assert t["cycles"] == sum(x["cycles"] for x in m["requests"]) and t["tokens_per_cycle"] >= 1.0
    assert set(t["by_mode"]) == {"dflash", "target"}
    short = t["by_mode"]["dflash"]["by_context"]["0-511"]  # tau by prompt length
    assert short["requests"] == t["by_mode"]["dflash"]["requests"] and short["tokens_per_cycle"] >= 1.0


def test_metrics_buckets_requests_by_prompt_length():
    from dflash.metrics import context_bucket
    assert [context_bucket(n) for n in (0, 511, 512, 2047, 2048, 4095, 4096, 8000)] == [
        "0-511", "0-511", "512-1023", "1024-2047", "2048-4095", "2048-4095", "4096+", "4096+"]


def test_concurrent_requests_queue_and_match_alone(url):
    prompts = ["two two", "four", "alpha", "gamma"]
    alone = [post(url, "/v1/completions", prompt=p, max_tokens=12).json()["choices"][0]["text"] for p in prompts]
    assert len(set(alone)) == 4  # a mix-up between requests would show

    def run(i):
        if i % 2:
            return streamed_text(sse(url, "/v1/completions", prompt=prompts[i], max_tokens=12), False)
        return post(url, "/v1/completions", prompt=prompts[i], max_tokens=12).json()["choices"][0]["text"]

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(run, range(4))) == alone


def test_client_disconnect_cancels_generation(url):
    with requests.post(url + "/v1/completions", json={"prompt": "long", "max_tokens": 400, "stream": True},
                       stream=True, timeout=60) as r:
        first = next(l for l in r.iter_lines(decode_unicode=True) if l.startswith("data: "))
    rid = json.loads(first[6:])["id"]
    for _ in range(500):
        recs = [x for x in requests.get(url + "/metrics", timeout=10).json()["requests"] if x["id"] == rid]
        if recs:
            break
        time.sleep(0.02)
    assert recs[0]["finish_reason"] == "cancelled" and recs[0]["tokens"] < 400
    assert post(url, "/v1/completions", prompt="x", max_tokens=4).status_code == 200


def slow_loader(started: threading.Event):
    """A tiny pair whose target takes 50 ms a step: a 400-token generation runs for 20 s, so a
    test can act while it runs (`started` is set at its first step)."""
    def loader(model, draft, progress):
        pair = tiny_pair("llama", tiny_drafter())
        forward = pair.target.forward

        def slow(*args, **kw):
            started.set()
            time.sleep(0.05)
            return forward(*args, **kw)

        pair.target.forward = slow
        return pair
    return loader


@pytest.fixture(scope="module")
def slow():
    started = threading.Event()
    server, thread, base = _serve(create_app(Worker(loader=slow_loader(started)), model="tiny-llama"))
    # load the pair first: its load runs the planner's probe through the slow forward, which
    # would set `started` before a test's own generation began
    assert post(base, "/v1/completions", prompt="x", max_tokens=1, mode="target").status_code == 200
    yield base, started
    server.should_exit = True
    thread.join(10)


LONG = {"prompt": "long", "max_tokens": 400, "mode": "target"}


def record(base, rid=None, after=None):
    """The /metrics record of request `rid` (or of the first request after `after` requests),
    waiting until the generation has ended."""
    for _ in range(3000):
        m = metrics(base)
        recs = [x for x in m["requests"] if x["id"] == rid] if rid else (
            m["requests"][after - m["totals"]["requests"]:] if m["totals"]["requests"] > after else [])
        if recs:
            return recs[0]
        time.sleep(0.02)
    raise AssertionError("no record")


def test_non_streaming_client_that_leaves_cancels_its_generation(slow):
    base, started = slow
    before = metrics(base)["totals"]["requests"]
    started.clear()
    host, port = base.removeprefix("http://").split(":")
    body = json.dumps(LONG).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert started.wait(60)
    rec = record(base, after=before)
    assert rec["finish_reason"] == "cancelled" and rec["tokens"] < 400


def test_refusals_and_empty_answers_do_not_wait_for_the_worker(slow):
    """Checked before queueing: answered while another generation holds the worker."""
    base, _ = slow
    with requests.post(base + "/v1/completions", json={**LONG, "stream": True}, stream=True, timeout=60) as busy:
        rid = json.loads(next(l for l in busy.iter_lines() if l.startswith(b"data: "))[6:])["id"]
        for body, param in [({"prompt": "x" * 600}, None), ({"prompt": "x", "block_size": 99}, "block_size"),
                            ({"prompt": [1000]}, "prompt")]:
            r = post(base, "/v1/completions", **body)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        empty = post(base, "/v1/completions", prompt="x", max_tokens=0).json()
        assert empty["choices"][0]["text"] == "" and empty["choices"][0]["finish_reason"] == "length"
        assert empty["usage"] == {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}
    assert record(base, rid)["finish_reason"] == "cancelled"  # the busy one was still running


def test_sigterm_ends_open_requests_and_the_server():
    """Even while the worker is stuck in a step that cannot be cancelled (a long cycle): open
    requests get 503 at once and the server exits."""
    from dflash.engine import warm
    from dflash.server import Server

    release, calls = threading.Event(), []

    def loader(model, draft, progress):
        pair = tiny_pair("llama", tiny_drafter())
        warm(pair)  # the planner's cost probe, which the worker runs after a load, runs free
        forward = pair.target.forward

        def stuck(*args, **kw):  # the prefill runs; the first cycle waits for `release`
            calls.append(1)
            if len(calls) > 1:
                release.wait(60)
            return forward(*args, **kw)

        pair.target.forward = stuck
        return pair

    app = create_app(Worker(loader=loader), model="tiny-llama")
    server, thread, base = _serve(app, Server)
    try:
        with ThreadPoolExecutor(1) as pool, \
                requests.post(base + "/v1/completions", json={**LONG, "stream": True}, stream=True, timeout=60) as running:
            lines = (l for l in running.iter_lines() if l.startswith(b"data: "))
            next(lines)  # the prefill's token
            queued = pool.submit(post, base, "/v1/completions", **LONG)
            for _ in range(3000):  # until the second request waits behind the first
                if len(app.state.api.jobs) == 2:
                    break
                time.sleep(0.01)
            server.handle_exit(signal.SIGTERM, None)
            rest = list(lines)
            r = queued.result(60)
        assert json.loads(rest[-2][6:])["error"]["code"] == "shutting_down" and rest[-1] == b"data: [DONE]"
        assert r.status_code == 503 and r.json()["error"]["code"] == "shutting_down"
        thread.join(60)
        assert not thread.is_alive()
    finally:
        release.set()


def test_sigterm_does_not_wait_for_a_playground_tab():
    """A playground tab keeps Gradio's heartbeat stream open for as long as it lives: SIGTERM
    stops the server within its short grace anyway (the whole 5-s grace it had, before)."""
    import gradio as gr

    from dflash.server import Server, server_config

    app = create_app(Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter())),
                     model="tiny-llama")
    with gr.Blocks() as demo:
        gr.Markdown("a tab")
    app = gr.mount_gradio_app(app, demo, path="/")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = Server(server_config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with requests.get(base + "/gradio_api/heartbeat/tab", stream=True, timeout=30) as tab:
        assert tab.status_code == 200
        threading.Thread(target=lambda: [None for _ in tab.iter_lines()], daemon=True).start()
        time.sleep(0.5)
        t = time.monotonic()
        server.handle_exit(signal.SIGTERM, None)
        thread.join(10)
        assert not thread.is_alive() and time.monotonic() - t < 3  # within the grace (1 s)


def test_upload_cut_short_is_not_a_server_error(url):
    before = metrics(url)["totals"]["errors"]
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"pro")
    assert post(url, "/v1/completions", prompt="x", max_tokens=4).status_code == 200
    assert metrics(url)["totals"]["errors"] == before


def test_server_fault_is_5xx_and_not_fatal():
    calls = []

    def loader(model, draft, progress):  # fails once, then works
        calls.append(model)
        if len(calls) == 1:
            raise RuntimeError("disk on fire")
        return tiny_pair("llama", tiny_drafter())

    server, thread, base = _serve(create_app(Worker(loader=loader), model="tiny-llama"))
    try:
        r = post(base, "/v1/completions", prompt="x", max_tokens=4)
        assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
        assert post(base, "/v1/completions", prompt="x", max_tokens=4).status_code == 200
        assert requests.get(base + "/metrics", timeout=10).json()["totals"]["errors"] == 1
    finally:
        server.should_exit = True
        thread.join(10)


def check_real_pair(base):
    """Chat through a real tokenizer and chat template: streamed == whole == target-only."""
    req = {"messages": [{"role": "user", "content": "List the first five prime numbers."}], "max_tokens": 8}
    whole = post(base, "/v1/chat/completions", **req).json()
    text = whole["choices"][0]["message"]["content"]
    assert text and whole["dflash"]["tau"] >= 1.0
    assert streamed_text(sse(base, "/v1/chat/completions", **req), True) == text
    assert post(base, "/v1/chat/completions", mode="target", **req).json()["choices"][0]["message"]["content"] == text


@pytest.mark.slow
@pytest.mark.skipif(not (BUILTIN_DRAFTER / "config.json").exists(), reason="embedded drafter not built yet")
def test_embedded_pair():
    server, thread, base = _serve(create_app(Worker()))
    try:
        check_real_pair(base)
    finally:
        server.should_exit = True
        thread.join(10)
