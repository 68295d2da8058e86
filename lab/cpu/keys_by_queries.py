"""Attention scores with the keys as the BLAS call's rows (lab only: measured on the Xeon, exact
but not faster there; lab/cpu/README.md section 15). Drop-in for cpu_rows.scores:

    import keys_by_queries; cpu_rows.scores = keys_by_queries.scores
"""
import mlx.core as mx

from dflash.cpu_rows import _pad_axis

KEY_BLOCK = 128  # keys per BLAS call, as its rows (a multiple of SkylakeX's 16-row unroll)
QUERY_TILE = 16  # queries per call, as its columns


def scores(q: mx.array, k_t: mx.array, tile: int) -> mx.array:
    """q [..., L, D] @ k_t [..., D, S] as calls of one shape, KEY_BLOCK keys x QUERY_TILE
    queries x D, whatever L and S (both padded up)."""
    if not tile:
        return q @ k_t
    L, S = q.shape[-2], k_t.shape[-1]
    k = _pad_axis(k_t.swapaxes(-1, -2), -2, KEY_BLOCK)  # [..., Sp, D]
    Sp, D = k.shape[-2], k.shape[-1]
    k = mx.contiguous(k.reshape(*k.shape[:-2], Sp // KEY_BLOCK, KEY_BLOCK, D))
    q = _pad_axis(q, -2, QUERY_TILE)
    out = []
    for c in range(0, q.shape[-2], QUERY_TILE):  # [..., Sp / KEY_BLOCK, KEY_BLOCK, QUERY_TILE]
        r = k @ mx.contiguous(q[..., c : c + QUERY_TILE, :].swapaxes(-1, -2))[..., None, :, :]
        out.append(r.reshape(*r.shape[:-3], Sp, QUERY_TILE))
    out = out[0] if len(out) == 1 else mx.concatenate(out, axis=-1)
    return out[..., :S, :L].swapaxes(-1, -2)
