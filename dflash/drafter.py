"""The DFlash drafter: a few Qwen3-style layers that fill a whole block in one pass.

Checkpoint-compatible with z-lab/*-DFlash* (docs/algorithm.md: The drafter). The drafter has no embedding and
no lm_head: the engine embeds the block with the target's embedding and reads logits through
the target's head. Every layer attends over [context K/V ; block K/V] with no mask, where the
context is the target's tapped hidden states projected by `fc` + `hidden_norm`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.cache import KVCache
from mlx_lm.models.rope_utils import initialize_rope

from .backends import host_draft


def default_taps(num_target_layers: int, num_taps: int = 5) -> list[int]:
    """`num_taps` layer ids spread evenly from 1 to num_target_layers - 3 (docs/algorithm.md: The drafter)."""
    lo, hi = 1, num_target_layers - 3
    if num_taps == 1:
        return [lo]
    return [round(lo + i * (hi - lo) / (num_taps - 1)) for i in range(num_taps)]


MAX_BLOCK_SIZE = 64
_SIZES = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "vocab_size", "num_target_layers", "head_dim", "max_position_embeddings")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_config(cfg: dict) -> None:
    """Raise a one-line ValueError naming the first value of a drafter config.json that cannot
    run: a block of 0 or 1 would silently verify nothing, a string size would fail deep inside."""
    for key in _SIZES:
        if cfg.get(key) is not None and not (_is_int(cfg[key]) and cfg[key] > 0):
            raise ValueError(f"drafter config.json: {key} must be a positive integer (got {cfg[key]!r})")
    block = cfg.get("block_size", 16)
    if not (_is_int(block) and 2 <= block <= MAX_BLOCK_SIZE):
        raise ValueError(f"drafter config.json: block_size must be an integer in 2..{MAX_BLOCK_SIZE} (got {block!r})")
    for key, top in (("rms_norm_eps", 1.0), ("rope_theta", math.inf)):  # an eps >= 1 swamps the norm
        v = cfg.get(key)
        if v is not None and not (_is_number(v) and 0 < v < top):
            raise ValueError(f"drafter config.json: {key} must be a positive number{' below 1' if top < 2 else ''} "
                             f"(got {v!r})")
    if cfg.get("sliding_window") is not None and not (_is_int(cfg["sliding_window"]) and cfg["sliding_window"] > 0):
        raise ValueError(f"drafter config.json: sliding_window must be a positive integer (got {cfg['sliding_window']!r})")
    if not isinstance(cfg.get("attention_bias", False), bool):
        raise ValueError(f"drafter config.json: attention_bias must be true or false (got {cfg['attention_bias']!r})")
    heads, kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if heads and kv and heads % kv:
        raise ValueError(f"drafter config.json: num_attention_heads ({heads}) must be a multiple of "
                         f"num_key_value_heads ({kv})")
    for key in ("dflash_config", "rope_parameters"):
        if not isinstance(cfg.get(key) or {}, dict):
            raise ValueError(f"drafter config.json: {key} must be an object")
    _check_layer_types(cfg.get("layer_types"), cfg.get("num_hidden_layers"), cfg.get("sliding_window"))
    _check_rope_scaling(cfg)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


LAYER_TYPES = ("full_attention", "sliding_attention")


def _check_layer_types(types, layers, window) -> None:
    if types is None:
        return
    if not (isinstance(types, list) and all(t in LAYER_TYPES for t in types)) or (layers and len(types) != layers):
        raise ValueError(f"drafter config.json: layer_types must be a list of num_hidden_layers ({layers}) of "
                         f"{' / '.join(LAYER_TYPES)} (got {json.dumps(types)[:80]})")
    if "sliding_attention" in types and window is None:
        raise ValueError("drafter config.json: layer_types has sliding_attention layers but no sliding_window")


def _check_rope_scaling(cfg: dict) -> None:
    """rope_scaling (or a non-default rope_parameters, which from_config reads as it) must be an
    object mlx-lm builds a RoPE from, with finite numbers and a positive factor."""
    scaling, rope = cfg.get("rope_scaling"), cfg.get("rope_parameters") or {}
    if scaling is None and rope.get("rope_type", "default") != "default":
        scaling = rope
    if scaling is None:
        return
    shown = json.dumps(scaling)[:80]
    numbers = [v for v in scaling.values() if isinstance(v, (int, float))] if isinstance(scaling, dict) else ()
    if (not isinstance(scaling, dict) or not all(_is_number(v) for v in numbers if not isinstance(v, bool))
            or not (_is_number(scaling.get("factor", 1)) and scaling.get("factor", 1) > 0)):
        raise ValueError(f"drafter config.json: rope_scaling must be an object of finite numbers with a positive "
                         f"factor (got {shown})")
    dims = cfg.get("head_dim") or cfg.get("hidden_size", 64) // cfg.get("num_attention_heads", 1)
    try:  # as the attention layers will
        initialize_rope(dims, cfg.get("rope_theta", 1_000_000.0), False, scaling, cfg.get("max_position_embeddings", 40960))
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        what = f"lacks {e}" if isinstance(e, KeyError) else str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"drafter config.json: rope_scaling {shown} cannot be used ({what})") from None


def _check_ids(taps, mask, num_target_layers: int, vocab_size: int) -> None:
    if not taps or not all(_is_int(t) and 0 <= t < num_target_layers for t in taps):
        raise ValueError(f"drafter config.json: dflash_config.target_layer_ids must be layer ids in "
                         f"0..{num_target_layers - 1} (got {taps!r})")
    if not (_is_int(mask) and 0 <= mask < vocab_size):
        raise ValueError(f"drafter config.json: dflash_config.mask_token_id must be a token id in "
                         f"0..{vocab_size - 1} (got {mask!r})")


def _check_rank(rank) -> int:
    if not (_is_int(rank) and rank >= 0):
        raise ValueError(f"drafter config.json: dflash_config.markov_rank must be a non-negative "
                         f"integer (got {rank!r})")
    return rank


@dataclass
class DrafterArgs:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    num_target_layers: int
    mask_token_id: int
    target_layer_ids: list[int]
    block_size: int = 16
    head_dim: Optional[int] = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    rope_scaling: Optional[dict] = None
    max_position_embeddings: int = 40960
    attention_bias: bool = False
    layer_types: Optional[list[str]] = None
    sliding_window: Optional[int] = None
    markov_rank: int = 0  # > 0: a MarkovHead of this rank (dflash_config.markov_rank)
    extra: dict = field(default_factory=dict)  # other config keys, written back on save

    def __post_init__(self):
        self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads

    @classmethod
    def from_config(cls, cfg: dict) -> "DrafterArgs":
        dc = cfg.get("dflash_config") or {}
        rope = cfg.get("rope_parameters") or {}
        known = {
            "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "vocab_size", "num_target_layers", "block_size", "head_dim",
            "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings",
            "attention_bias", "layer_types", "sliding_window", "dflash_config", "rope_parameters",
        }
        check_config(cfg)
        try:
            n_target = cfg["num_target_layers"]
            taps = dc.get("target_layer_ids") or default_taps(n_target)
            _check_ids(taps, dc["mask_token_id"], n_target, cfg["vocab_size"])
            scaling = cfg.get("rope_scaling")
            if scaling is None and rope.get("rope_type", "default") != "default":
                scaling = rope
            return cls(
                hidden_size=cfg["hidden_size"],
                intermediate_size=cfg["intermediate_size"],
                num_hidden_layers=cfg["num_hidden_layers"],
                num_attention_heads=cfg["num_attention_heads"],
                num_key_value_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
                vocab_size=cfg["vocab_size"],
                num_target_layers=n_target,
                mask_token_id=dc["mask_token_id"],
                target_layer_ids=list(taps),
                block_size=cfg.get("block_size", 16),
                head_dim=cfg.get("head_dim"),
                rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
                rope_theta=cfg.get("rope_theta", rope.get("rope_theta", 1_000_000.0)),
                rope_scaling=scaling,
                max_position_embeddings=cfg.get("max_position_embeddings", 40960),
                attention_bias=cfg.get("attention_bias", False),
                layer_types=cfg.get("layer_types"),
                sliding_window=cfg.get("sliding_window"),
                markov_rank=_check_rank(dc.get("markov_rank") or 0),
                extra={k: v for k, v in cfg.items() if k not in known},
            )
        except KeyError as e:
            raise ValueError(f"drafter config.json lacks required key {e.args[0]!r}") from None

    def to_config(self) -> dict:
        cfg = {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            **self.extra,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": self.attention_bias,
            "block_size": self.block_size,
            "num_target_layers": self.num_target_layers,
            "dflash_config": {
                "mask_token_id": self.mask_token_id,
                "target_layer_ids": list(self.target_layer_ids),
            },
        }
        if self.markov_rank:
            cfg["dflash_config"]["markov_rank"] = self.markov_rank
        if self.layer_types is not None:
            cfg["layer_types"] = self.layer_types
            cfg["sliding_window"] = self.sliding_window
        return cfg


class ContextCache(KVCache):
    """One drafter layer's context K/V. keep None: every position (mlx-lm's KVCache); keep W:
    only the latest W, for a drafter whose every layer sees its context's last W positions. The
    positions before those are never projected (`skip`): a 7k-token prompt's first draft then
    projects W rows, not 7k (~0.9 s on a 2-core CPU). `offset` counts every position either way,
    and keys_and_values() are the latest ones kept."""

    def __init__(self, keep: Optional[int] = None):
        super().__init__()
        self.keep = keep

    def skip(self, n: int) -> None:
        """Count n positions no draft will see, keeping neither them nor what came before."""
        self.keys = self.values = None
        self.offset += n

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        if self.keep is None:
            return super().update_and_fetch(keys, values)
        self.offset += keys.shape[2]
        if self.keys is not None:
            keys = mx.concatenate([self.keys, keys], axis=2)
            values = mx.concatenate([self.values, values], axis=2)
        self.keys, self.values = keys[:, :, -self.keep :], values[:, :, -self.keep :]
        return self.keys, self.values

    def keys_and_values(self):
        return super().keys_and_values() if self.keep is None else (self.keys, self.values)


class Attention(nn.Module):
    def __init__(self, args: DrafterArgs, sliding: bool):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = (
            args.num_attention_heads, args.num_key_value_heads, args.head_dim)
        self.scale = self.head_dim**-0.5
        self.window = args.sliding_window if sliding else None
        bias = args.attention_bias
        h = args.hidden_size
        self.q_proj = nn.Linear(h, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, h, bias=bias)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=args.rms_norm_eps)
        self.k_norm = nn.RMSNorm(self.head_dim, eps=args.rms_norm_eps)
        self.rope = initialize_rope(
            self.head_dim, args.rope_theta, False, args.rope_scaling, args.max_position_embeddings)

    def _heads(self, x: mx.array, n: int) -> mx.array:
        B, L, _ = x.shape
        return x.reshape(B, L, n, self.head_dim).transpose(0, 2, 1, 3)

    def kv(self, x: mx.array, offset) -> tuple[mx.array, mx.array]:
        """Roped keys and values of `x` placed at absolute positions offset, offset+1, ..."""
        k = self.rope(self.k_norm(self._heads(self.k_proj(x), self.n_kv)), offset=offset)
        return k, self._heads(self.v_proj(x), self.n_kv)

    def visible(self, n_ctx: int, n_block: int):
        """(start, mask): the block's queries see context keys from `start` on, and of those
        and the block's keys the ones `mask` [n_block, keys] marks (a numpy array; None: all).
        A full layer sees the whole context; a sliding layer its last `window` positions: its
        cost then stops growing with the context, and past its training length its attention
        stays on what training showed it."""
        if self.window is None:
            return 0, None
        start = max(0, n_ctx - self.window + 1)
        if start == 0 and n_ctx + n_block <= self.window:
            return 0, None
        return start, sliding_mask(n_ctx, n_block, self.window, start)

    def __call__(self, x, ctx_k, ctx_v, offset, mask=None) -> mx.array:
        """Block queries at positions offset.. attend to [context ; block], bidirectionally (a
        sliding layer: to the context's last `window` positions, as sliding_mask says)."""
        B, L, _ = x.shape
        q = self.rope(self.q_norm(self._heads(self.q_proj(x), self.n_heads)), offset=offset)
        k, v = self.kv(x, offset)
        if mask is None:  # the context's latest positions, up to the block's at `offset`
            start, seen = self.visible(offset, L)
            first = offset - ctx_k.shape[2]  # a ContextCache may keep only the latest ones
            ctx_k, ctx_v = ctx_k[:, :, start - first :], ctx_v[:, :, start - first :]
            mask = None if seen is None else mx.array(seen)
        keys = mx.concatenate([ctx_k, k], axis=2)
        values = mx.concatenate([ctx_v, v], axis=2)
        out = mx.fast.scaled_dot_product_attention(q, keys, values, scale=self.scale, mask=mask)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


def sliding_mask(n_ctx: int, n_block: int, window: int, start: int = 0):
    """[n_block, n_ctx - start + n_block] bool: block query at position n_ctx+i sees keys at
    absolute positions > n_ctx+i-window (the keys: context positions start.., then the block).
    A numpy array (host_draft.py takes it as it is; mx ops take it as an array)."""
    q_pos = n_ctx + np.arange(n_block)[:, None]
    k_pos = np.arange(start, n_ctx + n_block)[None]
    return k_pos > q_pos - window


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def __call__(self, x):
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, args: DrafterArgs, sliding: bool):
        super().__init__()
        self.self_attn = Attention(args, sliding)
        self.mlp = MLP(args.hidden_size, args.intermediate_size)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x, ctx_k, ctx_v, offset, mask=None):
        h = x + self.self_attn(self.input_layernorm(x), ctx_k, ctx_v, offset, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class MarkovHead(nn.Module):
    """A low-rank transition bias from the previous token (DSpark's Markov head): block position
    j >= 2's logits gain out_proj(in_proj(E[prev])), E the target's input embedding and prev the
    token chosen at j-1. The drafter fills its block in one pass with MASK at j-1, so without it
    position j cannot know which candidate was taken there (a tree's sibling path); position 1
    already sees the staged token in the block, and a bias there would count it twice. `rows`:
    the drafter's logit vocabulary (its draft vocabulary, else the target's). out_proj starts at
    zero: a new head leaves every proposal unchanged."""

    def __init__(self, hidden: int, rows: int, rank: int):
        super().__init__()
        self.in_proj = nn.Linear(hidden, rank, bias=False)
        self.out_proj = nn.Linear(rank, rows, bias=False)
        self.out_proj.weight = mx.zeros_like(self.out_proj.weight)

    def __call__(self, prev_embeds: mx.array) -> mx.array:
        return self.out_proj(self.in_proj(prev_embeds.astype(self.in_proj.weight.dtype)))


class Drafter(nn.Module):
    """Predicts block positions 1..B-1 from [staged, MASK...] plus the target's context.

    head_rows: the Markov head's vocabulary size when args.markov_rank > 0 (the draft
    vocabulary's size; default the target's vocabulary)."""

    def __init__(self, args: DrafterArgs, head_rows: Optional[int] = None):
        super().__init__()
        self.args = args
        types = args.layer_types or ["full_attention"] * args.num_hidden_layers
        n_taps = len(args.target_layer_ids)
        self.fc = nn.Linear(n_taps * args.hidden_size, args.hidden_size, bias=False)
        self.hidden_norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.layers = [DecoderLayer(args, t == "sliding_attention") for t in types]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.vocab: Optional[DraftVocab] = None  # propose from a subset of the vocabulary
        if args.markov_rank:
            self.markov = MarkovHead(args.hidden_size, head_rows or args.vocab_size, args.markov_rank)

    @property
    def block_size(self) -> int:
        return self.args.block_size

    @property
    def mask_token_id(self) -> int:
        return self.args.mask_token_id

    @property
    def target_layer_ids(self) -> list[int]:
        return self.args.target_layer_ids

    @property
    def context_keep(self) -> Optional[int]:
        """How many of the context's latest positions a draft can see: the widest window where
        every layer has one (None: a full-attention layer sees them all)."""
        windows = [layer.self_attn.window for layer in self.layers]
        return None if None in windows else max(windows)

    def make_cache(self) -> list[ContextCache]:
        """One context-only K/V cache per layer, keeping what a draft can see."""
        return [ContextCache(self.context_keep) for _ in self.layers]

    def project(self, features: mx.array) -> mx.array:
        """Concatenated target taps [B, L, n_taps*H] -> the shared context [B, L, H]."""
        return self.hidden_norm(self.fc(features.astype(self.fc.weight.dtype)))

    def extend_context(self, features: mx.array, cache: list[ContextCache]) -> None:
        """Append the K/V of newly committed positions (roped at their absolute positions); of
        more than a windowed cache keeps, only the latest are projected."""
        keep = getattr(cache[0], "keep", None)  # a plain KVCache keeps everything
        if keep is not None and features.shape[1] > keep:
            for c in cache:
                c.skip(features.shape[1] - keep)
            features = features[:, -keep:]
        ctx = self.project(features)
        for layer, c in zip(self.layers, cache):
            k, v = layer.self_attn.kv(ctx, c.offset)
            c.update_and_fetch(k, v)

    def __call__(self, block_embeds: mx.array, cache: list[ContextCache]) -> mx.array:
        """Hidden states of the block; block position 0 sits right after the context (on a CPU
        with numpy's help: host_draft.py)."""
        if host_draft.runs(self):
            return host_draft.forward(self, block_embeds, cache)
        h = block_embeds.astype(self.fc.weight.dtype)
        for layer, c in zip(self.layers, cache):
            ctx_k, ctx_v = c.keys_and_values() if c.offset else self._empty(h)
            h = layer(h, ctx_k, ctx_v, c.offset)
        return self.norm(h)

    def draft_logits(self, target, staged: int, k: int, cache: list[ContextCache]) -> mx.array:
        """Logits [k-1, n] for block positions 1..k-1 over the draft vocabulary (column c is
        token `token_ids[c]`; the whole vocabulary without one).

        The drafter always fills its whole trained block: its positions attend to each other, so
        a block cut to k would be a context it never saw in training (on the CPU at k = 5 that
        cost ~15 % of tau); only the head is cut to the k-1 positions that will be verified."""
        block = mx.array([staged] + [self.mask_token_id] * (self.block_size - 1))[None]
        h = self(target.embed(block), cache)[0, 1:k]
        return self.vocab.logits(target, h) if self.vocab is not None else target.logits(h)

    @property
    def token_ids(self) -> Optional[np.ndarray]:
        """The token id of each column of `draft_logits` (None: the column is the id)."""
        return None if self.vocab is None else self.vocab.ids

    def propose(self, target, staged: int, k: int, cache: list[ContextCache]) -> mx.array:
        """`draft_logits` over the target's whole vocabulary (-inf outside the draft vocabulary)."""
        logits = self.draft_logits(target, staged, k, cache)
        return logits if self.vocab is None else self.vocab.scatter(logits, target.vocab_size)

    @property
    def has_markov(self) -> bool:
        return "markov" in self

    @property
    def head_rows(self) -> Optional[int]:
        """The Markov head's vocabulary size (None: no head)."""
        return self.markov.out_proj.weight.shape[0] if self.has_markov else None

    def markov_bias(self, prev_embeds: mx.array, vocab_size: int) -> mx.array:
        """The head's bias [..., vocab_size] for previous tokens given by their target embeddings,
        in the vocabulary of `propose`'s logits (zero outside the draft vocabulary)."""
        b = self.markov(prev_embeds)
        if self.vocab is None:
            return b
        full = mx.zeros(b.shape[:-1] + (vocab_size,), dtype=b.dtype)
        return full.at[..., self.vocab.index].add(b)

    def transition_bias(self, target, prev_ids: mx.array) -> mx.array:
        """Rows [N, V] to add to the base logits of a block position >= 2 when prev_ids [N] are
        the tokens chosen at the position before it (position 1 takes none: MarkovHead)."""
        return self.markov_bias(target.embed(prev_ids), target.vocab_size)

    def chain(self, target, staged: int, k: int, cache: list[ContextCache]) -> mx.array:
        """The greedy chain [k-1] (target token ids): d_1 = argmax(base_1), then d_j =
        argmax(base_j + bias(d_{j-1})); argmax(base) without a head. In the draft vocabulary's
        columns: the head's rows are those columns."""
        base = self.draft_logits(target, staged, k, cache)
        if not self.has_markov:
            return self.column_tokens(mx.argmax(base, axis=-1))
        out = [self.column_tokens(mx.argmax(base[:1], axis=-1))]
        for j in range(1, k - 1):
            bias = self.markov(target.embed(out[-1]))
            out.append(self.column_tokens(mx.argmax(base[j : j + 1] + bias, axis=-1)))
        return mx.concatenate(out)

    def column_tokens(self, cols: mx.array) -> mx.array:
        """Columns of `draft_logits` -> token ids."""
        return cols if self.vocab is None else self.vocab.index[cols]

    def _empty(self, h):
        a = self.layers[0].self_attn
        z = mx.zeros((h.shape[0], a.n_kv, 0, a.head_dim), dtype=h.dtype)
        return z, z


class DraftVocab:
    """The token ids the drafter may propose: the most frequent ones in the target's own answers
    (FR-Spec's frequency-ranked draft vocabulary). The draft's head then reads only these rows of
    the target's head - on a CPU most of a draft pass is that memory-bound read (49k x 576 fp32
    for SmolLM2) - while the other logits are -inf. Verification is untouched, so outputs stay
    exact; a token outside the subset is simply never drafted. Stored as `draft_vocab.npy`
    (int32) next to the checkpoint; z-lab's loaders ignore it."""

    FILE = "draft_vocab.npy"

    def __init__(self, ids):
        self.ids = np.asarray(ids, dtype=np.int32)
        self.index = mx.array(self.ids)
        self._rows, self._target = None, None

    def logits(self, target, h: mx.array) -> mx.array:
        """Final hidden states [N, H] -> logits [N, n] over this vocabulary's ids."""
        if self._target is not target:  # gathered once per target: [n, H] rows of its head
            head = target.head if target.head is not None else target.backbone.embed_tokens
            self._rows, self._target = dense_weight(head, self.index), target
        return h @ self._rows.T

    def scatter(self, logits: mx.array, vocab_size: int) -> mx.array:
        """[N, n] logits over this vocabulary -> [N, vocab_size], -inf outside it."""
        full = mx.full((logits.shape[0], vocab_size), -mx.inf, dtype=logits.dtype)
        full[:, self.index] = logits
        return full

    def rows_of(self, token_ids: np.ndarray) -> np.ndarray:
        """The positions of token ids in this vocabulary (ids outside it: position 0)."""
        if not hasattr(self, "_row"):
            self._row = np.zeros(int(self.ids.max()) + 1, np.int32)
            self._row[self.ids] = np.arange(len(self.ids), dtype=np.int32)
        return self._row[np.minimum(token_ids, len(self._row) - 1)]

    def save(self, path: Path) -> None:
        np.save(Path(path) / self.FILE, self.ids)

    @classmethod
    def load(cls, path: Path, vocab_size: int) -> Optional["DraftVocab"]:
        f = Path(path) / cls.FILE
        if not f.exists():
            return None
        try:
            ids = np.load(f)
        except Exception as e:
            raise ValueError(f"cannot read {f}: {e}") from None
        if ids.ndim != 1 or not len(ids) or ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError(f"{f}: expected token ids in [0, {vocab_size})")
        return cls(ids)


def dense_weight(layer, rows: Optional[mx.array] = None) -> mx.array:
    """The float weight of a Linear/Embedding (only `rows` of it if given), dequantized if need be."""
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])
    if isinstance(layer, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
        biases = layer.get("biases")
        return mx.dequantize(pick(layer.weight), pick(layer.scales),
                             None if biases is None else pick(biases), group_size=layer.group_size,
                             bits=layer.bits, mode=getattr(layer, "mode", "affine"))
    return pick(layer.weight)


def _weights_path(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no *.safetensors weights in drafter directory {path}")
    return files


def load_drafter(path: str | Path, dtype: Optional[mx.Dtype] = None) -> Drafter:
    """Load a drafter from a local HF-layout directory (config.json + model.safetensors)."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ValueError(f"drafter directory {path} has no config.json")
    try:
        cfg = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"drafter config.json in {path} is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"drafter config.json in {path} is not a JSON object")
    args = DrafterArgs.from_config(cfg)
    vocab = DraftVocab.load(path, args.vocab_size)
    model = Drafter(args, head_rows=vocab and len(vocab.ids))
    weights: dict[str, Any] = {}
    for f in _weights_path(path):
        try:
            weights.update(mx.load(str(f)))
        except Exception as e:  # mlx raises RuntimeError/ValueError on truncated files
            raise ValueError(f"cannot read drafter weights {f.name}: {e}") from None
    if any(k.startswith("lm_head.") or "embed_tokens" in k for k in weights):
        raise ValueError(
            f"{path} carries its own lm_head/embedding: not a DFlash drafter (docs/algorithm.md: The drafter)")
    weights = {k.removeprefix("model."): v for k, v in weights.items()}
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as e:
        raise ValueError(f"drafter weights in {path} do not match its config.json: {e}") from None
    if dtype is not None:
        model.set_dtype(dtype)
    model.vocab = vocab
    mx.eval(model.parameters())
    return model


def save_drafter(model: Drafter, path: str | Path, dtype: Optional[mx.Dtype] = None) -> Path:
    """Write config.json + model.safetensors in the HF layout of z-lab's checkpoints."""
    from mlx.utils import tree_flatten

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(model.args.to_config(), indent=2) + "\n")
    weights = dict(tree_flatten(model.parameters()))
    if dtype is not None:
        weights = {k: v.astype(dtype) for k, v in weights.items()}
    mx.save_safetensors(str(path / "model.safetensors"), weights, metadata={"format": "mlx"})
    if model.vocab is not None:
        model.vocab.save(path)
    return path
