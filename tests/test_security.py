"""A web page must not drive the local servers: the attacker's requests against `serve`'s app
and the playground's (UI + /v1), on tiny random models, through a real HTTP client."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import requests

import app as playground
from dflash.guard import Guard, is_loopback
from dflash.openai_request import MAX_BODY_BYTES
from dflash.server import create_app
from dflash.worker import Worker
from tests.test_server import _serve
from tests.tiny import tiny_drafter, tiny_pair

EVIL = "http://evil.example"
BODY = {"prompt": "x", "max_tokens": 2}


def tiny_worker() -> Worker:
    return Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter()))


@pytest.fixture(scope="module")
def api():
    server, thread, url = _serve(create_app(tiny_worker(), model="tiny-llama"))
    yield url
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def ui():
    """The playground's app as `python app.py` mounts it (bound to 127.0.0.1)."""
    worker = tiny_worker()
    args = SimpleNamespace(model="tiny-llama", draft="tiny-drafter", host="127.0.0.1", allow_origin=[])
    server, thread, url = _serve(playground.mount(playground.build_demo(worker, "tiny-llama", "tiny-drafter"),
                                                  worker, args))
    yield url
    server.should_exit = True
    thread.join(10)


def refused(r: requests.Response, status: int, code: str) -> bool:
    err = r.json()["error"]
    return r.status_code == status and err["code"] == code and "access-control-allow-origin" not in r.headers


def test_a_foreign_page_cannot_start_a_generation(api, ui):
    for url in (api, ui):
        r = requests.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                          headers={"Origin": EVIL}, timeout=60)
        assert refused(r, 403, "forbidden_origin"), r.text
        r = requests.post(url + "/v1/completions", json=BODY, headers={"Origin": "null"}, timeout=60)  # sandboxed
        assert refused(r, 403, "forbidden_origin")
    # the playground's own page (same origin, or localhost for 127.0.0.1 on the same port) may
    port = ui.rsplit(":", 1)[1]
    for origin in (ui, f"http://localhost:{port}"):
        assert requests.post(ui + "/v1/completions", json=BODY, headers={"Origin": origin}, timeout=60).ok
    r = requests.post(ui + "/v1/completions", json=BODY, headers={"Origin": "http://localhost:1"}, timeout=60)
    assert refused(r, 403, "forbidden_origin")  # another local service's page is foreign too


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x",
                                  None])
def test_posts_that_a_browser_sends_without_asking_are_refused(api, ui, kind):
    """Simple requests (no CORS preflight): the attack needs no Origin check to fail."""
    headers = {"Content-Type": kind} if kind else {}
    for url, path in ((api, "/v1/completions"), (ui, "/v1/completions"), (ui, "/gradio_api/call/run")):
        r = requests.post(url + path, data=json.dumps(BODY).encode(), headers=headers, timeout=60)
        assert refused(r, 415, "unsupported_media_type"), (path, r.text)
    assert requests.post(api + "/v1/completions", json=BODY, timeout=60).ok  # JSON is fine


def test_dns_rebinding_host_is_refused_on_loopback(api, ui):
    for url, path in ((api, "/v1/completions"), (ui, "/v1/completions"), (ui, "/gradio_api/call/run"),
                      (ui, "/gradio_api/call/choose")):
        r = requests.post(url + path, json=BODY, timeout=60,
                          headers={"Host": "attacker.example:7860", "Origin": "http://attacker.example:7860"})
        assert refused(r, 403, "forbidden_host"), (path, r.text)
    assert requests.get(ui + "/", headers={"Host": "attacker.example"}, timeout=60).status_code == 403
    assert requests.get(ui + "/", headers={"Host": "localhost"}, timeout=60).ok


def test_no_upload_and_no_big_bodies(ui):
    r = requests.post(ui + "/gradio_api/upload", files={"files": ("x.bin", b"x" * 4096)}, timeout=60)
    assert refused(r, 403, "uploads_off")
    big = json.dumps({"data": ["x" * (MAX_BODY_BYTES + 1)]})
    for path in ("/gradio_api/call/run", "/v1/completions"):
        r = requests.post(ui + path, data=big, headers={"Content-Type": "application/json"}, timeout=60)
        assert refused(r, 413, "request_too_large"), path


def test_a_chunked_body_is_counted(api):
    def chunks():
        for _ in range(3):
            yield b" " * MAX_BODY_BYTES
    r = requests.post(api + "/v1/completions", data=chunks(), headers={"Content-Type": "application/json"},
                      timeout=60)
    assert refused(r, 413, "request_too_large")


def test_the_playground_api_refuses_huge_or_broken_prompts():
    with pytest.raises(ValueError, match="characters"):
        playground.parse_settings("x" * (playground.MAX_PROMPT_CHARS + 1), 8, 4, 0, 0)
    with pytest.raises(ValueError, match="surrogate"):
        playground.parse_settings("hi \ud800", 8, 4, 0, 0)
    playground.parse_settings("x" * playground.MAX_PROMPT_CHARS, 8, 4, 0, 0)


def test_an_allowed_origin_can_call_and_read():
    server, thread, url = _serve(create_app(tiny_worker(), allow_origins=["http://localhost:3000"]))
    try:
        pre = requests.options(url + "/v1/completions", timeout=60, headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert pre.ok and pre.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = requests.post(url + "/v1/completions", json=BODY, headers={"Origin": "http://localhost:3000"}, timeout=60)
        assert r.ok and r.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = requests.post(url + "/v1/completions", json=BODY, headers={"Origin": EVIL}, timeout=60)
        assert refused(r, 403, "forbidden_origin")
    finally:
        server.should_exit = True
        thread.join(10)


def test_opting_in():
    def ok(guard, host, origin=None, kind="application/json"):
        headers = [(b"host", host.encode()), (b"content-type", kind.encode())]
        headers += [(b"origin", origin.encode())] if origin else []
        return guard.refusal({"type": "http", "method": "POST", "path": "/v1/completions", "headers": headers}) is None

    lan = Guard(None, bind="0.0.0.0")
    assert ok(lan, "192.168.1.5:8000") and ok(lan, "192.168.1.5:8000", "http://192.168.1.5:8000")
    assert not ok(lan, "192.168.1.5:8000", EVIL)
    proxied = Guard(None, allow_origins=["https://llm.example.com/"])
    assert ok(proxied, "llm.example.com", "https://llm.example.com") and not ok(proxied, "evil.example")
    assert not ok(Guard(None), "llm.example.com")
    anything = Guard(None, allow_origins=["*"])
    assert ok(anything, "attacker.example", EVIL) and not ok(anything, "localhost", kind="text/plain")
    assert is_loopback("127.0.0.2") and is_loopback("[::1]") and is_loopback("app.localhost")
    assert not is_loopback("localhost.evil.example") and not is_loopback("")


def test_a_checked_header_sent_twice_is_refused():
    """Round 3: a second Content-Type got past a guard that read the last one."""
    scope = {"type": "http", "method": "POST", "path": "/v1/completions",
             "headers": [(b"host", b"localhost"), (b"content-type", b"text/plain"),
                         (b"content-type", b"application/json")]}
    assert Guard(None).refusal(scope)[:2] == (400, "duplicate_header")
