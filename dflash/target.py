"""The target adapter: one narrow surface over an mlx-lm model.

`forward(ids, cache, record=...)` runs a block through the target and returns its logits AND the
outputs of the tapped layers, walking mlx-lm's own layer objects (no class is patched). With
`record=True` the GatedDeltaNet layers of hybrid targets also return a tape so that
`rollback` can keep any prefix of the block exactly.
"""

from __future__ import annotations

from functools import partial
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask, create_ssm_mask
from mlx_lm.models.cache import make_prompt_cache

from . import backend
from .backends import cpu_attention, cpu_rows, host_ops, kernels
from .tape import GDNTape, gdn_forward_recorded, rollback
from .layout import Layout

SUPPORTED_FAMILIES = ("llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe")
PREFILL_CHUNK = 512


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
        # How llama-family layers attend (None: mlx-lm's own layer): on the CPU every
        # attention-only family attends so that a token's row is bitwise the same alone, in a
        # block and in a tree (backends/cpu_attention.py), projections and the head on padded
        # rows where the BLAS needs them (row_tile > 0: cpu_rows.Layer); on a GPU a k-token
        # pass may attend in calls of `attention_rows` query rows (kernels.row_chunks).
        plain_attention = model_type in ("llama", "qwen2", "qwen3")
        self.tree_capable = not self._linear  # attention-only targets verify trees (tree.py)
        cpu = backend.on_cpu()
        self._attend, self.row_tile = None, 0
        if plain_attention and attention_rows > 0:
            self._attend = partial(kernels.row_chunks, rows=attention_rows)
        elif self.tree_capable and cpu:  # row_tile None: what this process's BLAS needs
            self.row_tile = backend.active().row_tile if row_tile is None else row_tile
            self._attend = partial(cpu_attention.rows_invariant, tile=self.row_tile)
        self.layers_changed()

    def layers_changed(self) -> None:
        """Rebuild what the adapter keeps of the layers' weights, after they were replaced
        (sharding): where the BLAS needs padded rows, each layer's projections and the head on
        their exact row tiles (cpu_rows.Layer)."""
        self._linears = [cpu_rows.Layer(l) for l in self.layers] if self._attend is not None and self.row_tile else None
        self._head = None
        if self._linears:  # tied: the embedding's as_linear
            head = self.head or self.backbone.embed_tokens
            self._head = cpu_rows.Padded(head if self.head else head.as_linear, self.hidden_size,
                                         f"{self.vocab_size}x{self.hidden_size} {type(head).__name__}",
                                         dtype=self.backbone.norm.weight.dtype)

    def _rope_table(self, positions: mx.array):
        """The pass's RoPE table at `positions`, built once for all layers where they rotate by
        table (else None)."""
        if self._attend is None or not cpu_attention.rotates_by_table(rope := self.layers[self._kv_idx].self_attn.rope):
            return None
        return cpu_attention.rope_table(rope, positions)

    def _lin(self, i: int) -> Optional[cpu_rows.Layer]:
        return self._linears[i] if self._linears else None

    @property
    def key_chunk(self) -> int:
        """Keys one p @ v call of this target's exact CPU attention reduces over."""
        return cpu_attention.key_chunk(self.row_tile)

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
        attention = cpu_attention.TreeAttention if backend.on_cpu() else kernels.TreeAttention
        attend_over = attention(tree, offset, self.row_tile).over
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
                        rope_table=None, linears: Optional[cpu_rows.Layer] = None):
    """mlx-lm's llama / qwen2 / qwen3(_moe) DecoderLayer with attention done by `attend`;
    depth: a tree pass, row i at position cache.offset + depth[i]; rope_table: the pass's
    _rope_table where the CPU rotates by table (else built here); linears: the layer's
    projections on padded rows (cpu_rows.Layer), where the BLAS needs them."""
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
    if cpu_attention.rotates_by_table(a.rope, q.shape[-1]):
        positions = mx.arange(cache.offset, cache.offset + L) if depth is None else cache.offset + depth
        q, k = cpu_attention.rotate(q, k, rope_table or cpu_attention.rope_table(a.rope, positions))
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


def _rope_at(rope, x, positions: mx.array):
    """RoPE with one position per row: rows become the batch axis, which takes an offset each."""
    return rope(x.transpose(2, 1, 0, 3), offset=positions).transpose(2, 1, 0, 3)


