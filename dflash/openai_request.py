"""An OpenAI request's body, checked before anything runs: its JSON (guard.py has refused a body
over MAX_BODY_BYTES), its text, its fields and their types, the generation settings, the
messages or the prompt. Every refusal is an `APIError`, which server.py renders as OpenAI's
error object. Limits and field policy: docs/api.md."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Union

from fastapi import Request

from .config import DEFAULT_MAX_TOKENS, GenerationConfig
from .guard import has_surrogate

MAX_STOPS = 4
MAX_STOP_CHARS = 1000  # far beyond any real stop sequence (chat templates' end markers: < 30)
MAX_CHARS_PER_TOKEN = 32  # a text prompt longer than this per token of context cannot fit (text: 3-6)
MAX_BODY_BYTES = 2 * 1024 * 1024  # > any supported context as text or token ids (~260k tokens)
MAX_DEPTH = 32  # JSON nesting; OpenAI requests nest 5 deep
ROLES = ("system", "developer", "user", "assistant", "tool")


class APIError(Exception):
    """A refused request, rendered as OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, message: str, status: int = 400, param: Optional[str] = None,
                 code: Optional[str] = None):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code
        self.counted = False  # already counted in the metrics (by the request's reader thread)



# ---- the request body: size, JSON, text ----

async def read_body(request: Request) -> dict:
    """The JSON object of a request (the Guard has refused a body over MAX_BODY_BYTES)."""
    try:
        body = json.loads(await request.body())
    except RecursionError:
        raise APIError(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise APIError(f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object")
    _check_text(body)
    return body


def _check_text(body: dict) -> None:
    """Refuse deep nesting and lone UTF-16 surrogates (guard.has_surrogate)."""
    stack = [("", body, 1)]
    while stack:
        path, v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise APIError(f"the request body nests deeper than {MAX_DEPTH} levels")
        if isinstance(v, str) and has_surrogate(v):
            raise APIError(f"{path or 'the request body'} holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
                           "escape); send valid Unicode text", param=path or None)
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            if isinstance(k, str) and has_surrogate(k):
                stack.append((path, k, depth))  # reported as the object holding the key
                continue
            sub = f"{path}[{k}]" if isinstance(k, int) else (f"{path}.{k}" if path else k)
            stack.append((sub, x, depth + 1))


# ---- request parsing: every caller mistake becomes an APIError naming the field ----

_KINDS = {"integer": int, "number": (int, float), "boolean": bool, "string": str}

# Fields read by parse_params (OpenAI's that we honour, and DFlash's `mode` / `block_size` / `tree` /
# `lookup`).
FIELDS = {"model", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "n", "mode", "block_size",
          "tree", "lookup"}
CHAT_FIELDS = FIELDS | {"messages", "max_completion_tokens"}
COMPLETION_FIELDS = FIELDS | {"prompt"}
# OpenAI fields that do not change the output: accepted and ignored
IGNORED = {"user", "metadata", "store", "stream_options", "service_tier", "parallel_tool_calls"}
# OpenAI fields we cannot honour: accepted only absent, null, or at the value that asks for nothing
NEUTRAL = {"best_of": 1, "echo": False, "logprobs": False, "top_logprobs": 0, "presence_penalty": 0,
           "frequency_penalty": 0, "logit_bias": {}, "tools": [], "tool_choice": "none",
           "functions": [], "function_call": "none", "response_format": {"type": "text"}, "suffix": ""}


def check_fields(body: dict, chat: bool) -> None:
    """One policy for every field (docs/api.md): honour it, ignore it when it cannot change the
    output, else refuse the request naming it, rather than answer as if it had been honoured."""
    known = CHAT_FIELDS if chat else COMPLETION_FIELDS
    for name, v in body.items():
        if name in known or name in IGNORED or v is None:
            continue
        if name not in NEUTRAL:
            raise APIError(f"unknown field '{name}' (the fields this server takes: docs/api.md)", param=name)
        neutral = NEUTRAL[name]
        if not (v is neutral if isinstance(v, bool) or isinstance(neutral, bool) else v == neutral):
            raise APIError(f"'{name}' is not supported by this server (leave it out, or send "
                           f"{json.dumps(neutral)})", param=name, code="unsupported_field")


def field_of(body: dict, name: str, kind: str, default=None):
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, _KINDS[kind]) or (isinstance(v, bool) and kind != "boolean"):
        article = "an" if kind[0] in "aeiou" else "a"
        raise APIError(f"'{name}' must be {article} {kind} (got {json.dumps(v)[:40]})", param=name)
    return v


@dataclass(frozen=True)
class Params:
    cfg: GenerationConfig
    stops: tuple[str, ...]
    stream: bool


def parse_params(body: dict, chat: bool) -> Params:
    max_tokens = field_of(body, "max_tokens", "integer")
    if max_tokens is None and chat:
        max_tokens = field_of(body, "max_completion_tokens", "integer")
    if field_of(body, "n", "integer", 1) != 1:
        raise APIError("only n=1 is supported", param="n")
    cfg = GenerationConfig(
        mode=field_of(body, "mode", "string", "dflash"),
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        block_size=field_of(body, "block_size", "integer"),
        temperature=_number(body, "temperature", 0.0),
        top_p=_number(body, "top_p", 1.0),
        seed=field_of(body, "seed", "integer", 0),
        tree=field_of(body, "tree", "integer"),
        lookup=field_of(body, "lookup", "boolean", True),
    )
    validate(cfg)
    stops = body.get("stop")
    stops = [stops] if isinstance(stops, str) else ([] if stops is None else stops)
    if (not isinstance(stops, list) or len(stops) > MAX_STOPS
            or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stops)):
        raise APIError(f"'stop' must be a string of 1..{MAX_STOP_CHARS} characters or an array of at most "
                       f"{MAX_STOPS} of them", param="stop")
    return Params(cfg, tuple(stops), field_of(body, "stream", "boolean", False))


def _number(body: dict, name: str, default: float) -> float:
    try:
        return float(field_of(body, name, "number", default))
    except OverflowError:  # an integer of hundreds of digits
        raise APIError(f"'{name}' is out of range", param=name) from None


def validate(cfg: GenerationConfig, drafter_block_size: Optional[int] = None) -> None:
    try:
        cfg.validate(drafter_block_size)
    except ValueError as e:  # its messages start with the field's name
        raise APIError(str(e), param=str(e).split()[0]) from None


def messages_of(body: dict) -> list[dict]:
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


def prompt_of(body: dict) -> Union[str, list[int]]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        return p
    raise APIError("'prompt' must be a string or an array of token ids (one prompt per request)",
                   param="prompt")

