"""The drafter a target gets (its config, mask token, draft vocabulary, initial weights) and the
target's tapped features it reads."""

from __future__ import annotations

import dataclasses

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


def grow_layers(drafter: Drafter, n: int) -> Drafter:
    """The same drafter with n >= its layer count: each new layer is a copy of the one before it
    with its attention and MLP output projections zeroed, so the residual stream - and every
    proposal - is unchanged at the start and training grows the new capacity from there."""
    import copy

    from mlx.utils import tree_flatten

    old = len(drafter.layers)
    if n <= old:
        raise ValueError(f"--grow-layers {n}: the drafter already has {old} layers")
    src = [i * old // n for i in range(n)]  # new layer j copies old layer src[j]; repeats are new
    types = drafter.args.layer_types
    grown = Drafter(dataclasses.replace(copy.deepcopy(drafter.args), num_hidden_layers=n,
                                        layer_types=types and [types[i] for i in src]))
    weights = {k: v for k, v in tree_flatten(drafter.parameters()) if not k.startswith("layers.")}
    for j, i in enumerate(src):
        for k, v in tree_flatten(drafter.layers[i].parameters()):
            fresh = j > 0 and src[j - 1] == i
            zero = fresh and k in ("self_attn.o_proj.weight", "mlp.down_proj.weight")
            weights[f"layers.{j}.{k}"] = mx.zeros_like(v) if zero else v
    grown.load_weights(list(weights.items()), strict=True)
    grown.set_dtype(drafter.fc.weight.dtype)
    grown.vocab = drafter.vocab
    return grown


def add_taps(drafter: Drafter, taps: list[int]) -> Drafter:
    """The same drafter reading more target layers: `fc` gains a zero block of columns for each new
    tap (the taps stay sorted, so the feature layout is the engine's), so every proposal is
    unchanged at the start and training learns what the new layers add."""
    old = list(drafter.target_layer_ids)
    new = sorted(set(old) | set(taps))
    if len(new) == len(old):
        raise ValueError(f"--add-taps {taps}: the drafter already reads layers {old}")
    H = drafter.args.hidden_size
    wider = Drafter(dataclasses.replace(drafter.args, target_layer_ids=new))
    cols = [drafter.fc.weight[:, old.index(t) * H:(old.index(t) + 1) * H] if t in old
            else mx.zeros((H, H), drafter.fc.weight.dtype) for t in new]
    wider.update(drafter.parameters())
    wider.fc.weight = mx.concatenate(cols, axis=1)
    wider.set_dtype(drafter.fc.weight.dtype)
    wider.vocab = drafter.vocab
    return wider


def target_features(target, ids: mx.array, final: bool = False):
    """The tapped layer outputs [S, L, n_taps*H] of a causal pass over ids [S, L] (no cache); the
    layers after the last tap and the head are skipped. final=True: every layer runs and the
    final normed hidden states [S, L, H] (the head's input: the teacher for --distill) come too."""
    from mlx_lm.models.base import create_attention_mask

    h = target.embed(ids)
    mask = create_attention_mask(h, None)
    taps = {}
    for i, layer in enumerate(target.layers[: None if final else max(target.tap_ids) + 1]):
        h = layer(h, None if getattr(layer, "is_linear", False) else mask, None)
        if i in target.tap_ids:
            taps[i] = h
    feats = mx.stop_gradient(mx.concatenate([taps[t] for t in target.tap_ids], -1))
    return (feats, mx.stop_gradient(target.backbone.norm(h))) if final else feats
