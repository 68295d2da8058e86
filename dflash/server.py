"""OpenAI-compatible HTTP server: `python -m dflash serve [--model M --draft D] [--host H --port P]`.

Routes live under /v1 and /metrics only, so the Gradio UI can mount itself at "/" on the same app
and share the loaded pair:
    GET  /v1/models
    POST /v1/chat/completions, /v1/completions   (`stream: true` -> server-sent events)
    GET  /metrics                                (per-request and total DFlash metrics)

All MLX work goes through the one `Worker` thread, so requests queue in arrival order. For each
request a reader thread turns the job's events into text (cut at stop strings) and records the
request's metrics from the engine's Summary; the handler only relays that text to the client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Optional, Union

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .config import DEFAULT_MAX_TOKENS, GenerationConfig
from .engine import stream as engine_stream
from .events import Cycle, Prefill, Summary
from .registry import BUILTIN_TARGET, base_name, find_drafter
from .worker import Job, Status, Worker

METRICS_WINDOW = 100
MAX_STOPS = 4
ROLES = ("system", "developer", "user", "assistant", "tool")

log = logging.getLogger("dflash.server")
Prompt = Union[str, list[int], list[dict]]  # completion text, completion token ids, chat messages


class APIError(Exception):
    """A refused request, rendered as OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, message: str, status: int = 400, param: Optional[str] = None,
                 code: Optional[str] = None):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code
        self.counted = False  # already counted in the metrics (by the request's reader thread)


def _error_body(message: str, status: int, param=None, code=None) -> dict:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# ---- request parsing: every caller mistake becomes an APIError naming the field ----

_KINDS = {"integer": int, "number": (int, float), "boolean": bool, "string": str}


def _field(body: dict, name: str, kind: str, default=None):
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, _KINDS[kind]) or (isinstance(v, bool) and kind != "boolean"):
        raise APIError(f"'{name}' must be a {kind} (got {json.dumps(v)[:40]})", param=name)
    return v


@dataclass(frozen=True)
class _Params:
    cfg: GenerationConfig
    stops: tuple[str, ...]
    stream: bool


def _params(body: dict, chat: bool) -> _Params:
    max_tokens = _field(body, "max_tokens", "integer")
    if max_tokens is None and chat:
        max_tokens = _field(body, "max_completion_tokens", "integer")
    if _field(body, "n", "integer", 1) != 1:
        raise APIError("only n=1 is supported", param="n")
    seed = _field(body, "seed", "integer", 0)
    if not 0 <= seed < 2**64:
        raise APIError(f"'seed' must be in 0..2**64-1 (got {seed})", param="seed")
    cfg = GenerationConfig(
        mode=_field(body, "mode", "string", "dflash"),
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        block_size=_field(body, "block_size", "integer"),
        temperature=float(_field(body, "temperature", "number", 0.0)),
        top_p=float(_field(body, "top_p", "number", 1.0)),
        seed=seed,
    )
    try:
        cfg.validate()
    except ValueError as e:  # its messages start with the field's name
        raise APIError(str(e), param=str(e).split()[0]) from None
    stops = body.get("stop")
    stops = [stops] if isinstance(stops, str) else ([] if stops is None else stops)
    if (not isinstance(stops, list) or len(stops) > MAX_STOPS
            or not all(isinstance(s, str) and s for s in stops)):
        raise APIError(f"'stop' must be a non-empty string or an array of at most {MAX_STOPS} of them",
                       param="stop")
    return _Params(cfg, tuple(stops), _field(body, "stream", "boolean", False))


def _messages(body: dict) -> list[dict]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise APIError("'messages' must be a non-empty array of {role, content} objects", param="messages")
    out = []
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise APIError(f"{where} must be an object with a role in {', '.join(ROLES)}", param=where)
        content = m.get("content")
        if isinstance(content, list):  # content parts: only text is understood
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise APIError(f"{where}.content parts must all be text parts", param=f"{where}.content")
            content = "".join(p["text"] for p in content)
        elif content is None and m["role"] == "assistant":
            content = ""
        elif not isinstance(content, str):
            raise APIError(f"{where}.content must be a string or an array of text parts",
                           param=f"{where}.content")
        out.append({"role": "system" if m["role"] == "developer" else m["role"], "content": content})
    return out


def _prompt(body: dict) -> Union[str, list[int]]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        return p
    raise APIError("'prompt' must be a string or an array of token ids (one prompt per request)",
                   param="prompt")


def encode(pair, prompt: Prompt) -> list[int]:
    """Token ids of a completion prompt (text or ids) or of chat messages (chat template applied)."""
    tok = pair.tokenizer
    if isinstance(prompt, str):
        return tok.encode(prompt)
    if prompt and isinstance(prompt[0], int):
        bad = [t for t in prompt if not 0 <= t < pair.target.vocab_size]
        if bad:
            raise ValueError(f"prompt token ids {bad[:5]} are outside the vocabulary of {pair.target.vocab_size}")
        return list(prompt)
    if not getattr(tok, "chat_template", None):
        return tok.encode("".join(f"{m['role']}: {m['content']}\n" for m in prompt) + "assistant: ")
    try:
        text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # jinja raises for e.g. roles this template does not accept
        raise ValueError(f"the chat template rejected these messages: {e}") from None
    return tok.encode(text, add_special_tokens=False)


# ---- from engine events to text ----

class StopCutter:
    """Cuts streamed text at the first stop string, holding back a tail that could begin one."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops, self.text, self.sent, self.stopped = stops, "", 0, False

    def add(self, piece: str) -> str:
        """Append `piece`; return the text that is now safe to send."""
        self.text += piece
        hits = [i for s in self.stops if (i := self.text.find(s, self.sent)) >= 0]
        if hits:
            self.text, self.stopped = self.text[: min(hits)], True
            return self.flush()
        hold = max((k for s in self.stops for k in range(1, len(s)) if self.text.endswith(s[:k])), default=0)
        return self._release(max(self.sent, len(self.text) - hold))

    def flush(self) -> str:
        return self._release(len(self.text))

    def _release(self, end: int) -> str:
        out, self.sent = self.text[self.sent:end], end
        return out


@dataclass(frozen=True)
class Outcome:
    text: str  # after the stop-string cut
    finish_reason: str  # "stop" | "length" | "cancelled"
    completion_tokens: int  # tokens up to the one completing a stop string
    summary: Summary


def relay(job: Job, stops: tuple[str, ...], send) -> Optional[Outcome]:
    """Read one job's events, calling send(("start", prompt_tokens)) and send(("text", str)).

    A stop string cancels the job (the engine stops after its current cycle). Returns None when
    the job was cancelled before it started.
    """
    cut, raw, used, summary = StopCutter(stops), "", 0, None
    for ev in job:
        if isinstance(ev, Summary):
            summary = ev
            # the detokenizer's last bytes arrive only with the final text
            tail = ev.text[len(raw):] if ev.text.startswith(raw) and not cut.stopped else ""
            out = cut.add(tail) + cut.flush()
        elif isinstance(ev, (Prefill, Cycle)):
            if isinstance(ev, Prefill):
                send(("start", ev.prompt_tokens))
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
    return Outcome(cut.text, finish, used, summary)


def dflash_stats(s: Summary) -> dict:
    """The `dflash` extension field of a response."""
    return {"mode": s.mode, "block_size": s.block_size, "tau": s.tau, "acceptance_rate": s.acceptance_rate,
            "cycles": s.cycles, "tokens": s.tokens, "decode_tok_s": s.decode_tok_s, "ttft_s": s.ttft_s}


# ---- metrics ----

class Metrics:
    """The last `window` requests and running totals, all from the engine's Summary events."""

    def __init__(self, window: int = METRICS_WINDOW):
        self._lock = threading.Lock()
        self.recent: deque = deque(maxlen=window)
        self.requests = self.errors = 0
        self._sums: dict[str, dict] = {}  # by mode

    def record(self, rid: str, o: Outcome) -> None:
        s = o.summary
        with self._lock:
            self.requests += 1
            self.recent.append({
                "id": rid, "mode": s.mode, "prompt_tokens": s.prompt_tokens, "tokens": s.tokens,
                "cycles": s.cycles, "tokens_per_cycle": s.tau, "acceptance_rate": s.acceptance_rate,
                "decode_tok_s": s.decode_tok_s, "ttft_s": s.ttft_s, "finish_reason": o.finish_reason,
            })
            m = self._sums.setdefault(s.mode, dict.fromkeys(
                ("requests", "tokens", "cycles", "tau_x_cycles", "acc_x_cycles", "decode_tokens", "decode_s"), 0))
            m["requests"] += 1
            m["tokens"] += s.tokens
            m["cycles"] += s.cycles
            m["tau_x_cycles"] += s.tau * s.cycles
            m["acc_x_cycles"] += s.acceptance_rate * s.cycles
            if s.decode_s > 0:
                m["decode_tokens"] += s.tokens - 1
                m["decode_s"] += s.decode_s

    def error(self) -> None:
        with self._lock:
            self.errors += 1

    def snapshot(self) -> dict:
        with self._lock:
            sums = {mode: dict(m) for mode, m in self._sums.items()}
            recent, requests, errors = list(self.recent), self.requests, self.errors
        everything = {k: sum(m[k] for m in sums.values()) for k in next(iter(sums.values()), {})}
        return {"window": self.recent.maxlen, "requests": recent,
                "totals": {"requests": requests, "errors": errors, **_totals(everything),
                           "by_mode": {mode: {"requests": m["requests"], **_totals(m)} for mode, m in sums.items()}}}


def _totals(m: dict) -> dict:
    cycles = m.get("cycles", 0)
    return {"tokens": m.get("tokens", 0), "cycles": cycles,
            "tokens_per_cycle": m["tau_x_cycles"] / cycles if cycles else 0.0,
            "acceptance_rate": m["acc_x_cycles"] / cycles if cycles else 0.0,
            "decode_tok_s": m["decode_tokens"] / m["decode_s"] if m.get("decode_s") else 0.0}


# ---- the app ----

def preload(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None, progress=print) -> None:
    """Load the pair on the worker thread now, so the first request does not wait for it."""
    for item in worker.call(lambda prog: worker.pair(model, draft, prog)):
        if isinstance(item, Status):
            progress(item.message)


def create_app(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None) -> FastAPI:
    """The API app. `model`/`draft` are passed to `worker.pair` as given (None: the defaults)."""
    model_id = model or BUILTIN_TARGET
    names = {model_id, base_name(model_id)}
    started = int(time.time())
    metrics = Metrics()
    app = FastAPI(title="DFlash", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.worker, app.state.metrics, app.state.model_id = worker, metrics, model_id

    @app.exception_handler(APIError)
    async def _api_error(request, e: APIError):
        if not e.counted:
            metrics.error()
        return JSONResponse(_error_body(str(e), e.status, e.param, e.code), status_code=e.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, e: StarletteHTTPException):
        return JSONResponse(_error_body(f"{request.method} {request.url.path}: {e.detail}", e.status_code),
                            status_code=e.status_code)

    @app.exception_handler(Exception)
    async def _server_error(request, e: Exception):
        metrics.error()
        return JSONResponse(_error_body(f"internal error: {type(e).__name__}: {e}", 500), status_code=500)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": model_id, "object": "model", "created": started, "owned_by": "dflash",
            "dflash": {"draft": draft or find_drafter(model_id)}}]}

    @app.get("/metrics")
    async def get_metrics():
        return metrics.snapshot()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await _body(request)
        return await _complete(body, _messages(body), chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _body(request)
        return await _complete(body, _prompt(body), chat=False)

    async def _complete(body: dict, prompt: Prompt, chat: bool):
        name = _field(body, "model", "string")
        if name is not None and name not in names:
            raise APIError(f"model {name!r} is not served here (this server serves {model_id!r})",
                           status=404, param="model", code="model_not_found")
        p = _params(body, chat)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        job, inbox = _start(p, prompt, rid)
        kind, value = await inbox.get()
        if kind == "error":
            job.cancel()
            raise _as_api_error(value)
        shape = _Shape(rid, chat, model_id)
        if p.stream:
            return StreamingResponse(_sse(shape, job, inbox), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        try:
            while (item := await inbox.get())[0] == "text":
                pass
        finally:
            job.cancel()  # no-op once finished; stops the engine if this handler is torn down
        kind, value = item
        if kind == "error":
            raise _as_api_error(value)
        return shape.response(value)

    def _start(p: _Params, prompt: Prompt, rid: str) -> tuple[Job, asyncio.Queue]:
        """Queue the generation on the worker and a reader thread that feeds the returned inbox."""
        loop, inbox, job = asyncio.get_running_loop(), asyncio.Queue(), Job()

        def work(progress):
            if job.cancelled.is_set():  # the client left while the request waited in the queue
                return iter(())
            pair = worker.pair(model, draft, progress)
            return engine_stream(pair, encode(pair, prompt), p.cfg, cancel=job.cancelled)

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
                metrics.error()
                send(("error", e))
                return
            if outcome is not None:
                metrics.record(rid, outcome)
            send(("done", outcome))

        worker.call(work, job)
        threading.Thread(target=read, name=f"reader-{rid}", daemon=True).start()
        return job, inbox

    return app


def _as_api_error(e: Exception) -> APIError:
    """A generation's error, as the reader thread counted it: ValueError means a bad request."""
    if isinstance(e, ValueError):  # the engine or the loader refusing this request's input
        err = APIError(str(e), 400)
    else:
        err = APIError(f"generation failed: {type(e).__name__}: {e}", 500)
    err.counted = True
    return err


async def _body(request: Request) -> dict:
    try:
        body = json.loads(await request.body())
    except ValueError as e:
        raise APIError(f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object")
    return body


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
            env["dflash"] = dflash_stats(s)
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


async def _sse(shape: _Shape, job: Job, inbox: asyncio.Queue):
    """Server-sent events: one chunk per engine cycle, then a final chunk with finish_reason,
    usage and dflash stats, then [DONE]. A client that disconnects cancels the generation."""
    try:
        if shape.chat:
            yield _event(shape.chunk(None, role=True))
        while True:
            kind, value = await inbox.get()
            if kind == "text":
                yield _event(shape.chunk(value))
            elif kind == "done":
                yield _event(shape.chunk(None, value))
                break
            elif kind == "error":
                e = _as_api_error(value)
                yield _event(_error_body(str(e), e.status))
                break
        yield "data: [DONE]\n\n"
    finally:
        job.cancel()


def main(argv=None) -> int:
    from .cli import add_model_args

    p = argparse.ArgumentParser(prog="python -m dflash serve",
                                description="OpenAI-compatible API (/v1) and /metrics for a DFlash pair.")
    add_model_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args(argv)

    import uvicorn

    worker = Worker()
    try:
        preload(worker, a.model, a.draft, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    uvicorn.run(create_app(worker, a.model, a.draft), host=a.host, port=a.port)
    return 0
