"""How a drafted tree is laid out for the target's verify pass: each row's depth (its RoPE
offset), its ancestors and which rows it may attend to. Built from a tree.Tree; the model code
(target.py) needs only this, not the tree algorithm."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np


@dataclass(frozen=True)
class Layout:
    """What a tree verify pass needs per row: RoPE position offset (= depth) and ancestors."""

    depth: mx.array  # [R] int32
    ancestors: mx.array  # [R, Dm] int32: the node's ancestors root..itself, padded with 0
    visible: mx.array  # [R, R] bool: row r may attend to node c (c is r or an ancestor of r)
    chain: bool = False  # every node's parent is the one before: a plain causal block
    spine: int = 1  # rows 0..spine-1 are a chain from the root (spine_first puts it there)

    @classmethod
    def of(cls, tree) -> "Layout":
        """tree: a tree.Tree (its tokens' depths and parents, root first)."""
        depth = np.array(tree.depths, np.int32)
        R, Dm = len(tree), int(depth.max()) + 1
        parents = np.maximum(np.array(tree.parents), 0)
        up = np.empty((R, Dm), np.int64)  # up[r, i]: r's ancestor i levels up (the root beyond)
        up[:, 0] = np.arange(R)
        for i in range(1, Dm):
            up[:, i] = parents[up[:, i - 1]]
        # row r's path root..r is up[r, depth[r] - j] at j = 0..depth[r]; 0-padded after it
        j = np.arange(Dm)[None]
        on_path = j <= depth[:, None]
        anc = np.where(on_path, np.take_along_axis(up, np.clip(depth[:, None] - j, 0, None), 1), 0)
        vis = np.zeros((R, R), bool)
        vis[np.nonzero(on_path)[0], anc[on_path]] = True
        spine = 1
        while spine < R and tree.parents[spine] == spine - 1:
            spine += 1
        return cls(mx.array(depth), mx.array(anc.astype(np.int32)), mx.array(vis), tree.is_chain, spine)
