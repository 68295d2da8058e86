"""The target adapter: one narrow surface over an mlx-lm model.

`forward(ids, cache, record=...)` runs a block through the target and returns its logits AND the
outputs of the tapped layers, walking mlx-lm's own layer objects (no class is patched). With
`record=True` the GatedDeltaNet layers of hybrid targets also return a tape so that
`rollback` can keep any prefix of the block exactly.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.activations import swiglu
from mlx_lm.models.base import create_attention_mask, create_ssm_mask
from mlx_lm.models.cache import make_prompt_cache

from . import backend
from .backends import cpu_rows, host_ops, kernels
from .tape import GDNTape, gdn_forward_recorded, rollback
from .layout import Layout

SUPPORTED_FAMILIES = ("llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe")
PREFILL_CHUNK = 512
KEY_CHUNK = 256  # p @ v reduces over fixed key chunks: see _attention_rows_invariant
# Intel's padded path: a tree row copies its last chunk's keys, so shorter chunks make a tree
# pass cheaper (trees of 15 / 31 nodes ran 4.7 / 8.5 % faster, a 1-token step no slower)
TILED_KEY_CHUNK = 128
MAX_CHUNKED_ROWS = 64  # a longer pass is a prefill: one call (a 512-token chunk would be 171)


class Target:
    """An mlx-lm model seen as: embed, forward a block with taps, logits, roll back."""

    def __init__(self, model: nn.Module, model_type: str, tap_ids: Optional[list[int]] = None,
                 attention_rows: int = 0, row_tile: Optional[int] = None):
        if model_type not in SUPPORTED_FAMILIES:
            raise ValueError(
                f"target model_type {model_type!r} is not supported; "
                f"supported families: {', '.join(SUPPORTED_FAMILIES)}")
        self.model = model
        self.model_type = model_type
        lm = getattr(model, "language_model", model)  # qwen3_5 wraps the text model
        self.backbone = lm.model
        self.layers = self.backbone.layers
        self.head = None if lm.args.tie_word_embeddings else lm.lm_head
        args = lm.args
        if any(getattr(l, "use_sliding", False) for l in self.layers):
            raise ValueError("targets with sliding-window attention layers are not supported")
        self.hidden_size = args.hidden_size
        self.vocab_size = args.vocab_size
        self.num_layers = len(self.layers)
        self.max_context = getattr(args, "max_position_embeddings", None)
        self.tap_ids = list(tap_ids or [])
        self._linear = [i for i, l in enumerate(self.layers) if getattr(l, "is_linear", False)]
        self._kv_idx = next(i for i in range(self.num_layers) if i not in self._linear)
        # How llama-family layers attend (None: mlx-lm's own layer). With OpenBLAS on the CPU,
        # mx.fast's attention reduces p @ v in K blocks that depend on the key count, so a token's
        # row would differ alone vs inside a block; _attention_rows_invariant never does. On a
        # GPU a k-token pass may attend in calls of `attention_rows` query rows (backend.py).
        # On the CPU every attention-only family attends that way, so that a tree pass
        # (_cpu_tree_attention) sums each row exactly as decoding it alone does. Where the
        # BLAS needs padded rows (row_tile > 0: Intel's SkylakeX kernels), score calls have
        # row_tile rows and every projection and the head pad to the tile found exact for their
        # shape (_RowExact, cpu_rows.py).
        plain_attention = model_type in ("llama", "qwen2", "qwen3")
        self.tree_capable = not self._linear  # attention-only targets verify trees (tree.py)
        cpu = backend.on_cpu()
        self._attend, self.row_tile = None, 0
        if plain_attention and attention_rows > 0:
            self._attend = partial(_attention_row_chunks, rows=attention_rows)
        elif self.tree_capable and cpu:  # row_tile None: what this process's BLAS needs
            self.row_tile = backend.active().row_tile if row_tile is None else row_tile
            self._attend = partial(_attention_rows_invariant, tile=self.row_tile)
        self.layers_changed()

    def layers_changed(self) -> None:
        """Rebuild what the adapter keeps of the layers' weights, after they were replaced
        (sharding): where the BLAS needs padded rows, each layer's projections and the head on
        their exact row tiles (_RowExact)."""
        self._linears = [_RowExact(l) for l in self.layers] if self._attend is not None and self.row_tile else None
        self._head = None
        if self._linears:  # tied: the embedding's as_linear
            head = self.head or self.backbone.embed_tokens
            self._head = cpu_rows.Padded(head if self.head else head.as_linear, self.hidden_size,
                                         f"{self.vocab_size}x{self.hidden_size} {type(head).__name__}",
                                         dtype=self.backbone.norm.weight.dtype)

    def _rope_table(self, positions: mx.array):
        """The pass's RoPE table at `positions`, built once for all layers where they rotate by
        table (else None)."""
        if self._attend is None or not _rope_by_table(rope := self.layers[self._kv_idx].self_attn.rope):
            return None
        return _rope_table(rope, positions)

    def _lin(self, i: int) -> Optional["_RowExact"]:
        return self._linears[i] if self._linears else None

    @property
    def key_chunk(self) -> int:
        """Keys one p @ v call of this target's exact CPU attention reduces over."""
        return _key_chunk(self.row_tile)

    @property
    def is_hybrid(self) -> bool:
        return bool(self._linear)

    def make_cache(self) -> list:
        return make_prompt_cache(self.model)

    def embed(self, ids: mx.array) -> mx.array:
        return self.backbone.embed_tokens(ids)

    def logits(self, h: mx.array) -> mx.array:
        """Final hidden states (already normed) -> vocabulary logits; a pass's [B, L, H] on the
        head's exact row tile where the BLAS needs one (the drafter's [N, H] need no exactness)."""
        if self._head is not None and h.ndim == 3:
            return self._head(h)
        if self.head is None:
            return self.backbone.embed_tokens.as_linear(h)
        return self.head(h)

    def forward(self, ids: mx.array, cache: list, record: bool = False, last_only: bool = False,
                tree: Optional[Layout] = None):
        """ids [1, L] -> (logits [1, L, V], taps [1, L, n_taps*H], tapes {layer: GDNTape}).

        last_only: logits of the last position only (prefill needs no others).
        tree: the ids are a drafted tree's nodes (tree.py): each attends to the cache and its
        own ancestors, at position cache length + depth (a chain-shaped tree: the plain pass).
        """
        if tree is not None and not tree.chain:
            return self._forward_tree(ids, cache, tree)
        L = ids.shape[1]
        h = self.embed(ids)
        fa_mask = create_attention_mask(h, cache[self._kv_idx])
        ssm_mask = create_ssm_mask(h, cache[self._linear[0]]) if self._linear else None
        taps, tapes = {}, {}
        offset = cache[self._kv_idx].offset
        table = self._rope_table(mx.arange(offset, offset + L))
        for i, (layer, c) in enumerate(zip(self.layers, cache)):
            if record and i in self._linear:
                h, tapes[i] = _decoder_layer_recorded(layer, h, c)
            elif self._attend is not None:
                h = _decoder_layer_with(layer, h, c, self._attend, rope_table=table, linears=self._lin(i))
            else:
                h = layer(h, ssm_mask if i in self._linear else fa_mask, c)
            if i in self.tap_ids:
                taps[i] = h
        feats = mx.concatenate([taps[t] for t in self.tap_ids], -1) if taps else None
        if last_only:
            h = h[:, L - 1 :]
        return self.logits(self.backbone.norm(h)), feats, tapes

    def _forward_tree(self, ids: mx.array, cache: list, tree: Layout):
        if not self.tree_capable:
            raise ValueError("tree verification needs an attention-only target")
        offset = cache[self._kv_idx].offset
        if backend.on_cpu():
            cpu_attend = _cpu_tree_attention(tree, offset, self.row_tile)
            attend_over = lambda c: cpu_attend  # noqa: E731
        else:
            attend_over = kernels.TreeAttention(tree.visible, offset).over
        h = self.embed(ids)
        taps = {}
        table = self._rope_table(offset + tree.depth)
        for i, (layer, c) in enumerate(zip(self.layers, cache)):
            h = _decoder_layer_with(layer, h, c, attend_over(c), depth=tree.depth, rope_table=table,
                                    linears=self._lin(i))
            if i in self.tap_ids:
                taps[i] = h
        feats = mx.concatenate([taps[t] for t in self.tap_ids], -1) if taps else None
        return self.logits(self.backbone.norm(h)), feats, {}

    def prefill(self, ids: list[int], cache: list, on_chunk=None) -> mx.array:
        """Feed the prompt in chunks; returns the last position's logits [V].

        on_chunk(features) receives each chunk's tapped features (the drafter's context).
        """
        logits = None
        for s in range(0, len(ids), PREFILL_CHUNK):
            chunk = mx.array(ids[s : s + PREFILL_CHUNK])[None]
            logits, feats, _ = self.forward(chunk, cache, last_only=True)
            if on_chunk is not None:
                on_chunk(feats)
            mx.eval(logits, *[c.state for c in cache])
        return logits[0, -1]

    @staticmethod
    def rollback(cache: list, tapes: dict[int, GDNTape], n_fed: int, n_keep: int) -> None:
        rollback(cache, tapes, n_fed, n_keep)


def _decoder_layer_recorded(layer, x, cache):
    """mlx-lm's qwen3_5 / qwen3_next DecoderLayer with the GDN mixer recorded."""
    r, tape = gdn_forward_recorded(layer.linear_attn, layer.input_layernorm(x), cache)
    h = x + r
    return h + layer.mlp(layer.post_attention_layernorm(h)), tape


def _decoder_layer_with(layer, x, cache, attend, depth: Optional[mx.array] = None,
                        rope_table=None, linears: Optional["_RowExact"] = None):
    """mlx-lm's llama / qwen2 / qwen3(_moe) DecoderLayer with attention done by `attend`;
    depth: a tree pass, row i at position cache.offset + depth[i]; rope_table: the pass's
    _rope_table where the CPU rotates by table (else built here); linears: the layer's
    projections on padded rows (_RowExact), where the BLAS needs them."""
    a = layer.self_attn
    B, L, _ = x.shape
    xn = layer.input_layernorm(x)
    q, k, v = linears.qkv(xn) if linears else (a.q_proj(xn), a.k_proj(xn), a.v_proj(xn))
    q = q.reshape(B, L, a.n_heads, -1)
    k = k.reshape(B, L, a.n_kv_heads, -1)
    v = v.reshape(B, L, a.n_kv_heads, -1).transpose(0, 2, 1, 3)
    if hasattr(a, "q_norm"):  # qwen3
        q, k = a.q_norm(q), a.k_norm(k)
    q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
    if _rope_by_table(a.rope, q.shape[-1]):
        positions = mx.arange(cache.offset, cache.offset + L) if depth is None else cache.offset + depth
        q, k = _rotate(q, k, rope_table or _rope_table(a.rope, positions))
    elif depth is None:
        q, k = a.rope(q, offset=cache.offset), a.rope(k, offset=cache.offset)
    else:
        q, k = _rope_at(a.rope, q, cache.offset + depth), _rope_at(a.rope, k, cache.offset + depth)
    k, v = cache.update_and_fetch(k, v)
    o = attend(q, k, v, a.scale).transpose(0, 2, 1, 3).reshape(B, L, -1)
    h = x + (linears.o if linears else a.o_proj)(o)
    x = layer.post_attention_layernorm(h)
    return h + (linears.mlp(x) if linears else _mlp(layer.mlp, x))


def _mlp(m, x: mx.array) -> mx.array:
    """mlx-lm's MLP, its SwiGLU in numpy on a CPU (host_ops); a mixture of experts as it is."""
    if hasattr(m, "gate_proj") and host_ops.runs(x):
        return m.down_proj(host_ops.swiglu(m.gate_proj(x), m.up_proj(x)))
    return m(x)


class _RowExact:
    """A llama-family layer's projections where the CPU BLAS needs padded rows (cpu_rows.py):
    q|k|v and gate|up fused, every matmul on the row tile that keeps its rows exact. A
    mixture-of-experts MLP stays mlx-lm's, on its own tile."""

    def __init__(self, layer):
        a, m = layer.self_attn, layer.mlp
        self.qkv = cpu_rows.Projections([a.q_proj, a.k_proj, a.v_proj])
        self.o = cpu_rows.linear(a.o_proj)
        dense = hasattr(m, "gate_proj")
        self.gate_up = cpu_rows.Projections([m.gate_proj, m.up_proj]) if dense else None
        self.down = cpu_rows.linear(m.down_proj) if dense else cpu_rows.Padded(
            m, layer.input_layernorm.weight.shape[0], f"{type(m).__name__} {m.gate.weight.shape}",
            dtype=layer.input_layernorm.weight.dtype)

    def mlp(self, x: mx.array) -> mx.array:
        return self.down(_swiglu(*self.gate_up(x))) if self.gate_up else self.down(x)

    def matmuls(self) -> list[cpu_rows.Padded]:
        return [*self.qkv.calls, self.o, *(self.gate_up.calls if self.gate_up else []), self.down]


def _rope_at(rope, x, positions: mx.array):
    """RoPE with one position per row: rows become the batch axis, which takes an offset each."""
    return rope(x.transpose(2, 1, 0, 3), offset=positions).transpose(2, 1, 0, 3)


def _rope_by_table(rope, head_dim: Optional[int] = None) -> bool:
    """Whether q and k rotate by _rope_table: plain rotate-half RoPE over the whole head, on the
    CPU, where mx.fast.rope is a graph of ~15 ops that rebuilds the table for every q and k."""
    return (type(rope) is nn.RoPE and not rope.traditional and head_dim in (None, rope.dims)
            and backend.on_cpu())


def _rope_table(rope, positions: mx.array) -> tuple[mx.array, mx.array]:
    """(cos, sin) [L, dims] at integer positions [L], laid out for _rotate: cos twice, then -sin
    and sin. Every entry depends on its position only, so a token rotates bitwise the same
    alone, in a block and in a tree."""
    half = rope.dims // 2
    inv = mx.exp(mx.arange(half, dtype=mx.float32) * (-math.log(rope.base) / half)) * rope.scale
    angles = positions.astype(mx.float32)[:, None] * inv
    cos, sin = mx.cos(angles), mx.sin(angles)
    return mx.concatenate([cos, cos], axis=-1), mx.concatenate([-sin, sin], axis=-1)


def _rotate(q: mx.array, k: mx.array, table) -> tuple[mx.array, mx.array]:
    """q [B, Hq, L, D] and k [B, Hkv, L, D] rotated together by a _rope_table (rotate-half)."""
    # [x1 c - x2 s, x2 c + x1 s] as x * [c, c] + [x2, x1] * [-s, s]: the same bits (negating a
    # factor negates the product exactly), three ops fewer a layer
    cos, sin = table
    x = mx.concatenate([q, k], axis=1)
    half = cos.shape[-1] // 2
    x = x * cos + mx.concatenate([x[..., half:], x[..., :half]], axis=-1) * sin
    return x[:, : q.shape[1]], x[:, q.shape[1] :]


def _key_chunk(tile: int) -> int:
    """Keys a p @ v call reduces over: shorter where rows pad to a tile (Intel's kernels)."""
    return TILED_KEY_CHUNK if tile else KEY_CHUNK


def _attention_rows_invariant(q, k, v, scale, tile: int = 0, mask: Optional[mx.array] = None):
    """Causal attention whose p @ v sums fixed-size key chunks (_key_chunk) aligned at position 0.

    A token's row reduces over the same chunks in the same order whether it is decoded alone
    (t+1 keys) or inside a block (t+L keys, the later ones weighted exactly 0). mask [L, S]:
    which keys each row sees, instead of the causal ones (a tree: _cpu_tree_attention).
    """
    B, Hq, L, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    q = (q * scale).reshape(B, Hkv, Hq // Hkv, L, D)
    scores = cpu_rows.scores(q, k[:, :, None].swapaxes(-1, -2), tile)
    if mask is None and L > 1:
        mask = mx.arange(S)[None] <= mx.arange(S - L, S)[:, None]
    if mask is not None:
        scores = mx.where(mask, scores, -mx.inf)
    p = _softmax(scores)
    return _add_chunks(None, p, v[:, :, None], _key_chunk(tile)).reshape(B, Hq, L, D)


def _softmax(scores: mx.array) -> mx.array:
    """The attention's softmax over keys: in numpy on a CPU (host_ops), summed in key order."""
    return host_ops.softmax(scores) if host_ops.runs(scores) else mx.softmax(scores, axis=-1, precise=True)


def _swiglu(gate: mx.array, up: mx.array) -> mx.array:
    return host_ops.swiglu(gate, up) if host_ops.runs(gate) else swiglu(gate, up)


def _add_chunks(out, p, v, chunk: int):
    """out + p @ v, summed key chunk by key chunk in order, the last padded to a whole chunk."""
    for c in range(0, p.shape[-1], chunk):
        pc, vc = p[..., c : c + chunk], v[..., c : c + chunk, :]
        if (pad := chunk - pc.shape[-1]):
            pc = mx.pad(pc, [(0, 0)] * (pc.ndim - 1) + [(0, pad)])
            vc = mx.pad(vc, [(0, 0)] * (vc.ndim - 2) + [(0, pad), (0, 0)])
        out = pc @ vc if out is None else out + pc @ vc
    return out


def _attention_row_chunks(q, k, v, scale, rows: int):
    """Causal attention of L query rows as ceil(L / rows) calls of `rows` rows, each given the
    keys up to its last row (passes longer than MAX_CHUNKED_ROWS, i.e. prefill, in one call).

    For MLX's CUDA backend: its fused attention kernel takes fewer than 4 query rows (a longer
    block runs unfused matmul + softmax, 113 us a layer against 7 on an H200 for 16 float32
    rows) and computes each row on its own over keys 0..its position, as a 1-token step does.
    On an H200 (lab/bench/results/h200-smollm2.md) chunks of 3 rows were 4 % faster than one
    call, prompt by prompt, with the same outputs.
    """
    L, S = q.shape[2], k.shape[2]
    if L > MAX_CHUNKED_ROWS:
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal")
    outs = []
    for s in range(0, L, rows):
        e = min(s + rows, L)
        end = S - L + e  # keys visible to the chunk's last row
        outs.append(mx.fast.scaled_dot_product_attention(
            q[:, :, s:e], k[:, :, :end], v[:, :, :end], scale=scale, mask="causal" if e - s > 1 else None))
    return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=2)


def _cpu_tree_attention(tree: Layout, C: int, tile: int):
    """How a CPU tree pass over C committed keys attends, each row summing exactly what decoding
    its path alone sums. Sandybridge kernels (tile 0) with every node in the committed keys'
    last chunk: the chain's attention with the tree's mask. A node's ancestors precede it in
    tree order as in its path, and those kernels and MLX's CPU softmax sum over keys in order,
    adding exact zeros for the masked ones. Otherwise (Intel's padded kernels; nodes spilling
    into the next chunk) each row's ancestors are laid out by depth: _tree_attention_invariant.
    What a pass shares is built once, not per layer."""
    chunk, R = _key_chunk(tile), tree.visible.shape[0]
    if not tile and C % chunk + R <= chunk:
        mask = mx.concatenate([mx.ones((R, C), dtype=mx.bool_), tree.visible], axis=1)
        return partial(_attention_rows_invariant, mask=mask)
    valid = mx.arange(tree.ancestors.shape[1])[None] <= tree.depth[:, None]
    off = _off_spine_keys(tree, C, chunk)
    return partial(_tree_attention_invariant, tree=tree, valid=valid, off=off, tile=tile)


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
    p = _softmax(mx.concatenate([s_ctx, s_blk], axis=-1))
    chunk = _key_chunk(tile)
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
