"""`/metrics`: the last requests and running totals per mode and prompt length, all from the
engine's Summary events (docs/api.md); `bench`'s per-pass statistics from its Cycle events."""

from __future__ import annotations

import threading
from collections import deque
from typing import Optional

from .events import Summary

METRICS_WINDOW = 100
CONTEXT_BUCKETS = (512, 1024, 2048, 4096)  # /metrics: totals per mode by prompt length, these edges


def dflash_stats(s: Summary, note: Optional[str] = None) -> dict:
    """The `dflash` extension field of a response."""
    return {"mode": s.mode, "block_size": s.block_size, "verify": s.verify, "tau": s.tau,
            "acceptance_rate": s.acceptance_rate, "cycles": s.cycles, "tokens": s.tokens,
            "decode_tok_s": s.decode_tok_s, "ttft_s": s.ttft_s, **({"note": note} if note else {})}


def pass_stats(events) -> dict:
    """tokens_verified: mean tokens per target pass (a chain's verify length, a tree's nodes + 1);
    passes: per pass size (1: a plain step), its cycles, mean ms and tokens committed, i.e. which
    shapes a default such as policy.Fallback ran and what each cost."""
    by: dict[int, list] = {}
    for e in (e for e in events if e.kind == "cycle"):
        p = by.setdefault(e.block_size, [0, 0.0, 0])
        p[0], p[1], p[2] = p[0] + 1, p[1] + e.draft_s + e.verify_s + e.rollback_s, p[2] + len(e.committed)
    n = sum(p[0] for p in by.values())
    return {"tokens_verified": sum(k * p[0] for k, p in by.items()) / n if n else 0.0,
            "passes": {str(k): {"cycles": c, "ms": 1e3 * t / c, "tokens": m / c}
                       for k, (c, t, m) in sorted(by.items())}}


# ---- metrics ----

class Metrics:
    """The last `window` requests and running totals, all from the engine's Summary events."""

    def __init__(self, window: int = METRICS_WINDOW):
        self._lock = threading.Lock()
        self.recent: deque = deque(maxlen=window)
        self.requests = self.errors = 0
        self._sums: dict[str, dict] = {}  # by mode

    def record(self, rid: str, o) -> None:
        """o: a finished request's server.Outcome (its Summary, tokens sent, finish reason, note)."""
        s = o.summary
        with self._lock:
            self.requests += 1
            self.recent.append({
                "id": rid, "mode": s.mode, "prompt_tokens": s.prompt_tokens, "tokens": o.completion_tokens,
                "cycles": s.cycles, "tokens_per_cycle": s.tau, "acceptance_rate": s.acceptance_rate,
                "decode_tok_s": s.decode_tok_s, "ttft_s": s.ttft_s, "finish_reason": o.finish_reason,
                "verify": s.verify, **({"note": o.note} if o.note else {}),
            })
            for key in (s.mode, (s.mode, context_bucket(s.prompt_tokens))):
                m = self._sums.setdefault(key, dict.fromkeys(
                    ("requests", "tokens", "cycles", "tau_x_cycles", "acc_x_cycles", "decode_tokens", "decode_s"), 0))
                m["requests"] += 1
                m["tokens"] += o.completion_tokens
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
        modes = {mode: m for mode, m in sums.items() if isinstance(mode, str)}
        everything = {k: sum(m[k] for m in modes.values()) for k in next(iter(modes.values()), {})}

        def by_context(mode):  # tau falls or holds as the context grows: buckets in order
            return {b: {"requests": m["requests"], **_totals(m)} for b in BUCKET_NAMES
                    if (m := sums.get((mode, b)))}
        return {"window": self.recent.maxlen, "requests": recent,
                "totals": {"requests": requests, "errors": errors, **_totals(everything),
                           "by_mode": {mode: {"requests": m["requests"], **_totals(m), "by_context": by_context(mode)}
                                       for mode, m in modes.items()}}}


BUCKET_NAMES = [f"{a}-{b - 1}" for a, b in zip((0, *CONTEXT_BUCKETS), CONTEXT_BUCKETS)] + [f"{CONTEXT_BUCKETS[-1]}+"]


def context_bucket(prompt_tokens: int) -> str:
    """The /metrics bucket of a request's prompt length ("0-511", ..., "4096+")."""
    return BUCKET_NAMES[sum(prompt_tokens >= e for e in CONTEXT_BUCKETS)]


def _totals(m: dict) -> dict:
    cycles = m.get("cycles", 0)
    return {"tokens": m.get("tokens", 0), "cycles": cycles,
            "tokens_per_cycle": m["tau_x_cycles"] / cycles if cycles else 0.0,
            "acceptance_rate": m["acc_x_cycles"] / cycles if cycles else 0.0,
            "decode_tok_s": m["decode_tokens"] / m["decode_s"] if m.get("decode_s") else 0.0}
