"""The target's exp-bound ops on a CPU in numpy: SwiGLU and the attention's softmax.

MLX's Linux CPU backend evaluates exp one scalar at a time (~14 ns an element; numpy's SIMD exp
~0.5), so a 16-row verify pass spent ~25 of its ~110 ms in SwiGLU and softmax. Every pass of
the target calls these, the 1-token step as much as a verify pass, so a token's row is computed
the same way alone and in a block, as losslessness needs:
- numpy's exp of an element does not depend on the array around it (its SIMD and remainder
  loops compute the same polynomial);
- the softmax sums a row by its keys' positions alone (_row_sums: fixed chunks below the row's
  own chunk, then in order), so keys masked to exact zeros add nothing wherever they sit (np.sum's
  pairwise tree would group a row differently by its length).
The price is two host round trips a layer (~45 us each: ~2.5 ms of a ~50 ms 1-token step); a
16-row pass gains ~30 ms (lab/cpu/README.md, section 23). Not bitwise MLX's own exp, so the
target's logits move within float32 rounding from what mlx-lm computes.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .. import backend



def runs(x: mx.array) -> bool:
    """Whether ops on x go through numpy here: on a CPU, in float32 (a target's dtype is fixed,
    so its every pass takes the same side)."""
    return x.dtype == mx.float32 and backend.on_cpu() and backend.uses("host_ops")


def swiglu(gate: mx.array, up: mx.array) -> mx.array:
    """silu(gate) * up."""
    mx.eval(gate, up)
    g, u = np.array(gate, copy=False), np.array(up, copy=False)
    with np.errstate(over="ignore"):  # exp(-g) = inf for g < -88: SiLU's 0
        return mx.array(g / (1.0 + np.exp(-g)) * u)


def softmax(scores: mx.array, first=None, chunk: int = 256, tail_mask=None) -> mx.array:
    """Softmax over the last axis, each row's sum fixed by its keys' positions alone (_row_sums).

    first: per row (along axis -2), a multiple of `chunk` at or below the row's own position, or
    None (every row summed in order). tail_mask [L, k] bool: which of the last k keys each row
    sees (the pass's own: causal, or a tree's ancestors); the others weigh exactly 0 and stay out
    of the row's max, as they are for a row decoded alone. Masking here, in place, costs a 16-row
    pass at 4k keys ~20 ms less than an MLX `where` over the whole scores."""
    x = np.array(scores, copy=False)
    if tail_mask is None:
        e = x - x.max(-1, keepdims=True)
    else:
        k = tail_mask.shape[-1]
        tail = np.where(tail_mask, x[..., -k:], -np.inf)
        m = tail.max(-1, keepdims=True)
        if x.shape[-1] > k:
            m = np.maximum(x[..., :-k].max(-1, keepdims=True), m)
        e = x - m
        e[..., -k:] = tail - m
    np.exp(e, out=e)
    e /= _row_sums(e, first, chunk)[..., None]
    return mx.array(e)


def _row_sums(e: np.ndarray, first, chunk: int) -> np.ndarray:
    """Each row's sum of e: the keys before its `first` in chunks of `chunk`, each chunk by a
    fixed pairwise tree and the chunk sums in order; then the keys from `first` on, in order.

    A row decoded alone (its keys end at its position) and the same row in a block (later keys
    exact zeros, or a tree's other nodes as zeros between its ancestors) have the same keys
    before `first` and the same nonzero keys after it in the same order, so the same sum. In
    order everywhere (np.add.accumulate: ~4 ns a key, no SIMD) cost a 16-row pass at 7k keys
    ~3.6 ms a layer; the chunk trees are vectorised."""
    if first is None or not first.any():
        return np.add.accumulate(e, axis=-1)[..., -1]
    R, S = e.shape[-2:]
    n, lo = int(first.max()) // chunk, int(first.min())
    v = e[..., : n * chunk].reshape(*e.shape[:-1], n, chunk)
    while v.shape[-1] > 1:  # the same tree for every chunk, whatever the row or its length
        v = v[..., : v.shape[-1] // 2] + v[..., v.shape[-1] // 2 :]
    k = first // chunk  # whole chunks each row takes
    done = np.add.accumulate(v[..., 0], axis=-1)[..., np.arange(R), np.maximum(k - 1, 0)]
    done = np.where(k > 0, done, 0)
    tail = e[..., lo:]
    if n * chunk > lo:  # rows whose first is past lo: their keys before it are in `done`
        tail = np.where(np.arange(lo, S) >= first[:, None], tail, 0)
    return np.add.accumulate(np.concatenate([done[..., None], tail], axis=-1), axis=-1)[..., -1]
