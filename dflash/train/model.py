"""The drafter a target gets (its config, mask token, draft vocabulary, initial weights) and the
target's tapped features it reads."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from ..drafter import Drafter, DrafterArgs, default_taps, dense_weight
from .config import TrainConfig
from .data import Dataset


def draft_vocab_from(ds: Dataset, n: int) -> np.ndarray:
    """The n token ids seen most often in the answers (prompts excluded), most frequent first."""
    answer = np.zeros(len(ds.tokens), dtype=bool)
    for i in range(len(ds)):
        answer[ds.offsets[i] + ds.prompt_lens[i] : ds.offsets[i + 1]] = True
    counts = np.bincount(ds.tokens[answer])
    return np.argsort(-counts, kind="stable")[: min(n, int((counts > 0).sum()))].astype(np.int32)


def _target_args(target):
    return getattr(target.model, "language_model", target.model).args


def choose_mask_token(tokenizer, vocab_size: int) -> int:
    """An id the target never sees in text: the first embedding row past the tokenizer's vocabulary
    (z-lab's choice for Qwen3), else the last special token that is not bos/eos/pad/unk and does
    not occur in the chat template."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    n = len(hf) if hasattr(hf, "__len__") else vocab_size
    if n < vocab_size:
        return n
    used = {getattr(hf, f"{k}_token_id", None) for k in ("bos", "eos", "pad", "unk")}
    used |= set(getattr(tokenizer, "eos_token_ids", ()))
    template = str(getattr(hf, "chat_template", "") or "")
    added = getattr(hf, "added_tokens_decoder", {}) or {}
    for tid in sorted(added, reverse=True):
        tok = added[tid]
        if getattr(tok, "special", False) and tid not in used and str(tok) not in template:
            return int(tid)
    raise ValueError("cannot find an unused special token for the mask; pass --mask-token-id")


def drafter_args_for(target, tokenizer, cfg: TrainConfig) -> DrafterArgs:
    a = _target_args(target)
    heads = a.num_attention_heads
    rope = getattr(a, "rope_parameters", None) or {}
    return DrafterArgs(
        hidden_size=target.hidden_size,
        intermediate_size=cfg.intermediate_size or a.intermediate_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=heads,
        num_key_value_heads=getattr(a, "num_key_value_heads", None) or heads,
        vocab_size=target.vocab_size,
        num_target_layers=target.num_layers,
        mask_token_id=cfg.mask_token_id if cfg.mask_token_id is not None
        else choose_mask_token(tokenizer, target.vocab_size),
        target_layer_ids=list(cfg.taps or default_taps(target.num_layers, cfg.num_taps)),
        block_size=cfg.block_size,
        head_dim=getattr(a, "head_dim", None) or target.hidden_size // heads,
        rms_norm_eps=getattr(a, "rms_norm_eps", 1e-6),
        rope_theta=getattr(a, "rope_theta", None) or rope.get("rope_theta", 10000.0),
        max_position_embeddings=target.max_context or 40960,
    )


def init_from_target(drafter: Drafter, target) -> list[int]:
    """Copy the target's last full-attention layers (dequantized) into the drafter's layers, where
    the shapes agree; q_norm/k_norm stay at one. Returns the source layer ids."""
    full = [i for i, l in enumerate(target.layers) if hasattr(l, "self_attn")]
    src = full[-len(drafter.layers):]
    for d, i in zip(drafter.layers, src):
        t = target.layers[i]
        pairs = [(d.self_attn.q_proj, t.self_attn.q_proj), (d.self_attn.k_proj, t.self_attn.k_proj),
                 (d.self_attn.v_proj, t.self_attn.v_proj), (d.self_attn.o_proj, t.self_attn.o_proj),
                 (d.mlp.gate_proj, t.mlp.gate_proj), (d.mlp.up_proj, t.mlp.up_proj),
                 (d.mlp.down_proj, t.mlp.down_proj)]
        for dst, s in pairs:
            w = dense_weight(s)
            if w.shape == dst.weight.shape:
                dst.weight = w.astype(dst.weight.dtype)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            w = getattr(t, norm).weight
            if w.shape == getattr(d, norm).weight.shape:
                getattr(d, norm).weight = w.astype(mx.float32)
    return src


def grow(drafter: Drafter, n: int) -> Drafter:
    """The drafter with n more layers after its own, each a copy of its last layer whose output
    projections (o_proj, down_proj) are zero: the residual stream passes them unchanged, so the
    grown drafter drafts exactly as the trained one until training moves them (a campaign's
    slices add capacity without starting over)."""
    import dataclasses

    from mlx.utils import tree_map

    from ..drafter import DecoderLayer

    a = drafter.args
    types = a.layer_types or ["full_attention"] * a.num_hidden_layers
    new_types = types + [types[-1]] * n
    drafter.args = dataclasses.replace(a, num_hidden_layers=len(new_types), layer_types=new_types)
    last = drafter.layers[-1]
    for _ in range(n):
        layer = DecoderLayer(drafter.args, new_types[-1] == "sliding_attention")
        layer.update(tree_map(mx.array, last.parameters()))  # copies, not shared arrays
        layer.self_attn.o_proj.weight = mx.zeros_like(last.self_attn.o_proj.weight)
        layer.mlp.down_proj.weight = mx.zeros_like(last.mlp.down_proj.weight)
        drafter.layers.append(layer)
    return drafter


def set_window(drafter: Drafter, window: int) -> Drafter:
    """Every layer of the drafter sees its context's last `window` positions (0: all of it), in
    the training steps (blocks.context_mask reads each layer's window) and in the saved config,
    which the engine then follows."""
    import dataclasses

    kind = "sliding_attention" if window else "full_attention"
    drafter.args = dataclasses.replace(drafter.args, layer_types=[kind] * len(drafter.layers),
                                       sliding_window=window or None)
    for layer in drafter.layers:
        layer.self_attn.window = window or None
    return drafter


def target_features(target, ids: mx.array):
    """The tapped layer outputs [S, L, n_taps*H] of a causal pass over ids [S, L] (no cache); the
    layers after the last tap and the head are skipped."""
    from mlx_lm.models.base import create_attention_mask

    h = target.embed(ids)
    mask = create_attention_mask(h, None)
    taps = {}
    for i, layer in enumerate(target.layers[: max(target.tap_ids) + 1]):
        h = layer(h, None if getattr(layer, "is_linear", False) else mask, None)
        if i in target.tap_ids:
            taps[i] = h
    return mx.stop_gradient(mx.concatenate([taps[t] for t in target.tap_ids], -1))
