"""Steps 2-3, blocks and the loss: random anchors in the answers, each block [x_a, MASK x (B-1)]
seeing the context before a, weighted cross-entropy; and `walk`, the engine's cycles replayed."""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..drafter import Drafter, dense_weight
from .data import Dataset
from .markov import head_logits


def sample_blocks(ds: Dataset, seqs: np.ndarray, rng: np.random.Generator, L: int, B: int,
                  n_anchors: int, mask_id: int, pad_id: int, reveal: float = 0.0) -> dict[str, np.ndarray]:
    """Fixed-shape arrays for `seqs`: ids [S, L] and n_anchors blocks per sequence; with
    probability `reveal` a block shows its first 1..(B-1)/2 labels (`reveal_prefix`)."""
    S = len(seqs)
    ids = np.full((S, L + B), pad_id, dtype=np.int32)  # + B: labels past the end read padding
    lens = np.zeros(S, dtype=np.int64)
    anchors = np.zeros((S, n_anchors), dtype=np.int64)
    for r, i in enumerate(seqs):
        s = ds.seq(i)[:L]
        ids[r, : len(s)] = s
        lens[r] = len(s)
        lo, hi = int(ds.prompt_lens[i]), len(s) - 2  # the staged token a: a prompt position
        if hi < lo:  # no room for even one prediction (should not happen after filtering)
            lo = hi = max(len(s) - 2, 0)
        n = hi - lo + 1
        anchors[r] = lo + (rng.choice(n, n_anchors, replace=False) if n >= n_anchors
                           else rng.integers(0, n, n_anchors))
    rows = np.repeat(np.arange(S), n_anchors)
    b = _blocks(ids, lens, rows, anchors.reshape(-1), B, mask_id)
    if reveal:
        reveal_prefix(b, rng, reveal)
    return dict(b, ids=ids[:, :L])


def reveal_prefix(b: dict, rng: np.random.Generator, p: float) -> None:
    """In place: with probability p a block's slots 1..k (k uniform in 1..(B-1)/2, at least one
    label left to predict) hold their true tokens instead of MASK and carry no loss. The drafter
    learns to read a path written into its block, as a second pass over a drafted prefix would
    give it, besides the all-MASK block the engine's first pass runs."""
    block, labels, valid = b["block"], b["labels"], b["valid"]
    R, n = labels.shape
    left = valid.sum(1).astype(np.int64) - 1  # labels that may be shown, one kept
    k = np.minimum(rng.integers(1, n // 2 + 1, R), left) * (rng.random(R) < p)
    shown = np.arange(n)[None] < k[:, None]
    block[:, 1:] = np.where(shown, labels, block[:, 1:])
    valid[shown] = 0.0


BLOCK_KEYS = ("block", "labels", "valid", "anchors", "rows")  # a batch after the features, in order


def _blocks(ids: np.ndarray, lens: np.ndarray, rows: np.ndarray, a: np.ndarray, B: int,
            mask_id: int) -> dict[str, np.ndarray]:
    """Row r: the block [x_a, MASK x (B-1)] of sequence rows[r] at anchor a[r], its labels
    x_{a+1..a+B-1} and which of them lie inside the sequence (ids padded by >= B past lens)."""
    pos = a[:, None] + np.arange(B)[None]  # [R, B] absolute positions of the block
    block = ids[rows[:, None], pos]
    labels = block[:, 1:].copy()
    valid = pos[:, 1:] < lens[rows][:, None]
    block[:, 1:] = mask_id
    return {"block": block, "labels": labels, "valid": valid.astype(np.float32),
            "anchors": a.astype(np.int32), "rows": rows.astype(np.int32)}


class FrozenIO:
    """The target's embedding and head as dense matrices in the training dtype (frozen): the
    drafter reads its block through the first and its logits through the second."""

    def __init__(self, target, dtype=mx.float32):
        bb = target.backbone
        self.embed_w = dense_weight(bb.embed_tokens).astype(dtype)
        self.head_w = self.embed_w if target.head is None else dense_weight(target.head).astype(dtype)
        mx.eval(self.embed_w, self.head_w)

    def embed(self, ids: mx.array) -> mx.array:
        return self.embed_w[ids]

    def logits(self, h: mx.array) -> mx.array:
        return h @ self.head_w.T


def dropout(x: mx.array, p: float) -> mx.array:
    keep = mx.random.bernoulli(1 - p, x.shape)
    return mx.where(keep, x / (1 - p), mx.zeros_like(x))


def layer_forward(layer, h, k, v, offset, mask, p: float = 0.0):
    """`DecoderLayer.__call__` with dropout p on its attention and MLP branches (p = 0: the layer
    itself). A regulariser for training only: the drafter in the engine never drops anything."""
    if not p:
        return layer(h, k, v, offset, mask)
    h = h + dropout(layer.self_attn(layer.input_layernorm(h), k, v, offset, mask), p)
    return h + dropout(layer.mlp(layer.post_attention_layernorm(h)), p)


def drafter_forward(drafter: Drafter, io: FrozenIO, feats: mx.array, block: mx.array,
                    anchors: mx.array, rows: mx.array, p: float = 0.0) -> mx.array:
    """Block hidden states [R, B, H]: row r is a block at position anchors[r] of sequence rows[r],
    seeing that sequence's context at positions < anchors[r] (as the engine's cache would);
    with dropout p on the layers' residual branches."""
    ctx = drafter.project(feats)
    h = io.embed(block).astype(drafter.fc.weight.dtype)
    masks = {}  # per window (None: a full layer)
    for layer in drafter.layers:
        w = layer.self_attn.window
        if w not in masks:
            masks[w] = context_mask(feats.shape[1], block.shape[1], anchors, w)
        k, v = layer.self_attn.kv(ctx, 0)
        h = layer_forward(layer, h, k[rows], v[rows], anchors, masks[w], p)
    return drafter.norm(h)


def context_mask(L: int, B: int, anchors: mx.array, window: Optional[int] = None) -> mx.array:
    """[R, 1, 1 or B, L + B] bool: what a block at position anchors[r] sees of its sequence's L
    context positions and of itself, as the engine's cache gives it: the positions before the
    anchor (for a sliding layer, those a query at anchor+i sees: > anchor+i-window)."""
    pos = mx.arange(L)[None, None]
    seen = pos < anchors[:, None, None]  # [R, 1, L]
    block = mx.ones((len(anchors), 1, B), dtype=mx.bool_)
    if window is not None:
        q_pos = anchors[:, None, None] + mx.arange(B)[None, :, None]  # [R, B, 1]
        seen = seen & (pos > q_pos - window)
        block = (mx.arange(B)[None, None] > mx.arange(B)[None, :, None] - window) & block
    return mx.concatenate([seen, block], axis=-1)[:, None]


def block_loss(drafter, io, feats, block, labels, valid, anchors, rows, weights, p: float = 0.0):
    """Weighted cross-entropy at slots 1..B-1, and per-slot (correct, all-correct-so-far) sums;
    p: dropout in the drafter's layers (training steps; validation passes none)."""
    h = drafter_forward(drafter, io, feats, block, anchors, rows, p)
    logits = io.logits(h[:, 1:]).astype(mx.float32)
    if drafter.has_markov:
        logits, valid = head_logits(drafter, io, logits, labels, valid)
    per_slot = nn.losses.cross_entropy(logits, labels, reduction="none")
    w = weights[None] * valid
    loss = (per_slot * w).sum() / mx.maximum(w.sum(), 1e-6)
    correct = (mx.argmax(logits, -1) == labels) * valid
    accepted = mx.cumprod(correct, axis=1)
    return loss, (correct.sum(0), accepted.sum(0), valid.sum(0))


def accept_lengths(drafter, io, feats, block, labels, valid, anchors, rows) -> mx.array:
    """Per block: how many of its drafted tokens the target would accept (the run of correct
    slots from slot 1), the number the engine's verify step computes."""
    h = drafter_forward(drafter, io, feats, block, anchors, rows)
    logits = io.logits(h[:, 1:])
    if drafter.has_markov:
        logits, valid = head_logits(drafter, io, logits.astype(mx.float32), labels, valid)
    correct = (mx.argmax(logits, -1) == labels) * valid
    return mx.cumprod(correct, axis=1).sum(1)


def walk(ds: Dataset, i: int, accepted: dict[tuple[int, int], int], L: int) -> list[int]:
    """The accepted draft counts of the cycles the engine would run on answer i, which the target
    itself wrote greedily: the first cycle drafts after the first answer token, each cycle commits
    its accepted drafts plus the target's own token, and the next one drafts from there."""
    a, end, out = int(ds.prompt_lens[i]), min(len(ds.seq(i)), L) - 1, []
    while a < end:
        out.append(min(int(accepted[(int(i), a)]), end - a))
        a += out[-1] + 1
    return out


def walk_tau(ds: Dataset, seqs, accepted: dict[tuple[int, int], int], L: int) -> float:
    """tau as the engine measures it (1 + accepted drafts per cycle) over `walk`s. The mean over
    uniformly random anchors (tau~) overstates it: an easy stretch is crossed in a few long
    cycles, a hard one takes many short ones."""
    cycles = [n for i in seqs for n in walk(ds, i, accepted, L)]
    return 1 + sum(cycles) / max(len(cycles), 1)


def every_anchor(ds: Dataset, seqs, L: int, B: int, R: int, mask_id: int, pad_id: int):
    """Blocks at every answer position of `seqs`, in chunks of R rows (the last one padded with
    copies of the first row): yields (keys, batch arrays) with keys[r] = (sequence, anchor)."""
    ids = pad_ids(ds, seqs, L + B, pad_id)
    lens = np.minimum(ds.lengths[seqs], L)
    pairs = [(r, a) for r, i in enumerate(seqs) for a in range(int(ds.prompt_lens[i]), int(lens[r]) - 1)]
    for c in range(0, len(pairs), R):
        chunk = pairs[c : c + R]
        rows = np.array([r for r, _ in chunk] + [chunk[0][0]] * (R - len(chunk)))
        a = np.array([x for _, x in chunk] + [chunk[0][1]] * (R - len(chunk)))
        yield ([(int(seqs[r]), x) for r, x in chunk],
               dict(_blocks(ids, lens, rows, a, B, mask_id), ids=ids[:, :L]))


def position_weights(B: int, gamma: float) -> mx.array:
    return mx.exp(-mx.arange(B - 1, dtype=mx.float32) / gamma)


def pad_ids(ds: Dataset, seqs, L: int, pad_id: int) -> np.ndarray:
    ids = np.full((len(seqs), L), pad_id, dtype=np.int32)
    for r, i in enumerate(seqs):
        s = ds.seq(i)[:L]
        ids[r, : len(s)] = s
    return ids
