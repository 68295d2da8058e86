"""Fixed row and key counts for the CPU target's matmuls, where the BLAS kernels need them.

OpenBLAS's AVX-512 (SkylakeX) sgemm computes a row bitwise the same whatever the call's row
count only when that count is a multiple of a tile (blas.ROW_TILE), and an attention score the
same whatever the key count only when that count is a multiple of KEY_TILE. So a target pass
keeps its residual stream padded with zero rows (`pad`), cuts the real rows out where they
meet attention and the cache (`unpad`), and attention scores pad both counts (`scores`). A
tile of 0 changes nothing.
"""

from __future__ import annotations

import mlx.core as mx

KEY_TILE = 16  # the SkylakeX sgemm's unroll over the output columns


def _pad_axis(x: mx.array, axis: int, multiple: int) -> mx.array:
    n = x.shape[axis]
    extra = -n % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return mx.pad(x, widths)


def pad(x: mx.array, tile: int) -> mx.array:
    """x [B, L, H] with zero rows appended up to a multiple of tile."""
    return _pad_axis(x, 1, tile) if tile else x


def unpad(x: mx.array, rows: int) -> mx.array:
    """The first `rows` rows of x [B, P, ...]."""
    return x if x.shape[1] == rows else x[:, :rows]


def pad_to(x: mx.array, rows: int) -> mx.array:
    """x [B, L, H] with zero rows appended up to `rows`."""
    return x if x.shape[1] == rows else mx.pad(x, [(0, 0), (0, rows - x.shape[1]), (0, 0)])


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
