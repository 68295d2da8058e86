"""Where a target pass spends its time, by kind of op (`bench --profile`'s per-op table).

MLX evaluates a pass's graph lazily, in one go, so op kinds cannot be told apart inside a normal
pass. Here a separate pass runs with barriers: each of the target's modules below (and
target.py's RoPE table functions, where the CPU rotates q and k by table) is swapped for a
wrapper that evaluates its inputs (charging the time since the previous barrier to
"elementwise"), then its output (charging the module's kind). What no wrapper covers falls
between barriers: residual adds, SwiGLU, q/k norms, reshapes, transposes, padding. Each barrier
is one `mx.eval`, whose own cost lands in the kind it closes, so the barriered pass is slower
than a plain one; the table reports both, and shares of the barriered pass.
"""

from __future__ import annotations

from contextlib import contextmanager
from statistics import median
from time import perf_counter

import mlx.core as mx
import mlx.nn as nn

from .backends import cpu_attention

KINDS = ("embedding", "norm", "matmul", "rope", "attention", "kv_cache", "elementwise", "logits")
_LAYER_MODULES = {
    "input_layernorm": "norm", "post_attention_layernorm": "norm",
    "self_attn.q_proj": "matmul", "self_attn.k_proj": "matmul", "self_attn.v_proj": "matmul",
    "self_attn.o_proj": "matmul", "self_attn.rope": "rope",
    "mlp.gate_proj": "matmul", "mlp.up_proj": "matmul", "mlp.down_proj": "matmul",
}


class _Clock:
    """Charges wall time between barriers to op kinds (ms)."""

    def __init__(self):
        self.ms = dict.fromkeys(KINDS, 0.0)
        self.t = perf_counter()

    def barrier(self, kind: str, *arrays) -> None:
        mx.eval(*[a for a in arrays if isinstance(a, mx.array)])
        now = perf_counter()
        self.ms[kind] += (now - self.t) * 1e3
        self.t = now

    def wrap(self, fn, kind: str):
        def timed(*args, **kwargs):
            self.barrier("elementwise", *args)
            out = fn(*args, **kwargs)
            self.barrier(kind, *(out if isinstance(out, tuple) else (out,)))
            return out
        return timed


def _swaps(target, cache: list, clock: _Clock) -> list[tuple[object, str, object]]:
    """(owner, attribute, wrapper) for every swapped callable of a llama-family target."""
    swaps = [(target, "embed", "embedding"), (target.backbone, "norm", "norm"),
             (target, "logits", "logits"), (target, "_attend", "attention"),
             (target, "_rope_table", "rope"), (cpu_attention, "rotate", "rope")]
    by_table = cpu_attention.rotates_by_table(target.layers[target._kv_idx].self_attn.rope)
    for layer in target.layers:
        for path, kind in _LAYER_MODULES.items():
            if path == "self_attn.rope" and by_table:  # rotated by cpu_attention.rotate: a wrapper here would
                continue                               # send the pass down mx.fast.rope
            *parents, name = path.split(".")
            owner = layer
            for p in parents:
                owner = getattr(owner, p)
            if hasattr(owner, name):
                swaps.append((owner, name, kind))
    for linears in target._linears or []:  # the padded-rows path calls its own matmuls
        swaps += [(p, "fn", "matmul") for p in linears.matmuls()]
    swaps += [(c, "update_and_fetch", "kv_cache") for c in cache]
    return [(o, n, clock.wrap(getattr(o, n), kind)) for o, n, kind in swaps]


@contextmanager
def _instrumented(target, cache: list, clock: _Clock):
    swaps = _swaps(target, cache, clock)
    originals = [(o, n, getattr(o, n), n in vars(o)) for o, n, _ in swaps]
    try:
        for o, n, w in swaps:
            _set(o, n, w)
        yield
    finally:
        for o, n, orig, own in reversed(originals):
            _set(o, n, orig) if own else object.__delattr__(o, n)


def _set(owner, name: str, value) -> None:
    """On an nn.Module, an instance attribute that shadows the module's own entry."""
    (object.__setattr__ if isinstance(owner, nn.Module) else setattr)(owner, name, value)


def op_kinds(target, cache: list, forward, undo, k: int, reps: int) -> dict:
    """ms per op kind of a k-token pass (medians of `reps` barriered passes after one warm-up),
    with `forward(k)` running and evaluating the pass and `undo(out)` putting the cache back."""
    if target._attend is None:
        raise ValueError("the per-op profile covers the CPU path of attention-only targets")
    runs = []
    for _ in range(reps + 1):
        clock = _Clock()
        with _instrumented(target, cache, clock):
            clock.t = perf_counter()
            out = forward(k)
            clock.barrier("elementwise")
        undo(out)
        runs.append(clock.ms)
    kinds = {kind: median(r[kind] for r in runs[1:]) for kind in KINDS}
    total = sum(kinds.values())
    return {"ms": kinds, "barriered_ms": total, "share": {kind: v / total for kind, v in kinds.items()}}
