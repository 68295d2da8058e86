"""The target's exp-bound ops on a CPU in numpy: SwiGLU and the attention's softmax.

MLX's Linux CPU backend evaluates exp one scalar at a time (~14 ns an element; numpy's SIMD exp
~0.5), so a 16-row verify pass spent ~25 of its ~110 ms in SwiGLU and softmax. Every pass of
the target calls these, the 1-token step as much as a verify pass, so a token's row is computed
the same way alone and in a block, as losslessness needs:
- numpy's exp of an element does not depend on the array around it (its SIMD and remainder
  loops compute the same polynomial);
- the softmax sums each row in order (np.add.accumulate), so keys masked to exact zeros add
  nothing wherever they sit, as MLX's sequential CPU softmax did (np.sum's pairwise tree
  would group a row differently by its length).
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


def softmax(scores: mx.array) -> mx.array:
    """Softmax over the last axis, each row summed in order."""
    x = np.array(scores, copy=False)
    e = np.exp(x - x.max(-1, keepdims=True))
    return mx.array(e / np.add.accumulate(e, axis=-1)[..., -1:])
