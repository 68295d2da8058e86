"""Attention on the CPU, computed so that a token's row is bitwise the same decoded alone, inside
a block or inside a tree (the engine's outputs then equal target-only decoding exactly).

With OpenBLAS, mx.fast's attention reduces p @ v in key blocks that depend on the key count,
so a row would differ alone vs inside a block. Here p @ v sums fixed key chunks aligned at
position 0 (`rows_invariant`), a tree's rows sum exactly what their paths alone sum
(`TreeAttention`), softmax and SwiGLU run in numpy (host_ops.py) and RoPE rotates by a table
whose entries depend on the position only (`rope_table`). Where the BLAS needs padded rows
(Intel's SkylakeX kernels: a row tile > 0), score calls pad rows and keys (cpu_rows.py).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .. import backend
from ..layout import Layout
from . import cpu_rows, host_ops

KEY_CHUNK = 256  # p @ v reduces over fixed key chunks: see rows_invariant
# A causal pass of more rows than this is a prompt chunk (target.PREFILL_CHUNK): no decode ever
# compares its rows with its own, both modes prefill alike, so it takes the cheap path (`prefill`)
PREFILL_ROWS = 128
# Intel's padded path: a tree row copies its last chunk's keys, so shorter chunks make a tree
# pass cheaper (trees of 15 / 31 nodes ran 4.7 / 8.5 % faster, a 1-token step no slower)
TILED_KEY_CHUNK = 128


def rotates_by_table(rope, head_dim: Optional[int] = None) -> bool:
    """Whether q and k rotate by rope_table: plain rotate-half RoPE over the whole head, on the
    CPU, where mx.fast.rope is a graph of ~15 ops that rebuilds the table for every q and k."""
    return (type(rope) is nn.RoPE and not rope.traditional and head_dim in (None, rope.dims)
            and backend.on_cpu())


def rope_table(rope, positions: mx.array) -> tuple[mx.array, mx.array]:
    """(cos, sin) [L, dims] at integer positions [L], laid out for rotate: cos twice, then -sin
    and sin. Every entry depends on its position only, so a token rotates bitwise the same
    alone, in a block and in a tree."""
    half = rope.dims // 2
    inv = mx.exp(mx.arange(half, dtype=mx.float32) * (-math.log(rope.base) / half)) * rope.scale
    angles = positions.astype(mx.float32)[:, None] * inv
    cos, sin = mx.cos(angles), mx.sin(angles)
    return mx.concatenate([cos, cos], axis=-1), mx.concatenate([-sin, sin], axis=-1)


def rotate(q: mx.array, k: mx.array, table) -> tuple[mx.array, mx.array]:
    """q [B, Hq, L, D] and k [B, Hkv, L, D] rotated together by a rope_table (rotate-half)."""
    # [x1 c - x2 s, x2 c + x1 s] as x * [c, c] + [x2, x1] * [-s, s]: the same bits (negating a
    # factor negates the product exactly), three ops fewer a layer
    cos, sin = table
    x = mx.concatenate([q, k], axis=1)
    half = cos.shape[-1] // 2
    x = x * cos + mx.concatenate([x[..., half:], x[..., :half]], axis=-1) * sin
    return x[:, : q.shape[1]], x[:, q.shape[1] :]


def key_chunk(tile: int) -> int:
    """Keys a p @ v call reduces over: shorter where rows pad to a tile (Intel's kernels)."""
    return TILED_KEY_CHUNK if tile else KEY_CHUNK


def rows_invariant(q, k, v, scale, tile: int = 0, mask: Optional[np.ndarray] = None):
    """Causal attention whose p @ v sums fixed-size key chunks (key_chunk) aligned at position 0.

    A token's row reduces over the same chunks in the same order whether it is decoded alone
    (t+1 keys) or inside a block (t+L keys, the later ones weighted exactly 0). mask [L, L]:
    which of the pass's own keys each row sees, instead of the causal ones (a tree:
    TreeAttention); every row sees all the keys before them.
    """
    B, Hq, L, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    if mask is None and L > PREFILL_ROWS and host_ops.runs(q):
        return prefill(q, k, v, scale)
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, L, D)
    scores = cpu_rows.scores(q, k[:, :, None].swapaxes(-1, -2), tile)
    if mask is None and L > 1:
        mask = np.tri(L, dtype=bool)
    p = softmax(scores, np.arange(S - L, S), mask)  # a tree's rows here share the chunk of C's keys
    return _p_at_v(p, v, key_chunk(tile), batched=not tile).reshape(B, Hq, L, D)


def prefill(q, k, v, scale):
    """Causal attention of a prompt chunk's L rows (the last L of k's S keys), cheap rather than
    row-invariant, all in numpy (its BLAS; no copies back and forth): one score matmul, the mask
    on the chunk's own keys only, the softmax in place, one p @ v matmul. At 2k keys ~2.8x less
    time than rows_invariant; the prefill's rows are never compared with a decode's."""
    B, Hq, L, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = Hq // Hkv
    mx.eval(q, k, v)
    qn, kn, vn = (np.array(x, copy=False) for x in (q, k, v))
    a = np.matmul((qn * np.float32(scale)).reshape(B, Hkv, G * L, D), kn.swapaxes(-1, -2))
    a = a.reshape(B, Hkv, G, L, S)
    a[..., S - L :][..., np.triu(np.ones((L, L), bool), 1)] = -np.inf  # a row's later keys
    np.subtract(a, a.max(axis=-1, keepdims=True), out=a)
    np.exp(a, out=a)
    a /= a.sum(axis=-1, keepdims=True)
    return mx.array(np.matmul(a.reshape(B, Hkv, G * L, S), vn).reshape(B, Hq, L, D))


def softmax(scores: mx.array, positions: np.ndarray, tail_mask: Optional[np.ndarray] = None) -> mx.array:
    """The attention's softmax over keys, rows at these positions [L], each seeing the keys
    before the last k and, of those, the ones tail_mask [L, k] marks (None: all): in numpy on a
    CPU (host_ops), each row's keys before its own KEY_CHUNK in fixed chunks, then in order."""
    if host_ops.runs(scores):
        return host_ops.softmax(scores, positions // KEY_CHUNK * KEY_CHUNK, KEY_CHUNK, tail_mask)
    if tail_mask is not None:
        seen = np.ones((tail_mask.shape[0], scores.shape[-1]), dtype=bool)
        seen[:, -tail_mask.shape[-1] :] = tail_mask
        scores = mx.where(mx.array(seen), scores, -mx.inf)
    return mx.softmax(scores, axis=-1, precise=True)


def _p_at_v(p, v, chunk: int, batched: bool) -> mx.array:
    """p [B, Hkv, G, L, S] @ v [B, Hkv, S, D] summed key chunk by key chunk in order, as
    _add_chunks; `batched`: the whole chunks' products in one matmul (a chunk's product is what
    the loop's call computes where a row's result does not depend on its call's other rows: the
    Sandybridge kernels) and summed by one reduction, which saves two ops per chunk."""
    B, Hkv, G, L, S = p.shape
    n, D = S // chunk, v.shape[-1]
    if not batched or n < 2:
        return _add_chunks(None, p, v[:, :, None], chunk)
    c0 = n * chunk
    pc = p[..., :c0].reshape(B, Hkv, G * L, n, chunk).swapaxes(2, 3)  # [B, Hkv, n, G L, chunk]
    products = pc @ v[:, :, :c0].reshape(B, Hkv, n, chunk, D)
    out = products.sum(axis=2)  # MLX's CPU reduces an outer axis in order: the loop's adds, one op
    return _add_chunks(out.reshape(B, Hkv, G, L, D), p[..., c0:], v[:, :, None, c0:], chunk)


def _add_chunks(out, p, v, chunk: int):
    """out + p @ v, summed key chunk by key chunk in order, the last padded to a whole chunk."""
    for c in range(0, p.shape[-1], chunk):
        pc, vc = p[..., c : c + chunk], v[..., c : c + chunk, :]
        if (pad := chunk - pc.shape[-1]):
            pc = mx.pad(pc, [(0, 0)] * (pc.ndim - 1) + [(0, pad)])
            vc = mx.pad(vc, [(0, 0)] * (vc.ndim - 2) + [(0, pad), (0, 0)])
        out = pc @ vc if out is None else out + pc @ vc
    return out


class TreeAttention:
    """A CPU tree pass's attention over C committed keys, shared by its layers (`over(cache)`
    gives a layer's attend): each row sums exactly what decoding its path alone sums.

    Sandybridge kernels (tile 0) with every node in the committed keys' last chunk: the chain's
    attention with the tree's mask. A node's ancestors precede it in tree order as in its path,
    and those kernels and MLX's CPU softmax sum over keys in order, adding exact zeros for the
    masked ones. Otherwise (Intel's padded kernels; nodes spilling into the next chunk) each
    row's ancestors are laid out by depth: _tree_rows_invariant. What a pass shares is built
    once, not per layer."""

    def __init__(self, tree: Layout, C: int, tile: int):
        chunk, R = key_chunk(tile), tree.visible.shape[0]
        if not tile and C % chunk + R <= chunk:
            self.attend = partial(rows_invariant, mask=np.array(tree.visible))
        else:
            valid = mx.arange(tree.ancestors.shape[1])[None] <= tree.depth[:, None]
            off = _off_spine_keys(tree, C, chunk)
            self.attend = partial(_tree_rows_invariant, tree=tree, valid=valid, off=off, tile=tile,
                                  positions=C + np.array(tree.depth))

    def over(self, cache):
        return self.attend


def _off_spine_keys(tree: Layout, C: int, chunk: int) -> mx.array:
    """[R - spine, W]: per row off the spine, the cache positions of its last key chunk(s) as
    decoding its path alone has them (the committed keys from the chunk's start, then its
    ancestors), padded to whole chunks with position C (weighted 0). Built once a pass."""
    s, (R, Dm) = tree.spine, tree.ancestors.shape
    c0 = C // chunk * chunk
    tail = np.broadcast_to(np.arange(c0, C), (R - s, C - c0))
    ancestors = C + np.array(tree.ancestors[s:])  # padded with the root
    pad = np.full((R - s, -(C - c0 + Dm) % chunk), C)
    return mx.array(np.concatenate([tail, ancestors, pad], axis=1).astype(np.int32))


def _tree_rows_invariant(q, k, v, scale, tree: Layout, valid: mx.array, off: mx.array, positions: np.ndarray,
                         tile: int = 0):
    """Tree attention that sums like rows_invariant on a token decoded alone.

    Each row sees the committed keys and then its ancestors, in the contiguous sequence it would
    have after its path is committed: same positions, same key chunks, same order, masked keys
    only at the end. Chunks of committed keys are shared by all rows. The spine's rows (a chain
    from the root, first in the pass) find their ancestors in place after the committed keys,
    as a chain's rows do; every other row gathers its last chunk(s) in one take (`off`:
    _off_spine_keys).
    """
    B, Hq, R, D = q.shape
    Hkv, C = k.shape[1], k.shape[2] - R
    s, Dm = tree.spine, tree.ancestors.shape[1]
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, R, D)
    s_ctx = cpu_rows.scores(q, k[:, :, None, :C].swapaxes(-1, -2), tile)
    s_blk = cpu_rows.scores(q[..., :s, :], k[:, :, None, C : C + Dm].swapaxes(-1, -2), tile)
    if s < R:  # per row: its G query heads against its own ancestors (one call a row and kv head)
        kb = k[:, :, C:][:, :, tree.ancestors[s:]]  # [B, Hkv, R - s, Dm, D]
        s_off = cpu_rows.scores(q[..., s:, :].swapaxes(2, 3), kb.swapaxes(-1, -2), tile).swapaxes(2, 3)
        s_blk = mx.concatenate([s_blk, s_off], axis=3)
    s_blk = mx.where(valid, s_blk, -mx.inf)  # [R, Dm]: ancestors by depth, then padding
    p = softmax(mx.concatenate([s_ctx, s_blk], axis=-1), positions)
    chunk = key_chunk(tile)
    c0 = C // chunk * chunk
    out = _add_chunks(None, p[..., :c0], v[:, :, None, :c0], chunk) if c0 else None
    tail_p = p[..., c0:]
    spine = _add_chunks(None if out is None else out[..., :s, :], tail_p[..., :s, :],
                        v[:, :, None, c0 : C + Dm], chunk)
    if s == R:
        return spine.reshape(B, Hq, R, D)
    off_p = mx.pad(tail_p[..., s:, :], [(0, 0)] * 4 + [(0, off.shape[1] - tail_p.shape[-1])])
    rest = _add_chunks(None if out is None else out[..., s:, :].swapaxes(2, 3),
                       off_p.swapaxes(2, 3), v[:, :, off], chunk).swapaxes(2, 3)  # [B, Hkv, G, R - s, D]
    return mx.concatenate([spine, rest], axis=3).reshape(B, Hq, R, D)
