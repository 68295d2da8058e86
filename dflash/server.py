"""OpenAI-compatible HTTP server: `python -m dflash serve [--model M --draft D] [--host H --port P]`.

Routes live under /v1 and /metrics only, so the Gradio UI can mount itself at "/" on the same app
and share the loaded pair:
    GET  /v1/models
    POST /v1/chat/completions, /v1/completions   (`stream: true` -> server-sent events)
    GET  /metrics                                (per-request and total DFlash metrics)

A request is parsed, encoded and checked against the served pair off the worker thread; only a
generation that can run is queued on the one `Worker` thread (in arrival order), through
`Worker.generate` like the playground's. A reader thread per request turns the job's events into
text (cut at stop strings) and records the request's metrics; the handler relays that text and
cancels the job when its client disconnects. Limits, errors and field policy: docs/api.md.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Optional, Union

import uvicorn
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .config import GenerationConfig
from .events import Cycle, Prefill, Summary
from .guard import Guard, error_body
from .load import encode_prompt
from .registry import BUILTIN_TARGET, base_name, find_drafter
from .metrics import Metrics, dflash_stats
from .openai_request import (MAX_BODY_BYTES, MAX_CHARS_PER_TOKEN, APIError, Params, check_fields, field_of,
                             messages_of, parse_params, prompt_of, read_body, validate)
from .worker import Job, Status, Worker

# after SIGTERM, how long open connections may stay before they are cut: our requests end at once
# (their jobs are cancelled); what stays is a browser tab's never-ending Gradio stream
SHUTDOWN_GRACE_S = 1

log = logging.getLogger("dflash.server")
Prompt = Union[str, list[int], list[dict]]  # completion text, completion token ids, chat messages


def _shutting_down() -> APIError:
    return APIError("the server is shutting down; the generation was cancelled", 503, code="shutting_down")


# ---- the served pair, as the handlers need it ----

@dataclass(frozen=True)
class Served:
    """What requests are checked against, read once from the loaded pair (the tokenizer is
    not MLX: prompts are encoded on a request's own thread, not the worker's)."""

    tokenizer: object
    vocab_size: int
    max_context: Optional[int]
    block_size: Optional[int]  # the drafter's

    @classmethod
    def of(cls, pair) -> "Served":
        t = pair.target
        return cls(pair.tokenizer, t.vocab_size, t.max_context, pair.drafter.block_size if pair.drafter else None)

    def encode(self, prompt: Prompt, chat: bool) -> list[int]:
        """Token ids of a completion prompt (text or ids) or of chat messages (chat template
        applied; without one, "role: content" lines)."""
        if not chat and prompt and isinstance(prompt[0], int):
            bad = [t for t in prompt if not 0 <= t < self.vocab_size]
            if bad:
                raise APIError(f"prompt token ids {bad[:5]} are outside the vocabulary of {self.vocab_size}",
                               param="prompt")
            return list(prompt)
        if chat and not getattr(self.tokenizer, "chat_template", None):
            return encode_prompt(self.tokenizer, "".join(f"{m['role']}: {m['content']}\n" for m in prompt)
                                 + "assistant: ", chat_template=False)
        try:
            return encode_prompt(self.tokenizer, prompt, chat_template=chat)
        except ValueError as e:  # e.g. a chat template that refuses these roles
            raise APIError(str(e), param="messages") from None

    def check_size(self, prompt: Prompt, cfg: GenerationConfig, chat: bool) -> int:
        """Refuse a prompt too long for the context before tokenizing it (which takes seconds for
        megabytes of text); returns its size, characters or token ids."""
        size = sum(len(m["content"]) for m in prompt) if chat else len(prompt)
        if not self.max_context:
            return size
        if not chat and prompt and isinstance(prompt[0], int):
            self.check(prompt, cfg, chat)
        elif size > MAX_CHARS_PER_TOKEN * self.max_context:
            raise APIError(f"the prompt's {size} characters cannot fit the target's context of {self.max_context} "
                           f"tokens (over {MAX_CHARS_PER_TOKEN} characters per token)", code="context_length_exceeded")
        return size

    def check(self, ids: list[int], cfg: GenerationConfig, chat: bool) -> None:
        """Refuse, before queueing, what the engine would refuse. The context check leaves out
        the few tokens a verify pass adds at the very end: the engine still checks those."""
        validate(cfg, self.block_size if cfg.mode == "dflash" else None)
        if not ids:
            raise APIError("the prompt is empty", param="messages" if chat else "prompt")
        if self.max_context and len(ids) + cfg.max_tokens > self.max_context:
            raise APIError(f"prompt ({len(ids)} tokens) + max_tokens ({cfg.max_tokens}) exceeds the "
                           f"target's context of {self.max_context} tokens", code="context_length_exceeded")


def public_name(name: Optional[str]) -> Optional[str]:
    """A model or drafter as clients see it: a Hub or builtin id as is, a local directory by its
    own name (answers never show this machine's paths)."""
    if not name or name.startswith("builtin:"):
        return name
    path = Path(name).expanduser()
    return path.resolve().name if name.startswith((".", "/", "~")) or path.exists() else name


# ---- from engine events to text ----

class StopCutter:
    """Cuts streamed text at the first stop string, holding back a tail that could begin one.
    Each stop is matched by its KMP automaton: O(1) per character, whatever the stops' length."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops, self.text, self.sent, self.stopped = stops, "", 0, False
        self.fallback = [_prefix_function(s) for s in stops]
        self.matched = [0] * len(stops)  # characters of each stop that end the text

    def add(self, piece: str) -> str:
        """Append `piece`; return the text that is now safe to send (nothing once stopped)."""
        if self.stopped:
            return ""
        start, cut = len(self.text), None
        self.text += piece
        for j, s in enumerate(self.stops):
            k, fallback = self.matched[j], self.fallback[j]
            for i, c in enumerate(piece, start):
                while k and s[k] != c:
                    k = fallback[k - 1]
                k += s[k] == c
                if k == len(s):  # the earliest start wins, whichever stop completes first
                    cut = min(cut if cut is not None else i, i + 1 - k)
                    break
            self.matched[j] = k
        if cut is not None:
            self.text, self.stopped = self.text[:cut], True
            return self.flush()
        return self._release(max(self.sent, len(self.text) - max(self.matched, default=0)))

    def flush(self) -> str:
        return self._release(len(self.text))

    def _release(self, end: int) -> str:
        out, self.sent = self.text[self.sent:end], end
        return out


def _prefix_function(s: str) -> list[int]:
    """f[i]: the length of the longest proper prefix of s[:i + 1] that is also its suffix."""
    f, k = [0] * len(s), 0
    for i in range(1, len(s)):
        while k and s[i] != s[k]:
            k = f[k - 1]
        k += s[i] == s[k]
        f[i] = k
    return f


@dataclass(frozen=True)
class Outcome:
    text: str  # after the stop-string cut
    finish_reason: str  # "stop" | "length" | "cancelled"
    completion_tokens: int  # tokens up to the one completing a stop string (usage and /metrics)
    summary: Summary
    note: Optional[str] = None  # the engine's Prefill note (e.g. a chain where a tree was wanted)


def relay(job: Job, stops: tuple[str, ...], send) -> Optional[Outcome]:
    """Read one job's events, calling send(("start", prompt_tokens)) and send(("text", str)).

    A stop string cancels the job (the engine stops after its current cycle). Returns None when
    the job was cancelled before it started.
    """
    cut, raw, used, summary, note = StopCutter(stops), "", 0, None, None
    for ev in job:
        if isinstance(ev, Summary):
            summary = ev
            # the detokenizer's last bytes arrive only with the final text
            tail = ev.text[len(raw):] if ev.text.startswith(raw) and not cut.stopped else ""
            out = cut.add(tail) + cut.flush()
        elif isinstance(ev, (Prefill, Cycle)):
            if isinstance(ev, Prefill):
                send(("start", ev.prompt_tokens))
                note = ev.note
            out = ""
            for tok in ((ev.first,) if ev.first else ()) if isinstance(ev, Prefill) else ev.committed:
                if cut.stopped:
                    break
                raw, used = raw + tok.text, used + 1
                out += cut.add(tok.text)
            if cut.stopped:
                job.cancel()
        else:  # Status lines while the pair loads
            continue
        if out:
            send(("text", out))
    if summary is None:
        return None
    finish = "stop" if cut.stopped else summary.finish_reason
    return Outcome(cut.text, finish, used, summary, note)


# ---- the app ----

def preload(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None, progress=print):
    """Load the pair on the worker thread now (Status lines to `progress`); return it."""
    pair = None
    for item in worker.prepare(model, draft):
        if isinstance(item, Status):
            progress(item.message)
        else:
            pair = item
    return pair


def _off_loop(fn, *args) -> asyncio.Future:
    """Await fn(*args) run on a daemon thread: waits on the worker never block the event loop,
    and, unlike executor threads, never hold up the process's exit."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(result, error):
        if not fut.done():
            fut.set_exception(error) if error else fut.set_result(result)

    def run():
        try:
            result, error = fn(*args), None
        except Exception as e:
            result, error = None, e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the event loop is gone: the server is shutting down
            pass

    threading.Thread(target=run, name="dflash-off-loop", daemon=True).start()
    return fut


def _empty_summary(cfg: GenerationConfig, prompt_tokens: int) -> Summary:
    """The Summary of a generation asked for 0 tokens, which needs no model call."""
    given = {"mode": cfg.mode, "prompt_tokens": prompt_tokens, "finish_reason": "length", "text": ""}
    zero = {"int": 0, "float": 0.0, "str": ""}  # tuple fields: ()
    return Summary(**{f.name: given.get(f.name, zero.get(f.type, ())) for f in fields(Summary) if f.init})


class ShortestFirst:
    """A lock that goes to the waiting caller with the least work: a short prompt waits for the
    one being tokenized, never for a queue of long ones."""

    def __init__(self):
        self._cond = threading.Condition()
        self._busy = False
        self._waiting: list[tuple[int, int]] = []  # a heap of (size, arrival)
        self._arrivals = itertools.count()

    @contextmanager
    def turn(self, size: int):
        with self._cond:
            me = (size, next(self._arrivals))
            heapq.heappush(self._waiting, me)
            self._cond.wait_for(lambda: not self._busy and self._waiting[0] == me)
            heapq.heappop(self._waiting)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class Service:
    """What the routes share: the served pair's checks, metrics, and the jobs in flight."""

    def __init__(self, worker: Worker, model: Optional[str], draft: Optional[str]):
        self.worker, self.model, self.draft = worker, model, draft
        self.model_id = public_name(model) or BUILTIN_TARGET
        self.names = {self.model_id, base_name(self.model_id), model}
        self.draft_id = public_name(draft or find_drafter(model or BUILTIN_TARGET))
        self.metrics = Metrics()
        self.jobs: set[Job] = set()
        self.closing = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._closed: Optional[asyncio.Future] = None  # set at shutdown: open requests stop waiting
        self._served: Optional[Served] = None
        self._loading = asyncio.Lock()
        self._tokenizing = ShortestFirst()  # one prompt at a time: bounded CPU next to the worker

    def close(self) -> None:
        """Cancel every generation (queued ones never start) and refuse new ones. Called from a
        signal handler: no locks."""
        self.closing = True
        for job in list(self.jobs):
            job.cancel()
        if self._loop is not None:  # a cycle (or the first request's cost probe) may take seconds
            self._loop.call_soon_threadsafe(lambda: self._closed.done() or self._closed.set_result(None))

    async def served(self) -> Served:
        async with self._loading:
            if self._served is None:
                try:
                    pair = await _off_loop(preload, self.worker, self.model, self.draft, log.info)
                except Exception as e:
                    log.error("cannot load the served pair", exc_info=e)
                    raise APIError(f"cannot load the served pair: {type(e).__name__}: {e}", 500) from None
                self._served = Served.of(pair)
        return self._served

    def _encode(self, served: Served, prompt: Prompt, chat: bool, size: int) -> list[int]:
        with self._tokenizing.turn(size):
            return served.encode(prompt, chat)

    async def complete(self, request: Request, chat: bool):
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._closed = self._loop.create_future()
        if self.closing:
            raise _shutting_down()
        body = await read_body(request)
        check_fields(body, chat)
        prompt = messages_of(body) if chat else prompt_of(body)
        name = field_of(body, "model", "string")
        if name is not None and name not in self.names:
            raise APIError(f"model {name!r} is not served here (this server serves {self.model_id!r})",
                           status=404, param="model", code="model_not_found")
        p = parse_params(body, chat)
        served = await self.served()
        ids = await _off_loop(self._encode, served, prompt, chat, served.check_size(prompt, p.cfg, chat))
        served.check(ids, p.cfg, chat)
        shape = _Shape(f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}", chat, self.model_id)
        start = self._start if p.cfg.max_tokens else self._nothing
        job, inbox = start(ids, p, shape.rid)
        return await self._respond(request, shape, job, inbox, p.stream)

    async def _respond(self, request: Request, shape: "_Shape", job: Job, inbox: asyncio.Queue, stream: bool):
        """Wait for the whole generation (or, streaming, its start) unless the client leaves first."""
        try:  # a job cancelled before it started ends "done" without a "start"
            item = await _wait(request, inbox, ("start", "error", "done") if stream else ("error", "done"),
                               self._closed)
        except BaseException:  # the handler is torn down
            job.cancel()
            raise
        if item is None or item[0] != "start":
            job.cancel()  # no-op once finished
        if item is None:  # the client left; nobody reads this (nginx's "client closed request")
            return Response(status_code=499)
        kind, value = item
        if kind == "closed":
            raise _shutting_down()
        if kind == "error":
            raise _as_api_error(value)
        if kind == "start":
            return StreamingResponse(_sse(shape, job, inbox, self._closed), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return shape.response(_finished(value))

    def _start(self, ids: list[int], p: Params, rid: str) -> tuple[Job, asyncio.Queue]:
        """Queue the generation on the worker and a reader thread that feeds the returned inbox."""
        loop, inbox = asyncio.get_running_loop(), asyncio.Queue()
        job = self.worker.generate(ids, p.cfg, self.model, self.draft)
        self.jobs.add(job)
        if self.closing:
            job.cancel()

        def send(item):
            try:
                loop.call_soon_threadsafe(inbox.put_nowait, item)
            except RuntimeError:  # the event loop is gone: the server is shutting down
                pass

        def read():
            try:
                outcome = relay(job, p.stops, send)
            except Exception as e:
                if not isinstance(e, ValueError):
                    log.error("generation %s failed", rid, exc_info=e)
                self.metrics.error()
                send(("error", e))
                return
            finally:
                self.jobs.discard(job)
            if outcome is not None:
                self.metrics.record(rid, outcome)
            send(("done", outcome))

        threading.Thread(target=read, name=f"reader-{rid}", daemon=True).start()
        return job, inbox

    def _nothing(self, ids: list[int], p: Params, rid: str) -> tuple[Job, asyncio.Queue]:
        """max_tokens 0: the answer is known without queueing anything."""
        outcome = Outcome("", "length", 0, _empty_summary(p.cfg, len(ids)))
        self.metrics.record(rid, outcome)
        inbox: asyncio.Queue = asyncio.Queue()
        for item in (("start", len(ids)), ("done", outcome)):
            inbox.put_nowait(item)
        return Job(), inbox


async def _wait(request: Request, inbox: asyncio.Queue, kinds: tuple[str, ...],
                closed: asyncio.Future) -> Optional[tuple]:
    """The first inbox item of one of `kinds` (others are skipped); ("closed", None) at shutdown;
    None once the client has disconnected: a client that gives up cancels its generation."""
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        while (item := await _next(inbox, closed, gone)) is not None and item[0] not in kinds:
            pass
        return ("closed", None) if item is None and closed.done() else item
    finally:
        gone.cancel()


async def _next(inbox: asyncio.Queue, *stops: asyncio.Future) -> Optional[tuple]:
    """The next inbox item, or None when one of `stops` comes first."""
    get = asyncio.ensure_future(inbox.get())
    await asyncio.wait((get, *stops), return_when=asyncio.FIRST_COMPLETED)
    if get.done():
        return get.result()
    get.cancel()
    return None


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read: the server then
    answers receive() only with a disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _finished(outcome: Optional[Outcome]) -> Outcome:
    """The outcome to answer with; a generation cancelled while its client waits means shutdown."""
    if outcome is None or outcome.finish_reason == "cancelled":
        e = _shutting_down()
        e.counted = True
        raise e
    return outcome


def _add_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request, e: APIError):
        if not e.counted:
            metrics.error()
        return JSONResponse(error_body(str(e), e.status, e.param, e.code), status_code=e.status)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request, e: ClientDisconnect):  # the client left mid-upload: nobody to answer
        return Response(status_code=499)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, e: StarletteHTTPException):
        return JSONResponse(error_body(f"{request.method} {request.url.path}: {e.detail}", e.status_code),
                            status_code=e.status_code)

    @app.exception_handler(Exception)
    async def _server_error(request, e: Exception):
        metrics.error()
        return JSONResponse(error_body(f"internal error: {type(e).__name__}: {e}", 500), status_code=500)


def create_app(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None,
               cluster: Optional[dict] = None, bind: str = "127.0.0.1", allow_origins=()) -> FastAPI:
    """The API app. `model`/`draft` are passed to the worker as given (None: the defaults);
    `cluster`: a sharded target's record (cluster.serving_record), shown in /metrics; `bind`,
    `allow_origins`: the address served and the web origins let in (guard.Guard, which also
    guards a UI mounted on this app)."""
    api = Service(worker, model, draft)
    app = FastAPI(title="DFlash", docs_url=None, redoc_url=None, openapi_url=None)
    allow_origins = [o.strip().rstrip("/").lower() for o in allow_origins if o.strip()]
    if allow_origins:  # their pages need CORS answers to read ours (the Guard, added last, runs first)
        app.add_middleware(CORSMiddleware, allow_origins=allow_origins, allow_methods=["GET", "POST"],
                           allow_headers=["*"])
    app.add_middleware(Guard, bind=bind, allow_origins=allow_origins, max_body=MAX_BODY_BYTES)
    app.state.api = api
    _add_error_handlers(app, api.metrics)
    started = int(time.time())

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": api.model_id, "object": "model", "created": started, "owned_by": "dflash",
            "dflash": {"draft": api.draft_id}}]}

    @app.get("/metrics")
    async def get_metrics():
        return api.metrics.snapshot() | ({"distributed": cluster} if cluster else {})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await api.complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await api.complete(request, chat=False)

    return app


def _as_api_error(e: Exception) -> APIError:
    """A generation's error, as the reader thread counted it: ValueError means a bad request."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, ValueError):  # the engine refusing this request's input
        err = APIError(str(e), 400)
    else:
        err = APIError(f"generation failed: {type(e).__name__}: {e}", 500)
    err.counted = True
    return err


class _Shape:
    """OpenAI's envelopes for one request: chat or text completion, whole or chunked."""

    def __init__(self, rid: str, chat: bool, model_id: str):
        self.rid, self.chat, self.model_id, self.created = rid, chat, model_id, int(time.time())

    def _envelope(self, obj: str, choice: dict, outcome: Optional[Outcome] = None) -> dict:
        env = {"id": self.rid, "object": obj, "created": self.created, "model": self.model_id,
               "choices": [choice]}
        if outcome is not None:
            s = outcome.summary
            env["usage"] = {"prompt_tokens": s.prompt_tokens, "completion_tokens": outcome.completion_tokens,
                            "total_tokens": s.prompt_tokens + outcome.completion_tokens}
            env["dflash"] = dflash_stats(s, outcome.note)
        return env

    def response(self, o: Outcome) -> dict:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": o.text},
                      "logprobs": None, "finish_reason": o.finish_reason}
            return self._envelope("chat.completion", choice, o)
        choice = {"index": 0, "text": o.text, "logprobs": None, "finish_reason": o.finish_reason}
        return self._envelope("text_completion", choice, o)

    def chunk(self, text: Optional[str], o: Optional[Outcome] = None, role: bool = False) -> dict:
        finish = o.finish_reason if o else None
        if self.chat:
            delta = {"role": "assistant", "content": ""} if role else ({} if text is None else {"content": text})
            return self._envelope("chat.completion.chunk",
                                  {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}, o)
        return self._envelope("text_completion",
                              {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}, o)


def _event(obj: dict) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def _sse(shape: _Shape, job: Job, inbox: asyncio.Queue, closed: asyncio.Future):
    """Server-sent events: one chunk per engine cycle, then a final chunk with finish_reason,
    usage and dflash stats, then [DONE]. A client that disconnects cancels the generation."""
    try:
        if shape.chat:
            yield _event(shape.chunk(None, role=True))
        while True:
            kind, value = await _next(inbox, closed) or ("done", None)  # None: shutdown
            if kind == "text":
                yield _event(shape.chunk(value))
                continue
            try:
                if kind == "error":
                    raise _as_api_error(value)
                yield _event(shape.chunk(None, _finished(value)))
            except APIError as e:
                yield _event(error_body(str(e), e.status, e.param, e.code))
            break
        yield "data: [DONE]\n\n"
    finally:
        job.cancel()


class Server(uvicorn.Server):
    """uvicorn's server; on SIGTERM or Ctrl-C it first cancels every generation (queued ones
    never start), so open requests end at once (503) and the process exits promptly."""

    on_stop: Optional[Callable[[], None]] = None
    interrupted = False  # Ctrl-C seen; uvicorn's re-raise of it is not always a KeyboardInterrupt here

    def handle_exit(self, sig, frame) -> None:
        self.interrupted = self.interrupted or sig == signal.SIGINT
        api = getattr(getattr(self.config.app, "state", None), "api", None)
        if api is not None:
            api.close()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets=None) -> None:
        await super().shutdown(sockets)
        if self.on_stop is not None:  # before uvicorn raises the signal again, which ends us
            await asyncio.get_running_loop().run_in_executor(None, self.on_stop)


def server_config(app: FastAPI, **kw) -> uvicorn.Config:
    return uvicorn.Config(app, timeout_graceful_shutdown=SHUTDOWN_GRACE_S, **kw)


def run(app: FastAPI, host: str, port: int, on_stop: Optional[Callable[[], None]] = None, **kw) -> bool:
    """Serve `app` (create_app's, maybe with the UI mounted on it) until SIGTERM or Ctrl-C;
    `on_stop` runs once the server has shut down (a sharded target's rank 0 stops the others).
    Returns whether Ctrl-C stopped it."""
    server = Server(server_config(app, host=host, port=port, **kw))
    server.on_stop = on_stop
    try:
        server.run()
    except KeyboardInterrupt:  # raised again by uvicorn once it has shut down
        return True
    return server.interrupted


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(text)
    return port


_port.__name__ = "port (0..65535)"  # argparse names the type in its error


def add_listen_args(p: argparse.ArgumentParser, port: int) -> None:
    """--host, --port and --allow-origin, as `serve` and the playground take them."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_port, default=port)
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web origin (scheme://host[:port]) whose pages may call this server, repeatable; "
                        "'*' for any, which also answers any Host header (docs/api.md)")


def check_listen(host: str, port: int) -> Optional[str]:
    """Why the server could not listen on host:port, found before the minutes a load can take."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as e:
        return f"cannot listen on {host}:{port}: {e.strerror or e}"
    return None


def main(argv=None) -> int:
    from .cli import ArgumentParser, add_distributed_arg, add_model_args, command

    p = ArgumentParser(prog=command("serve"),
                       description="OpenAI-compatible API (/v1) and /metrics for a DFlash pair "
                                   "(limits and errors: docs/api.md).")
    add_model_args(p)
    add_listen_args(p, 8000)
    add_distributed_arg(p)
    a = p.parse_args(argv)
    exit_on_ctrl_c()  # while the pair loads; uvicorn takes Ctrl-C over once it serves
    try:
        return _serve(a)
    except KeyboardInterrupt:  # raised again by uvicorn after a Ctrl-C while serving
        sys.stderr.flush()
        os._exit(130)


def exit_on_ctrl_c() -> None:
    """Ctrl-C ends the process at once (exit 130): no traceback, no abort in MLX's threads, and
    no KeyboardInterrupt that a library between here and the signal could swallow (a load
    interrupted in its first second went on to serve, once in a while)."""
    def interrupted(*_):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)

    signal.signal(signal.SIGINT, interrupted)


def _serve(a) -> int:
    from .cli import fail
    from .cluster import serve_ranks

    ranks = None
    if a.distributed:  # rank 0 serves; the others follow its requests here until it stops
        try:
            ranks = serve_ranks(a.distributed, a.model, a.draft)
        except ValueError as e:
            return fail(e)
        if ranks is None:
            return 0
    if (why := check_listen(a.host, a.port)) is not None:
        return fail(ValueError(why))
    worker = ranks.worker if ranks else Worker()
    try:
        pair = preload(worker, a.model, a.draft, progress=lambda m: print(m, file=sys.stderr, flush=True))
        cluster = ranks.record(pair) if ranks else None
    except (ValueError, RuntimeError) as e:
        return fail(e)
    app = create_app(worker, a.model, a.draft, cluster, a.host, a.allow_origin)
    if run(app, a.host, a.port, on_stop=ranks and ranks.stop):
        sys.stderr.flush()
        os._exit(130)  # Ctrl-C; not sys.exit: finalizing the interpreter under a busy MLX worker thread aborts
    return 0
