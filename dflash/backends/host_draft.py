"""The drafter's block pass on a CPU: matmuls in MLX, elementwise work in numpy.

MLX's Linux CPU backend evaluates elementwise ops one scalar at a time (exp ~14 ns an element
against numpy's SIMD ~0.5) and builds mx.fast's RoPE and attention there from many smaller ops,
so a 16-position draft spent more time in SiLU, softmax and RoPE than in its matmuls. Here the
drafter's own Linear layers and the attention's two products stay MLX calls (on the same BLAS
threads as the target; a second BLAS pool, numpy's, spinning beside them slowed the target's
verify pass by half), and norms, RoPE, softmax and SiLU run in numpy between them: a block of
16 in ~15 ms instead of ~24 on a 2-core CPU (lab/cpu/README.md, section 22).

Drafts are only proposals: the target verifies every token, so this changes no output, only
how fast proposals come (and, within float32 rounding, which ones). Training keeps the MLX
layers (this pass has no gradient); the context's K/V stay the MLX path's.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .. import backend

LAYERS = ("full_attention", "sliding_attention")


def runs(drafter) -> bool:
    """Whether the drafter's block pass runs this way here: on a CPU, for the layers it
    implements (full or sliding attention, plain RoPE)."""
    a = drafter.args
    return (backend.on_cpu() and backend.uses("host_draft") and a.rope_scaling is None
            and all(t in LAYERS for t in (a.layer_types or ["full_attention"])))


def forward(drafter, block_embeds: mx.array, cache: list) -> mx.array:
    """Drafter.__call__: the block's final hidden states [1, L, H]; the block sits right after
    the context and attends to [context ; block] with no mask."""
    a = drafter.args
    eps, Hq, Hkv = a.rms_norm_eps, a.num_attention_heads, a.num_key_value_heads
    h = _np(block_embeds[0])
    L, offset = h.shape[0], cache[0].offset
    rope = _rope_table(a, offset, L)
    for layer, c in zip(drafter.layers, cache):
        attn, mlp = layer.self_attn, layer.mlp
        x = mx.array(_rms(h, layer.input_layernorm, eps))
        q, k, v = _host(attn.q_proj(x), attn.k_proj(x), attn.v_proj(x))
        q = _rotate(_rms(_heads(q, Hq), attn.q_norm, eps), rope)  # [Hq, L, D]
        k = _rotate(_rms(_heads(k, Hkv), attn.k_norm, eps), rope)
        keys, values = mx.array(k)[None], mx.array(_heads(v, Hkv))[None]
        start, mask = attn.visible(c.offset, L)
        if c.offset:
            ctx_k, ctx_v = c.keys_and_values()
            start -= c.offset - ctx_k.shape[2]  # the cache may keep only the latest positions
            keys = mx.concatenate([ctx_k[:, :, start:], keys], 2)
            values = mx.concatenate([ctx_v[:, :, start:], values], 2)
        q = mx.array(q.reshape(Hkv, Hq // Hkv, L, -1) * attn.scale)
        s = _np(q @ keys[0][:, None].swapaxes(-1, -2))  # [Hkv, G, L, S]
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        o = mx.array(p / p.sum(-1, keepdims=True)) @ values[0][:, None]  # [Hkv, G, L, D]
        h = h + _np(attn.o_proj(o.reshape(Hq, L, -1).transpose(1, 0, 2).reshape(L, -1)))
        x = mx.array(_rms(h, layer.post_attention_layernorm, eps))
        g, u = _host(mlp.gate_proj(x), mlp.up_proj(x))
        with np.errstate(over="ignore"):  # exp(-g) = inf for g < -88: SiLU's 0, as MLX's
            h = h + _np(mlp.down_proj(mx.array(g / (1.0 + np.exp(-g)) * u)))
    return mx.array(_rms(h, drafter.norm, eps))[None]


def _host(*xs: mx.array) -> list[np.ndarray]:
    """numpy copies of MLX arrays, evaluated together."""
    mx.eval(*xs)
    return [_np(x) for x in xs]


def _np(x: mx.array) -> np.ndarray:
    return np.array(x if x.dtype == mx.float32 else x.astype(mx.float32))


def _heads(x: np.ndarray, n: int) -> np.ndarray:
    """[L, n*D] -> [n, L, D]"""
    return x.reshape(x.shape[0], n, -1).transpose(1, 0, 2)


def _rms(x: np.ndarray, norm, eps: float) -> np.ndarray:
    """An nn.RMSNorm of the drafter, applied to a numpy array."""
    return x * (1.0 / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)) * _np(norm.weight)


def _rope_table(a, offset: int, n: int):
    """cos, sin [n, D/2] of rotate-half RoPE (nn.RoPE, traditional=False) at offset.."""
    half = a.head_dim // 2
    inv = a.rope_theta ** (-np.arange(half, dtype=np.float64) / half)
    angles = (np.arange(offset, offset + n, dtype=np.float64)[:, None] * inv).astype(np.float32)
    return np.cos(angles), np.sin(angles)


def _rotate(x: np.ndarray, table) -> np.ndarray:
    cos, sin = table
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
