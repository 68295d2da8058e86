"""Adversarial round 3 (issue 53): trying to get past the guard and the input bounds.

Starts `serve`'s app and the playground's app (as `python app.py` mounts them, bound to
127.0.0.1) on tiny random models in this process, plays each case, and prints one markdown row
per case: what was sent, what a safe server must answer, what it answered, held or FAILED.

    python lab/adversarial/round3_guard.py
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import app as playground  # noqa: E402
from dflash.server import create_app  # noqa: E402
from dflash.worker import Worker  # noqa: E402
from tests.test_server import _serve  # noqa: E402
from tests.tiny import tiny_drafter, tiny_pair  # noqa: E402

JSON = {"Content-Type": "application/json"}
BODY = json.dumps({"prompt": "x", "max_tokens": 2})


def worker():
    return Worker(loader=lambda model, draft, progress: tiny_pair("llama", tiny_drafter()))


def raw(url: str, request: bytes) -> int:
    """Send bytes as they are (headers requests would fix); the status code answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        return int(s.recv(4096).split(b" ", 2)[1])


def cases(api: str, ui: str):
    """(what, expected status or predicate, thunk returning a requests.Response or a status)."""
    port = ui.rsplit(":", 1)[1]
    post = requests.post
    yield "Origin http://127.0.0.1.evil.example", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Origin": "http://127.0.0.1.evil.example"})
    yield f"Origin http://localhost:{port}.evil.example", 403, lambda: post(
        ui + "/v1/completions", data=BODY, headers={**JSON, "Origin": f"http://localhost:{port}.evil.example"})
    yield f"Origin https://127.0.0.1:{port} (other scheme, same port)", 200, lambda: post(
        ui + "/v1/completions", data=BODY, headers={**JSON, "Origin": f"https://127.0.0.1:{port}"})
    yield "Origin HTTP://EVIL.EXAMPLE (case)", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Origin": "HTTP://EVIL.EXAMPLE"})
    yield "Origin file:// page", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Origin": "file://"})
    yield "GET /metrics from a foreign Origin (reads usage)", 403, lambda: requests.get(
        api + "/metrics", headers={"Origin": "http://evil.example"})
    yield "GET /v1/models from a foreign Origin", 403, lambda: requests.get(
        api + "/v1/models", headers={"Origin": "http://evil.example"})
    yield "CORS preflight from a foreign Origin", 403, lambda: requests.options(
        api + "/v1/completions", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    yield "Host localhost. (trailing dot)", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Host": "localhost."})
    yield "Host 127.0.0.1.nip.io (resolves to loopback)", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Host": "127.0.0.1.nip.io"})
    yield "Host 2130706433 (127.0.0.1 as an integer)", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Host": "2130706433"})
    yield "Host localhost:8000@evil.example", 403, lambda: post(
        api + "/v1/completions", data=BODY, headers={**JSON, "Host": "localhost:8000@evil.example"})
    yield "no Host header (HTTP/1.0)", 403, lambda: raw(
        api, b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(BODY), BODY.encode()))
    yield "two Host headers, loopback first", (400, 403), lambda: raw(
        api, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n")
    yield "Host [::1]:8000", 200, lambda: requests.get(api + "/v1/models", headers={"Host": "[::1]:8000"})
    yield "Content-Type text/json", 415, lambda: post(
        api + "/v1/completions", data=BODY, headers={"Content-Type": "text/json"})
    yield "Content-Type application/jsonx", 415, lambda: post(
        api + "/v1/completions", data=BODY, headers={"Content-Type": "application/jsonx"})
    yield "Content-Type application/json; charset=utf-8", 200, lambda: post(
        api + "/v1/completions", data=BODY, headers={"Content-Type": "application/json; charset=utf-8"})
    yield "Content-Type text/plain; x=application/json", 415, lambda: post(
        api + "/v1/completions", data=BODY, headers={"Content-Type": "text/plain; x=application/json"})
    yield "two Content-Type headers, JSON second", (400, 415), lambda: raw(
        api, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY.encode()))
    yield "Content-Length -1", (400, 413), lambda: raw(
        api, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: -1\r\n\r\n")
    yield "Content-Length 10**30", (400, 413), lambda: raw(
        api, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000000000000000000000000000\r\n\r\n")
    yield "PUT /v1/completions (JSON)", 405, lambda: requests.put(api + "/v1/completions", data=BODY, headers=JSON)
    yield "upload at /gradio_api/upload/ (trailing slash)", 403, lambda: post(
        ui + "/gradio_api/upload/", files={"files": ("a", b"x")})
    yield "upload with Content-Type application/json", 403, lambda: post(
        ui + "/gradio_api/upload", data="{}", headers=JSON)
    yield "GET /gradio_api/file=/etc/passwd", (403, 404), lambda: requests.get(ui + "/gradio_api/file=/etc/passwd")
    yield "GET /gradio_api/file=../../../etc/passwd", (400, 403, 404), lambda: requests.get(
        ui + "/gradio_api/file=../../../etc/passwd")
    yield "playground /choose from a rebinding page", 403, lambda: post(
        ui + "/gradio_api/call/choose", data=json.dumps({"data": ["Custom target + drafter…", None]}),
        headers={**JSON, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"})
    yield "playground /run, 150k-character prompt", "refused", lambda: gradio_run(ui, "x" * 150_000)
    yield "stop: 4 strings of 1000 multi-byte characters", 200, lambda: post(
        api + "/v1/completions", json={"prompt": "x", "max_tokens": 8, "stop": ["é" * 1000] * 4})
    yield "temperature 5e-324 (the smallest double)", 200, lambda: post(
        api + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "temperature": 5e-324})
    yield "top_p 1e-320 (a float64 denormal)", 200, lambda: post(
        api + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "temperature": 1, "top_p": 1e-320})
    yield "seed 1 followed by 400 zeros", 400, lambda: post(
        api + "/v1/completions", data='{"prompt": "x", "seed": 1' + "0" * 400 + "}", headers=JSON)
    yield "max_tokens 1 followed by 5000 digits (past int's digit limit)", 400, lambda: post(
        api + "/v1/completions", data='{"prompt": "x", "max_tokens": 1' + "0" * 5000 + "}", headers=JSON)
    yield "prompt of 1M token ids", 400, lambda: post(
        api + "/v1/completions", data='{"prompt": [' + ",".join(["5"] * 1_000_000) + "]}", headers=JSON)


def gradio_run(ui: str, prompt: str) -> str:
    from gradio_client import Client

    job = Client(ui, verbose=False).submit(prompt, 4, 4, 0, 0, False, next(iter(playground.PICKER)), "", "", False,
                                           api_name="/run")
    status = [out[0] for out in job]  # the status box, update by update
    return "refused" if any(isinstance(s, str) and "characters" in s for s in status) else repr(status[-1])[:80]


def main():
    api_server, _, api = _serve(create_app(worker(), model="tiny-llama"))
    w = worker()
    args = SimpleNamespace(model="tiny-llama", draft="tiny-drafter", host="127.0.0.1", allow_origin=[])
    ui_server, _, ui = _serve(playground.mount(playground.build_demo(w, "tiny-llama", "tiny-drafter"), w, args))
    rows, failed = [], 0
    for what, expected, thunk in cases(api, ui):
        t = time.perf_counter()
        try:
            got = thunk()
            got = got.status_code if isinstance(got, requests.Response) else got
        except Exception as e:  # a dropped connection is an answer too
            got = type(e).__name__
        ok = got in expected if isinstance(expected, tuple) else got == expected
        failed += not ok
        rows.append(f"| {what} | {expected} | {got} | {time.perf_counter() - t:.2f} s | {'held' if ok else 'FAILED'} |")
    print("| sent | must answer | answered | time | |\n| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print(f"\n{len(rows)} cases, {len(rows) - failed} held, {failed} failed")
    api_server.should_exit = ui_server.should_exit = True


if __name__ == "__main__":
    main()
