"""Tree attention as shipped before the thirty-first session: every row but none in place (each
row's last chunk(s) built by broadcast + concatenate + pad). planner_variants.py's "^" settings
swap it in, to compare against the spine-in-place, one-gather version on one loaded pair."""
import sys
from pathlib import Path

import mlx.core as mx

from dflash import cpu_rows
from dflash.target import KEY_CHUNK, _key_chunk

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cpu" / "s32"))
from tree_attention_before import _tree_tail_in_place  # noqa: E402  (gone from target.py since)


def _tree_attention_invariant(q, k, v, scale, tree, valid, off=None, tile: int = 0):
    """Tree attention that sums like _attention_rows_invariant on a token decoded alone.

    Each row sees the committed keys and then its ancestors, gathered into the contiguous
    sequence it would have after the path is committed: same positions, same key chunks,
    same order, masked keys only at the end. Chunks of committed keys are shared by all rows;
    the chunk(s) holding a row's ancestors are gathered per row.
    """
    B, Hq, R, D = q.shape
    Hkv, C = k.shape[1], k.shape[2] - R
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, R, D)
    kb, vb = (a[:, :, C:][:, :, tree.ancestors] for a in (k, v))  # [B, Hkv, R, Dm, D]
    s_ctx = cpu_rows.scores(q, k[:, :, None, :C].swapaxes(-1, -2), tile)
    # per row: its G query heads against its own ancestors (one call a row and kv head)
    s_blk = cpu_rows.scores(q.swapaxes(2, 3), kb.swapaxes(-1, -2), tile).swapaxes(2, 3)
    s_blk = mx.where(valid, s_blk, -mx.inf)  # [R, Dm]: ancestors, then padding
    p = mx.softmax(mx.concatenate([s_ctx, s_blk], axis=-1), axis=-1, precise=True)
    chunk = _key_chunk(tile)
    c0 = C // chunk * chunk
    out = None
    for c in range(0, c0, chunk):
        part = p[..., c : c + chunk] @ v[:, :, None, c : c + chunk]
        out = part if out is None else out + part
    if not tile and C - c0 + R <= chunk:
        tail = _tree_tail_in_place(p[..., c0:], v[:, :, c0:], C - c0, tree)
        return (tail if out is None else out + tail).reshape(B, Hq, R, D)
    tail_v = mx.concatenate([mx.broadcast_to(v[:, :, None, c0:C], (B, Hkv, R, C - c0, D)), vb], axis=3)
    tail_p = p[..., c0:]
    for c in range(0, tail_p.shape[-1], chunk):
        pc, vc = tail_p[..., c : c + chunk], tail_v[:, :, :, c : c + chunk]
        if (pad := chunk - pc.shape[-1]):
            pc = mx.pad(pc, [(0, 0)] * 4 + [(0, pad)])
            vc = mx.pad(vc, [(0, 0)] * 3 + [(0, pad), (0, 0)])
        part = (pc.swapaxes(2, 3) @ vc).swapaxes(2, 3)
        out = part if out is None else out + part
    return out.reshape(B, Hq, R, D)


