"""The CPU tree attention before the thirty-second session, for A/B runs (planner_variants.py's
"." setting, tree_mask_probe.py): on the Sandybridge path with every node in the last key chunk,
each row's ancestors gathered by depth for the scores and the last chunk's weights moved back to
the nodes' columns for p @ v (`_tree_tail_in_place`); the product now runs the chain's attention
with the tree's mask there (target._cpu_tree_attention)."""
from functools import partial

import mlx.core as mx

from dflash import cpu_rows
from dflash.target import KEY_CHUNK, _add_chunks, _key_chunk, _off_spine_keys
from dflash.tree import Layout


def cpu_tree_attention(tree: Layout, C: int, tile: int):
    """What target._forward_tree used on the CPU before."""
    valid = mx.arange(tree.ancestors.shape[1])[None] <= tree.depth[:, None]
    off = _off_spine_keys(tree, C, _key_chunk(tile))
    return partial(_tree_attention_invariant, tree=tree, valid=valid, off=off, tile=tile)


def _tree_attention_invariant(q, k, v, scale, tree: Layout, valid: mx.array, off: mx.array, tile: int = 0):
    """Tree attention that sums like _attention_rows_invariant on a token decoded alone.

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
    p = mx.softmax(mx.concatenate([s_ctx, s_blk], axis=-1), axis=-1, precise=True)
    chunk = _key_chunk(tile)
    c0 = C // chunk * chunk
    out = _add_chunks(None, p[..., :c0], v[:, :, None, :c0], chunk) if c0 else None
    tail_p = p[..., c0:]
    if not tile and C - c0 + R <= chunk:
        tail = _tree_tail_in_place(tail_p, v[:, :, c0:], C - c0, tree)
        return (tail if out is None else out + tail).reshape(B, Hq, R, D)
    spine = _add_chunks(None if out is None else out[..., :s, :], tail_p[..., :s, :],
                        v[:, :, None, c0 : C + Dm], chunk)
    if s == R:
        return spine.reshape(B, Hq, R, D)
    off_p = mx.pad(tail_p[..., s:, :], [(0, 0)] * 4 + [(0, off.shape[1] - tail_p.shape[-1])])
    rest = _add_chunks(None if out is None else out[..., s:, :].swapaxes(2, 3),
                       off_p.swapaxes(2, 3), v[:, :, off], chunk).swapaxes(2, 3)  # [B, Hkv, G, R - s, D]
    return mx.concatenate([spine, rest], axis=3).reshape(B, Hq, R, D)


def _tree_tail_in_place(p, v, n_ctx: int, tree: Layout):
    """p @ v over the last key chunk, with the nodes' values read in place instead of gathered
    per row: p [B, Hkv, G, R, n_ctx + Dm] (committed keys, then each row's ancestors by depth),
    v [B, Hkv, n_ctx + R, D] (committed keys, then the nodes in tree order). Each row's weights
    move to its ancestors' node columns (zeros elsewhere); ancestors come in depth order there
    too, so every row sums the same products in the same order as decoding its path alone does
    (the Sandybridge kernels accumulate each output over k in order, adding exact zeros
    between); one matmul instead of a copy of the chunk for every row."""
    on_path = mx.take(p[..., n_ctx:], tree.depth, axis=-1)  # [.., R, R]: column n = depth[n]'s weight
    p = mx.concatenate([p[..., :n_ctx], mx.where(tree.visible, on_path, 0.0)], axis=-1)
    p = mx.pad(p, [(0, 0)] * 4 + [(0, KEY_CHUNK - p.shape[-1])])
    v = mx.pad(v, [(0, 0)] * 2 + [(0, KEY_CHUNK - v.shape[2]), (0, 0)])
    return p @ v[:, :, None]
