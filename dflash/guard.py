"""What a web page in the user's browser may do to a local server: nothing, unless let in.

Both servers (`dflash serve` and the playground with its `/v1`) run behind `Guard`, an ASGI
middleware that refuses, before the app reads a byte of the body:
- a foreign `Origin` (403): a page of another site could otherwise start generations or load
  models; same-origin pages (the playground's own) and `--allow-origin` origins pass;
- on a loopback bind, a `Host` that is not a loopback name (403): DNS rebinding points a foreign
  name at 127.0.0.1, which makes the page same-origin;
- a POST whose Content-Type is not JSON (415): text/plain, form and multipart posts are "simple"
  requests a browser sends cross-site without asking first;
- `/gradio_api/upload` (403): the playground has no file inputs, so an upload is only storage;
- a body over `max_body` bytes (413).
Requests without `Origin` (curl, SDKs) pass the origin check: only browsers send one.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Iterable
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WRITES = ("POST", "PUT", "PATCH", "DELETE")
UPLOADS = ("/gradio_api/upload", "/upload")
CHECKED = ("host", "origin", "content-type", "content-length")


def error_body(message: str, status: int, param=None, code=None) -> dict:
    """OpenAI's error object, which every refusal of both servers uses."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """A lone UTF-16 surrogate: JSON can escape one ("\\ud800") and undecodable argv bytes become
    one, but it is not Unicode text, and no tokenizer (nor a UTF-8 response) can take it."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def is_loopback(host: str) -> bool:
    """A name or address that only reaches this machine (`host` without a port)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(netloc: str) -> tuple[str, str]:
    """(host, port) of a Host header or an origin's netloc; port '' when absent."""
    try:
        parts = urlsplit(f"//{netloc}")
        return (parts.hostname or "", str(parts.port or ""))
    except ValueError:  # a port that is not a number, an unclosed bracket
        return ("", "")


class _TooLarge(Exception):
    pass


class Guard:
    """ASGI middleware (see the module's doc). `bind`: the address the server listens on;
    `allow_origins`: origins (scheme://host[:port]) a browser page may call from, "*" for any
    (which also lifts the Host check)."""

    def __init__(self, app, bind: str = "127.0.0.1", allow_origins: Iterable[str] = (), max_body: int = 2 << 20):
        self.app, self.max_body = app, max_body
        self.origins = {o.rstrip("/").lower() for o in allow_origins}
        self.check_host = is_loopback(bind) and "*" not in self.origins
        self.hosts = {_split(urlsplit(o).netloc)[0] for o in self.origins} - {""}  # a proxy's name, let in

    def refusal(self, scope) -> tuple[int, str, str] | None:
        """(status, code, message) for a request that must not reach the app, else None."""
        headers, seen = {}, []
        for k, v in scope.get("headers", ()):
            seen.append(k := k.decode("latin-1").lower())
            headers.setdefault(k, v.decode("latin-1"))
        twice = [k for k in CHECKED if seen.count(k) > 1]
        if twice:  # which one would the app read? (no browser sends two)
            return 400, "duplicate_header", f"the request has more than one {twice[0]} header"
        host = headers.get("host", "")
        name, port = _split(host)
        if self.check_host and not (is_loopback(name) or name in self.hosts):
            return 403, "forbidden_host", (f"Host {host!r} is not this machine: a server bound to loopback answers "
                                           "only localhost names (--allow-origin lets a proxy's name in)")
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin.rstrip("/").lower(), host.lower(), port):
            return 403, "forbidden_origin", (f"requests from web pages of {origin!r} are refused; start the server "
                                             "with --allow-origin ORIGIN to let a page call it")
        if scope["type"] != "http" or scope["method"] not in WRITES:
            return None
        if scope["path"].rstrip("/") in UPLOADS:
            return 403, "uploads_off", "uploads are off: the playground takes no files"
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if not (kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))):
            return 415, "unsupported_media_type", (f"send the body as JSON with Content-Type: application/json "
                                                   f"(got {kind or 'no Content-Type'})")
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > self.max_body:
            return 413, "request_too_large", f"the request body is larger than {self.max_body} bytes"
        return None

    def _origin_ok(self, origin: str, host: str, port: str) -> bool:
        if "*" in self.origins or origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.netloc == host or f"{parts.netloc}:{_default_port(parts.scheme)}" == host:
            return True  # the page is this server's own (same origin)
        o_name, o_port = _split(parts.netloc)
        o_port = o_port or _default_port(parts.scheme)
        return bool(port) and o_port == port and is_loopback(o_name) and is_loopback(_split(host)[0])

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refused = self.refusal(scope)
        if refused is not None:
            return await _refuse(scope, send, *refused)
        if scope["type"] == "websocket" or scope["method"] not in WRITES:
            return await self.app(scope, receive, send)
        started, size = False, 0

        async def counted_receive():  # a chunked body gives no Content-Length: count as it comes
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.max_body:
                    raise _TooLarge
            return message

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except _TooLarge:
            if not started:
                await _refuse(scope, send, 413, "request_too_large",
                              f"the request body is larger than {self.max_body} bytes")


def _default_port(scheme: str) -> str:
    return {"http": "80", "https": "443"}.get(scheme, "")


async def _refuse(scope, send, status: int, code: str, message: str) -> None:
    if scope["type"] == "websocket":
        return await send({"type": "websocket.close", "code": 1008})
    body = json.dumps(error_body(message, status, code=code)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
