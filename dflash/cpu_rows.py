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
    """q [..., L, D] @ k_t [..., D, S] with L padded to a multiple of tile and S of KEY_TILE."""
    if not tile:
        return q @ k_t
    L, S = q.shape[-2], k_t.shape[-1]
    out = _pad_axis(q, -2, tile) @ _pad_axis(k_t, -1, KEY_TILE)
    return out[..., :L, :S]
