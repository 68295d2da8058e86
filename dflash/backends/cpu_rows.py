"""Fixed row and key counts for the CPU target's matmuls, where the BLAS kernels need them.

OpenBLAS's AVX-512 (SkylakeX) sgemm computes a row bitwise the same whatever the call's row
count only when that count is a multiple of a tile, and the tile depends on the weight's shape
(it picks code paths by size: 8 rows for a 192-wide k projection, 2 for a fused 960-wide q|k|v,
1 for a 1536-wide gate). So each projection is a `Padded` call that pads its rows to the tile
`exact_tile` found for that shape on this host, by trying, and attention scores pad both counts
(`scores`: 8 rows x KEY_TILE keys). A tile of 0 changes nothing.
"""

from __future__ import annotations

from typing import Callable

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.activations import swiglu

from . import host_ops

KEY_TILE = 16  # the SkylakeX sgemm's unroll over the output columns
TILES = (1, 2, 4, 8, 16, 32, 64)  # tiny shapes need the large ones: every call on one side of a size threshold
MAX_ROWS = 65  # the longest pass that must be row-exact: a 64-node tree and its root


def _pad_axis(x: mx.array, axis: int, multiple: int) -> mx.array:
    n = x.shape[axis]
    extra = -n % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return mx.pad(x, widths)


def unpad(x: mx.array, rows: int) -> mx.array:
    """The first `rows` rows of x [B, P, ...]."""
    return x if x.shape[1] == rows else x[:, :rows]


def scores(q: mx.array, k_t: mx.array, tile: int) -> mx.array:
    """q [..., L, D] @ k_t [..., D, S] as BLAS calls of one shape: `tile` rows x KEY_TILE keys,
    both operands contiguous (L and S padded up). A score then never depends on how many rows
    or keys its call had, nor on OpenBLAS's choice of code path (by size and layout: a key view
    arriving transposed, a padded copy not) that otherwise changes a row's bits at some context
    lengths (lab/cpu/README.md)."""
    if not tile:
        return q @ k_t
    L, S = q.shape[-2], k_t.shape[-1]
    q, k_t = _pad_axis(q, -2, tile), _pad_axis(k_t, -1, KEY_TILE)
    Lp, D, Sp = q.shape[-2], q.shape[-1], k_t.shape[-1]
    qc = mx.contiguous(q.reshape(*q.shape[:-2], Lp // tile, 1, tile, D))
    kc = k_t.reshape(*k_t.shape[:-2], 1, D, Sp // KEY_TILE, KEY_TILE).swapaxes(-3, -2)
    out = qc @ mx.contiguous(kc)  # [..., Lp/tile, Sp/KEY_TILE, tile, KEY_TILE]
    out = out.swapaxes(-3, -2).reshape(*out.shape[:-4], Lp, Sp)
    return out[..., :L, :S]


_exact: dict = {}  # "NxK dtype" -> tile, per process: the BLAS and its thread count are fixed


def call_rows(rows: int, tile: int) -> int:
    """How many rows a projection call computes for `rows` real ones: a multiple of its tile,
    and past 4 rows of 8, since the SkylakeX kernels run 8 or 16 rows faster than 5-7 or 9-15
    (lab/cpu/README.md, section 18)."""
    step = tile if rows <= 4 or tile >= 8 else 8
    return -(-rows // step) * step


def exact_tile(fn: Callable[[mx.array], mx.array], in_dim: int, key, dtype=mx.float32) -> int:
    """The smallest of TILES at which `fn` (a matmul over the last axis) gives every row the
    bits it has alone, in every call a pass of 1..MAX_ROWS rows makes (call_rows). Tried on
    random rows: the BLAS chooses its code path by size, not by data. Cached by `key` (what
    determines that choice: shapes, dtype, bias)."""
    if key in _exact:
        return _exact[key]
    x = mx.random.normal((1, MAX_ROWS, in_dim), key=mx.random.key(0)).astype(dtype)
    for tile in TILES:
        alone = mx.concatenate([_call(fn, x[:, i : i + 1], tile) for i in range(MAX_ROWS)], axis=1)
        counts = sorted({call_rows(L, tile) for L in range(2, MAX_ROWS + 1)})
        if all(mx.array_equal(_call(fn, x[:, : min(c, MAX_ROWS)], tile), alone[:, : min(c, MAX_ROWS)]).item()
               for c in counts):
            _exact[key] = tile
            return tile
    raise RuntimeError(f"no row tile in {TILES} keeps a {key} matmul's rows exact with this BLAS; "
                       "run with the reference BLAS (dflash.backend.setup(cpu_blas='reference'))")


def _call(fn, x: mx.array, tile: int) -> mx.array:
    """fn over x's rows padded with zero rows to call_rows, the real rows back."""
    L = x.shape[1]
    return unpad(fn(_pad_axis(x, 1, call_rows(L, tile)) if call_rows(L, tile) > L else x), L)


class Padded:
    """`fn` (a linear layer, or x @ w.T of fused weights) on rows padded to its exact tile."""

    def __init__(self, fn: Callable[[mx.array], mx.array], in_dim: int, key, tile: int = 0, dtype=mx.float32):
        self.fn = fn
        self.tile = tile or exact_tile(fn, in_dim, key, dtype)

    def __call__(self, x: mx.array) -> mx.array:
        return _call(self.fn, x, self.tile)


def linear(layer: nn.Module) -> Padded:
    """A linear layer (float or quantized) on its exact row tile."""
    w = layer.weight
    in_dim = w.shape[1] * (32 // layer.bits if hasattr(layer, "bits") else 1)
    kind = f"{layer.bits}-bit" if hasattr(layer, "bits") else _name(w.dtype)
    key = f"{w.shape[0]}x{in_dim} {kind}{' +bias' if 'bias' in layer else ''}"
    if type(layer) not in (nn.Linear, nn.QuantizedLinear):  # e.g. a sharded linear
        key += f" {type(layer).__name__}"
    return Padded(layer, in_dim, key, dtype=_dtype(layer))


class Projections:
    """Linears that read the same input (q, k, v; gate, up) -> their outputs: one fused matmul
    where their weights are float and agree in bias (fewer, larger calls, which also need less
    padding), else one call each; every call on its exact tile. Fusing turns the layers'
    weights into views of the fused weight, so memory does not grow."""

    def __init__(self, layers: list[nn.Module]):
        if any(type(l) is not nn.Linear for l in layers) or len({"bias" in l for l in layers}) > 1:
            self.calls, self.splits = [linear(l) for l in layers], None
            return
        w = mx.concatenate([l.weight for l in layers])
        b = mx.concatenate([l.bias for l in layers]) if "bias" in layers[0] else None
        mx.eval(w if b is None else [w, b])
        at, self.splits = 0, []
        for l in layers:
            n = l.weight.shape[0]
            l.weight = w[at : at + n]
            if b is not None:
                l.bias = b[at : at + n]
            at += n
            self.splits.append(at)
        self.splits.pop()
        fn = (lambda x: x @ w.T) if b is None else (lambda x: mx.addmm(b, x, w.T))
        key = f"{w.shape[0]}x{w.shape[1]} {_name(w.dtype)}{' +bias' if b is not None else ''} (fused)"
        self.calls = [Padded(fn, w.shape[1], key, dtype=w.dtype)]

    def __call__(self, x: mx.array) -> list[mx.array]:
        if self.splits is None:
            return [c(x) for c in self.calls]
        return mx.split(self.calls[0](x), self.splits, axis=-1)


def found_tiles() -> dict[str, int]:
    """The row tile found for each matmul shape in this process ("960x576 float32 (fused)": 2)."""
    return dict(_exact)


def _name(dtype: mx.Dtype) -> str:
    return str(dtype).removeprefix("mlx.core.")


def _dtype(layer: nn.Module) -> mx.Dtype:
    return layer.scales.dtype if hasattr(layer, "scales") else layer.weight.dtype


class Layer:
    """A llama-family layer's projections where the CPU BLAS needs padded rows (above):
    q|k|v and gate|up fused, every matmul on the row tile that keeps its rows exact. A
    mixture-of-experts MLP stays mlx-lm's, on its own tile."""

    def __init__(self, layer):
        a, m = layer.self_attn, layer.mlp
        self.qkv = Projections([a.q_proj, a.k_proj, a.v_proj])
        self.o = linear(a.o_proj)
        dense = hasattr(m, "gate_proj")
        self.gate_up = Projections([m.gate_proj, m.up_proj]) if dense else None
        self.down = linear(m.down_proj) if dense else Padded(
            m, layer.input_layernorm.weight.shape[0], f"{type(m).__name__} {m.gate.weight.shape}",
            dtype=layer.input_layernorm.weight.dtype)

    def mlp(self, x: mx.array) -> mx.array:
        return self.down(_swiglu(*self.gate_up(x))) if self.gate_up else self.down(x)

    def matmuls(self) -> list[Padded]:
        return [*self.qkv.calls, self.o, *(self.gate_up.calls if self.gate_up else []), self.down]


def _swiglu(gate: mx.array, up: mx.array) -> mx.array:
    return host_ops.swiglu(gate, up) if host_ops.runs(gate) else swiglu(gate, up)
