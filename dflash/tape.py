"""Exact rollback of GatedDeltaNet layers by tape replay (docs/algorithm.md: One cycle, rollback).

A GDN layer's recurrent state cannot be trimmed like a KV cache. During verify we keep the
state before the block (a reference, not a copy) and record, per step t, the decay g_t, the key
k_t and the innovation delta_t = beta_t * (v_t - (g_t * S_{t-1}) k_t), plus the conv inputs.
Keeping n steps is then S <- g_t * S + k_t (x) delta_t for t < n, from the snapshot: no
state-key products are recomputed. Extra memory per layer: block x (Hv*Dv + Hk*Dk + conv_dim).

The recurrence is written with the same MLX ops, in the same order, as mlx-lm's reference
`gated_delta_ops`, so a verify pass computes what one-token decoding computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.gated_delta import compute_g, normalize_qk


@dataclass
class GDNTape:
    conv0: mx.array  # conv state before the block (B, K-1, conv_dim)
    state0: mx.array  # recurrent state before the block (B, Hv, Dv, Dk), float32
    g: mx.array  # (B, T, Hv)
    k: mx.array  # (B, T, Hv, Dk), keys after head repeat
    delta: mx.array  # (B, T, Hv, Dv)
    conv_in: mx.array  # (B, T, conv_dim)

    def replay(self, n: int) -> tuple[mx.array, mx.array]:
        """(conv state, recurrent state) after the first n steps of the block."""
        s = self.state0
        for t in range(n):
            s = s * self.g[:, t, :, None, None]
            s = s + self.k[:, t, :, None, :] * self.delta[:, t, :, :, None]
        K1 = self.conv0.shape[1]
        conv = mx.concatenate([self.conv0, self.conv_in[:, :n]], axis=1)[:, n : n + K1]
        return mx.contiguous(conv), s


def _project(gdn, x):
    """Family-specific input projections -> (conv input qkv, z, b, a)."""
    B, S, _ = x.shape
    if hasattr(gdn, "in_proj_qkvz"):  # qwen3_next packs q,k,v,z and b,a per key head
        q, k, v, z, b, a = gdn.fix_query_key_value_ordering(gdn.in_proj_qkvz(x), gdn.in_proj_ba(x))
        qkv = mx.concatenate([t.reshape(B, S, -1) for t in (q, k, v)], axis=-1)
        return qkv, z, b, a
    z = gdn.in_proj_z(x).reshape(B, S, gdn.num_v_heads, gdn.head_v_dim)
    return gdn.in_proj_qkv(x), z, gdn.in_proj_b(x), gdn.in_proj_a(x)


def gdn_forward_recorded(gdn, x: mx.array, cache) -> tuple[mx.array, GDNTape]:
    """A GatedDeltaNet layer (mlx-lm qwen3_5 / qwen3_next) over a block, recording its tape."""
    B, S, _ = x.shape
    qkv, z, b, a = _project(gdn, x)
    K1 = gdn.conv_kernel_size - 1
    conv0 = cache[0] if cache[0] is not None else mx.zeros((B, K1, gdn.conv_dim), x.dtype)
    conv_input = mx.concatenate([conv0, qkv], axis=1)
    conv_out = nn.silu(gdn.conv1d(conv_input))
    q, k, v = [
        t.reshape(B, S, h, d)
        for t, h, d in zip(
            mx.split(conv_out, [gdn.key_dim, 2 * gdn.key_dim], -1),
            [gdn.num_k_heads, gdn.num_k_heads, gdn.num_v_heads],
            [gdn.head_k_dim, gdn.head_k_dim, gdn.head_v_dim],
        )
    ]
    q, k = normalize_qk(q, k, inv_scale=gdn.head_k_dim**-0.5, eps=1e-6)
    beta = mx.sigmoid(b)
    g = compute_g(gdn.A_log, a, gdn.dt_bias)
    if (r := gdn.num_v_heads // gdn.num_k_heads) > 1:
        q, k = mx.repeat(q, r, -2), mx.repeat(k, r, -2)
    state0 = cache[1]
    if state0 is None:
        state0 = mx.zeros((B, gdn.num_v_heads, gdn.head_v_dim, gdn.head_k_dim), mx.float32)

    s, ys, deltas = state0, [], []
    for t in range(S):  # same ops, same order as mlx-lm's _gated_delta_step_ops
        s = s * g[:, t, :, None, None]
        kv_mem = (s * k[:, t, :, None, :]).sum(axis=-1)
        delta = (v[:, t] - kv_mem) * beta[:, t, :, None]
        s = s + k[:, t, :, None, :] * delta[..., None]
        ys.append((s * q[:, t, :, None, :]).sum(axis=-1).astype(q.dtype))
        deltas.append(delta)

    cache[0] = mx.contiguous(conv_input[:, -K1:, :])
    cache[1] = s
    cache.advance(S)
    out = gdn.out_proj(gdn.norm(mx.stack(ys, axis=1), z).reshape(B, S, -1))
    return out, GDNTape(conv0, state0, g, k, mx.stack(deltas, axis=1), qkv)


def rollback(cache: list, tapes: dict[int, GDNTape], n_fed: int, n_keep: int) -> None:
    """Make every layer's cache hold only the first n_keep of the n_fed tokens just verified."""
    if n_keep == n_fed:
        return
    for i, c in enumerate(cache):
        if i in tapes:
            c[0], c[1] = tapes[i].replay(n_keep)
            if hasattr(c, "offset"):
                c.offset -= n_fed - n_keep
        else:
            c.trim(n_fed - n_keep)
