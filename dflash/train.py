"""Training a DFlash drafter for an mlx-lm target, by self-distillation, in MLX (Metal, CUDA, CPU).

    python -m dflash train --target builtin:smollm2-135m-instruct --out runs/smol

1. data      the target's own greedy answers to a prompt set (chat template applied), generated in
             lockstep batches of similar-length prompts (`greedy_batch`) and saved as a token
             file (`data.npz`) that later runs reuse. `--opening N` answers the prompts again from
             other starts (1..N sampled tokens, counted as prompt, then greedy): more greedy data
             without more prompts.
2. blocks    random anchors a inside each response. A block is [x_a, MASK x (B-1)] at positions
             a..a+B-1; its context is the target's tapped features of positions < a. Mask slot k
             predicts x_{a+k} (DFLASH.md §3), exactly what the engine asks of the drafter.
3. loss      cross-entropy at slots 1..B-1 through the target's frozen embedding and head, weighted
             w_k = exp(-(k-1)/gamma): a later slot only counts if every earlier one was accepted.
             Each block is its own batch row; its keys are its sequence's whole context K/V with
             positions >= a masked out (bidirectional inside the block), RoPE offsets = anchors.
4. eval      held-out tau per category through the real engine (`dflash.engine.stream`), greedy,
             checking that the DFlash output equals target-only decoding.

Validation reports the loss, per-slot accuracy, tau~ (the mean over random anchors) and
tau(walk): the held-out answers crossed cycle by cycle as the engine would (`walk`), the number
to compare with the engine's tau; tau~ is higher because easy stretches take few cycles.

Checkpoints (`OUT/checkpoint/`: weights, optimizer state, step) make runs resumable (`--resume`);
the drafter itself is written to OUT in the HF layout of DFLASH.md §3 (`save_drafter`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.nn.utils import average_gradients
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from .drafter import Drafter, DrafterArgs, DraftVocab, default_taps, dense_weight, save_drafter
from .load import TARGET_DTYPES
from .registry import ASSETS

DEFAULT_PROMPTS = ASSETS / "prompts" / "train.jsonl"
DEFAULT_EVAL_PROMPTS = ASSETS / "prompts" / "eval.jsonl"
DATA_FILE = "data.npz"
CKPT_DIR = "checkpoint"
LOG_FILE = "train_log.jsonl"
SAVE_DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}


@dataclass
class TrainConfig:
    """One training run; `python -m dflash train --help` documents each field."""

    out: str
    layers: int = 5
    intermediate_size: Optional[int] = None  # None: the target's
    num_taps: int = 5
    taps: Optional[list[int]] = None  # None: default_taps(target layers, num_taps)
    block_size: int = 16
    mask_token_id: Optional[int] = None  # None: choose_mask_token()
    init: str = "random"  # "target": copy the target's last layers; or a drafter directory
    draft_vocab: int = 0  # > 0: ship the N most frequent answer tokens as the draft vocabulary
    max_new_tokens: int = 256
    gen_batch: int = 256
    max_prompts: Optional[int] = None
    seq_len: int = 512
    batch_seqs: int = 32
    anchors: int = 32
    steps: int = 0  # 0: derive from train_seconds after timing the first steps
    train_seconds: float = 600.0  # <= 0: whatever time_limit leaves
    lr: float = 6e-4
    min_lr_ratio: float = 0.1
    warmup: float = 0.04  # fraction of steps
    weight_decay: float = 0.01
    clip: float = 1.0
    gamma: float = 7.0
    val_frac: float = 0.02
    seed: int = 0
    save_every: int = 500
    log_every: int = 25
    time_limit: Optional[float] = None  # seconds since start: save and stop
    stop_after: Optional[int] = None  # steps in this run: save and stop
    save_dtype: str = "float16"
    dtype: str = "float32"  # forward/backward dtype; the master weights stay float32
    cache_features: bool = False
    compile: bool = True
    distributed: str = ""  # an mx.distributed backend (nccl, ring, mpi): data-parallel over its group


# ---------------------------------------------------------------------------------------------
# data: the target's own greedy answers


def read_prompts(path: str | Path) -> list[tuple[str, str | list[dict]]]:
    """(category, prompt) pairs from a JSONL file of {"category", "prompt"} objects; instead of
    "prompt", "messages" holds a conversation ending with a user turn."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt = obj["messages"] if "messages" in obj else obj["prompt"]
            if isinstance(prompt, list) and not (
                    prompt and prompt[-1].get("role") == "user"
                    and all(isinstance(m.get("content"), str) and m.get("role") in ("system", "user", "assistant")
                            for m in prompt)):
                raise TypeError
            out.append((str(obj.get("category", "default")), prompt))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{path}:{i + 1}: expected a JSON object with a 'prompt' (or 'messages' "
                             "ending with a user turn)") from None
    if not out:
        raise ValueError(f"no prompts in {path}")
    return out


@dataclass
class Dataset:
    """Prompt + response token ids, one sequence per prompt, stored flat."""

    tokens: np.ndarray  # int32 [total]
    offsets: np.ndarray  # int64 [n + 1]
    prompt_lens: np.ndarray  # int32 [n]
    prompt_index: np.ndarray  # int32 [n]: line of the prompt file
    categories: np.ndarray  # str [n]
    meta: dict

    def __len__(self) -> int:
        return len(self.prompt_lens)

    def seq(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, tokens=self.tokens, offsets=self.offsets, prompt_lens=self.prompt_lens,
                 prompt_index=self.prompt_index, categories=self.categories,
                 meta=np.array(json.dumps(self.meta)))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "Dataset":
        z = np.load(path)
        return cls(z["tokens"], z["offsets"], z["prompt_lens"], z["prompt_index"],
                   z["categories"], json.loads(str(z["meta"])))

    @classmethod
    def concat(cls, parts: list["Dataset"]) -> "Dataset":
        """Several token files as one training set (prompt_index then only names a line of the
        part's own prompt file)."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.concatenate([[0]] + [p.offsets[1:] + sum(len(q.tokens) for q in parts[:k])
                                          for k, p in enumerate(parts)])
        return cls(np.concatenate([p.tokens for p in parts]), offsets.astype(np.int64),
                   np.concatenate([p.prompt_lens for p in parts]),
                   np.concatenate([p.prompt_index for p in parts]),
                   np.concatenate([p.categories for p in parts]),
                   {"parts": [p.meta for p in parts], "complete": all(p.meta.get("complete") for p in parts)})

    @classmethod
    def from_lists(cls, seqs: list[list[int]], prompt_lens, prompt_index, categories, meta) -> "Dataset":
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(s) for s in seqs])
        tokens = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
        return cls(tokens, offsets, np.asarray(prompt_lens, np.int32),
                   np.asarray(prompt_index, np.int32), np.asarray(categories, dtype=str), meta)


def greedy_batch(model, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int],
                 opening: Optional[np.ndarray] = None, temperature: float = 1.0,
                 seed: int = 0) -> list[list[int]]:
    """Greedy answers to a batch of prompts in lockstep: left-padded (mlx-lm's BatchKVCache keeps
    each row's positions and masks its padding), one fixed-shape forward per token for the whole
    batch, no per-row work on the host. An answer ends with its stop token (kept: it is the
    target's own next token) or at max_new_tokens.

    `opening[r]` > 0: row r's first opening[r] tokens are sampled at `temperature` (never a stop
    token) and the rest is greedy: another greedy answer to the same prompt, from another start."""
    from mlx_lm.models.cache import BatchKVCache

    width = max(map(len, prompts))
    pad = [width - len(p) for p in prompts]
    ids = mx.array([[0] * k + p for k, p in zip(pad, prompts)])
    cache = [BatchKVCache(pad) for _ in model.layers]
    stops = mx.array(stop_ids)
    longest = 0 if opening is None else int(opening.max())
    n_open = mx.array(np.zeros(len(prompts)) if opening is None else opening)
    keys = mx.random.split(mx.random.key(seed), max(1, longest))

    def pick(logits, i):  # the token at answer position i
        y = mx.argmax(logits, -1)
        if i >= longest:
            return y
        logits = logits.at[:, stops].add(-mx.inf)
        s = mx.random.categorical(logits / temperature, key=keys[i])
        return mx.where(i < n_open, s, y)

    y = pick(model(ids, cache=cache)[:, -1], 0)
    out, done = [], mx.zeros(len(prompts), dtype=mx.bool_)
    for i in range(max_new_tokens):
        out.append(y)
        done = done | (y[:, None] == stops).any(-1)
        if i + 1 == max_new_tokens:
            break
        nxt = pick(model(y[:, None], cache=cache)[:, -1], i + 1)
        mx.async_eval(nxt, done)  # the device runs ahead while the host checks, now and then,
        if i % 16 == 15 and done.all().item():  # whether every row has stopped
            break
        y = nxt
    tokens = np.array(mx.stack(out, 1))
    answers = []
    for row in tokens:
        hit = np.flatnonzero(np.isin(row, stop_ids))
        answers.append(row[: hit[0] + 1 if len(hit) else len(row)].tolist())
    return answers


def generate_data(model, tokenizer, prompts: list[tuple[str, str]], path: Path,
                  max_new_tokens: int, batch_size: int, time_limit: Optional[float] = None,
                  progress: Callable[[str], None] = print, opening: int = 0,
                  temperature: float = 1.0, seed: int = 0) -> Dataset:
    """Greedy answers of `model` to every prompt, in batches of similar prompt length; saved to
    `path` after each batch (a partial file resumes). After `time_limit` seconds it stops and
    returns the answers finished so far.

    opening > 0: each answer opens with 1..opening sampled tokens (`greedy_batch`), which the token
    file counts as prompt, so that training anchors and labels only ever see greedy tokens."""
    from .load import encode_prompt

    meta = {"max_new_tokens": max_new_tokens, "n_prompts": len(prompts), "complete": False}
    if opening:
        meta.update(opening=opening, temperature=temperature, seed=seed)
    done: dict[int, tuple[list[int], int]] = {}
    if path.exists():
        old = Dataset.load(path)
        for j, i in enumerate(old.prompt_index):
            done[int(i)] = (old.seq(j).tolist(), int(old.prompt_lens[j]))
        progress(f"resuming data generation: {len(done)}/{len(prompts)} answers in {path}")

    def save(complete: bool) -> Dataset:
        idx = sorted(done)
        ds = Dataset.from_lists([done[i][0] for i in idx], [done[i][1] for i in idx], idx,
                                [prompts[i][0] for i in idx], dict(meta, complete=complete))
        ds.save(path)
        return ds

    encoded = {i: encode_prompt(tokenizer, prompts[i][1]) for i in range(len(prompts)) if i not in done}
    todo = sorted(encoded, key=lambda i: len(encoded[i]))  # little padding inside a batch
    stop_ids = sorted(tokenizer.eos_token_ids)
    bar = _bar(len(todo), "generating")
    n_tok, t0 = 0, time.perf_counter()
    for s in range(0, len(todo), batch_size):
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            progress(f"\ngeneration stopped at its time limit: {len(done)}/{len(prompts)} answers")
            break
        batch = todo[s : s + batch_size]
        n_open = None
        if opening:  # seeded by the batch's first prompt: a resumed file draws the same openings
            n_open = np.random.default_rng([seed, batch[0]]).integers(1, opening + 1, len(batch))
        answers = greedy_batch(model, [encoded[i] for i in batch], max_new_tokens, stop_ids,
                               n_open, temperature, seed=seed * 1_000_003 + batch[0])
        for r, (i, answer) in enumerate(zip(batch, answers)):
            k = 0 if n_open is None else min(int(n_open[r]), len(answer))
            done[i] = (encoded[i] + answer, len(encoded[i]) + k)
            n_tok += len(answer)
        save(False)
        bar.update(len(batch))
        bar.set_postfix_str(f"{n_tok / (time.perf_counter() - t0):.0f} tok/s", refresh=False)
    bar.close()
    return save(len(done) == len(prompts))


FOLLOW_UPS = (
    "Can you explain that in simpler terms?", "Can you give me an example?",
    "Thanks! Can you summarize the key points in a short list?", "What else should I know about this?",
    "Could you make it shorter?", "Why is that?", "Can you go into more detail on the first point?",
    "What would you suggest as a next step?",
)


def follow_ups(ds: Dataset, prompts: list[tuple], tokenizer, seed: int = 0) -> list[dict]:
    """A second user turn after each answer that ended on its own (stop token, not the length
    cap): {"category", "messages": [..., the answer, a follow-up]} records, whose greedy answers
    are new data with a longer context. `prompts` is the list the answers were generated from
    (ds.prompt_index indexes it)."""
    rng, stops, out = np.random.default_rng(seed), set(tokenizer.eos_token_ids), []
    for j in range(len(ds)):
        answer = ds.seq(j)[ds.prompt_lens[j]:].tolist()
        if not answer or answer[-1] not in stops:
            continue
        cat, prompt = prompts[int(ds.prompt_index[j])]
        turns = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        out.append({"category": cat, "messages": turns + [
            {"role": "assistant", "content": tokenizer.decode(answer[:-1])},
            {"role": "user", "content": FOLLOW_UPS[int(rng.integers(len(FOLLOW_UPS)))]}]})
    return out


# ---------------------------------------------------------------------------------------------
# the drafter for a target


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


def target_features(target, ids: mx.array) -> mx.array:
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


# ---------------------------------------------------------------------------------------------
# blocks and the loss


def sample_blocks(ds: Dataset, seqs: np.ndarray, rng: np.random.Generator, L: int, B: int,
                  n_anchors: int, mask_id: int, pad_id: int) -> dict[str, np.ndarray]:
    """Fixed-shape arrays for `seqs`: ids [S, L] and n_anchors blocks per sequence."""
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
    return dict(_blocks(ids, lens, rows, anchors.reshape(-1), B, mask_id), ids=ids[:, :L])


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


def drafter_forward(drafter: Drafter, io: FrozenIO, feats: mx.array, block: mx.array,
                    anchors: mx.array, rows: mx.array) -> mx.array:
    """Block hidden states [R, B, H]: row r is a block at position anchors[r] of sequence rows[r],
    seeing that sequence's context at positions < anchors[r] (as the engine's cache would)."""
    L = feats.shape[1]
    ctx = drafter.project(feats)
    h = io.embed(block).astype(drafter.fc.weight.dtype)
    seen = mx.arange(L)[None] < anchors[:, None]
    mask = mx.concatenate([seen, mx.ones((len(anchors), block.shape[1]), dtype=mx.bool_)], 1)
    mask = mask[:, None, None, :]
    for layer in drafter.layers:
        k, v = layer.self_attn.kv(ctx, 0)
        h = layer(h, k[rows], v[rows], anchors, mask)
    return drafter.norm(h)


def block_loss(drafter, io, feats, block, labels, valid, anchors, rows, weights):
    """Weighted cross-entropy at slots 1..B-1, and per-slot (correct, all-correct-so-far) sums."""
    h = drafter_forward(drafter, io, feats, block, anchors, rows)
    logits = io.logits(h[:, 1:]).astype(mx.float32)
    ce = nn.losses.cross_entropy(logits, labels, reduction="none")
    w = weights[None] * valid
    loss = (ce * w).sum() / mx.maximum(w.sum(), 1e-6)
    correct = (mx.argmax(logits, -1) == labels) * valid
    accepted = mx.cumprod(correct, axis=1)
    return loss, (correct.sum(0), accepted.sum(0), valid.sum(0))


def accept_lengths(drafter, io, feats, block, labels, valid, anchors, rows) -> mx.array:
    """Per block: how many of its drafted tokens the target would accept (the run of correct
    slots from slot 1), the number the engine's verify step computes."""
    h = drafter_forward(drafter, io, feats, block, anchors, rows)
    correct = (mx.argmax(io.logits(h[:, 1:]), -1) == labels) * valid
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
    ids = _pad(ds, seqs, L + B, pad_id)
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


# ---------------------------------------------------------------------------------------------
# checkpoints


def save_checkpoint(out: Path, drafter: Drafter, opt, step: int, total: int, extra: dict) -> None:
    d = out / CKPT_DIR
    tmp = out / (CKPT_DIR + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(tmp / "weights.safetensors"), dict(tree_flatten(drafter.parameters())))
    mx.save_safetensors(str(tmp / "optimizer.safetensors"), dict(tree_flatten(opt.state)))
    (tmp / "config.json").write_text(json.dumps(drafter.args.to_config(), indent=2))
    (tmp / "state.json").write_text(json.dumps({"step": step, "total_steps": total, **extra}, indent=2))
    if d.exists():
        import shutil

        shutil.rmtree(d)
    tmp.replace(d)


def load_checkpoint(out: Path):
    """(drafter fp32, optimizer state tree, state dict) from OUT/checkpoint."""
    d = out / CKPT_DIR
    if not (d / "state.json").exists():
        raise ValueError(f"--resume: no checkpoint in {d}")
    drafter = Drafter(DrafterArgs.from_config(json.loads((d / "config.json").read_text())))
    drafter.load_weights(str(d / "weights.safetensors"))
    opt_state = tree_unflatten(list(mx.load(str(d / "optimizer.safetensors")).items()))
    return drafter, opt_state, json.loads((d / "state.json").read_text())


# ---------------------------------------------------------------------------------------------
# the training loop


class _Log:
    def __init__(self, path: Path):
        self.f = open(path, "a")

    def __call__(self, **rec):
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()


def _bar(total: int, desc: str, initial: int = 0):
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, initial=initial, dynamic_ncols=True, mininterval=2.0)
    except ImportError:
        return _Line(total, desc, initial)


class _Line:
    """tqdm's surface, printing one line now and then."""

    def __init__(self, total, desc, initial=0):
        self.n, self.total, self.desc, self.post, self.t = initial, total, desc, "", 0.0

    def update(self, k=1):
        self.n += k
        if time.perf_counter() - self.t > 10 or self.n == self.total:
            self.t = time.perf_counter()
            print(f"{self.desc}: {self.n}/{self.total} {self.post}", flush=True)

    def set_postfix_str(self, s, refresh=False):
        self.post = s

    def close(self):
        pass


class _Silent(_Line):
    """The bar of a process other than rank 0."""

    def __init__(self):
        super().__init__(0, "")

    def update(self, k=1):
        pass


def _split(ds: Dataset, val_frac: float, seed: int,
           groups: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Train / validation sequence indices. Sequences of one group (several answers to one prompt)
    fall on the same side, so validation never sees a prompt that training saw."""
    ok = np.flatnonzero(ds.lengths - ds.prompt_lens >= 2)
    g = ok if groups is None else np.asarray(groups)[ok]
    perm = np.random.default_rng(seed).permutation(np.unique(g))
    n_val = int(round(len(perm) * val_frac)) if len(perm) > 1 else 0
    val = np.isin(g, perm[:n_val])
    return ok[~val], ok[val]


def lr_at(cfg: TrainConfig, step: int, total: int) -> float:
    """Linear warm-up over `warmup` of the steps, then cosine decay to lr * min_lr_ratio."""
    if total <= 0:  # still timing the first steps
        return cfg.lr * 0.01
    warm = max(1, int(cfg.warmup * total))
    if step < warm:
        return cfg.lr * (0.01 + 0.99 * step / warm)
    t = min(1.0, (step - warm) / max(1, total - warm))
    lo = cfg.lr * cfg.min_lr_ratio
    return lo + (cfg.lr - lo) * 0.5 * (1 + math.cos(math.pi * t))


class Features:
    """The target's tapped features of sequences, computed per batch or (cache=True) once for the
    whole data set and kept on the device in float16 (the dtype the engine's drafter reads), in
    parts of S sequences: one array of n x L x F would need twice its size while concatenating."""

    def __init__(self, target, ds: Dataset, L: int, S: int, pad_id: int, cache: bool, progress):
        self.target, self.parts, self.S = target, None, S
        if cache:
            n, self.parts, bar = len(ds), [], _bar(len(ds), "features")
            progress(f"caching features: {n} x {L} x {len(target.tap_ids) * target.hidden_size} "
                     f"float16 = {n * L * len(target.tap_ids) * target.hidden_size * 2 / 2**30:.1f} GiB")
            for s in range(0, n, S):
                idx = np.arange(s, s + S) % n  # fixed shape: the last batch wraps around
                self.parts.append(target_features(target, mx.array(_pad(ds, idx, L, pad_id)))
                                  [: min(S, n - s)].astype(mx.float16))
                mx.eval(self.parts[-1])
                bar.update(min(S, n - s))
            bar.close()

    def __call__(self, seqs: np.ndarray, ids: np.ndarray) -> mx.array:
        if self.parts is not None:
            return mx.stack([self.parts[i // self.S][i % self.S] for i in seqs.tolist()])
        return target_features(self.target, mx.array(ids))


def _pad(ds: Dataset, seqs, L: int, pad_id: int) -> np.ndarray:
    ids = np.full((len(seqs), L), pad_id, dtype=np.int32)
    for r, i in enumerate(seqs):
        s = ds.seq(i)[:L]
        ids[r, : len(s)] = s
    return ids


def _start(target, tokenizer, cfg: TrainConfig, resume: bool, progress):
    """(fp32 drafter, AdamW, step, total steps, seconds trained) - fresh or from the checkpoint."""
    opt = optim.AdamW(learning_rate=cfg.lr, betas=[0.9, 0.95], weight_decay=cfg.weight_decay)
    if resume:
        drafter, opt_state, meta = load_checkpoint(Path(cfg.out))
        step, total, t_train = meta["step"], meta["total_steps"], meta.get("train_seconds", 0.0)
        if cfg.steps and cfg.steps != total:
            progress(f"--steps {cfg.steps}: the schedule now ends at step {cfg.steps}, not {total}")
            total = cfg.steps
        opt.state = opt_state
        progress(f"resumed at step {step}/{total or '?'}")
    elif cfg.init not in ("target", "random"):  # a drafter directory: its architecture and weights
        from .drafter import load_drafter
        from .load import check_pair

        drafter = load_drafter(cfg.init, dtype=mx.float32)
        drafter.vocab = None  # --draft-vocab decides the new one
        check_pair(target, drafter)
        progress(f"drafter initialised from {cfg.init} (its config: layers, taps, block, mask id)")
        step, total, t_train = 0, cfg.steps, 0.0
    else:
        mx.random.seed(cfg.seed)
        drafter = Drafter(drafter_args_for(target, tokenizer, cfg))
        drafter.set_dtype(mx.float32)
        if cfg.init == "target":
            src = init_from_target(drafter, target)
            progress(f"drafter layers initialised from target layers {src}")
        drafter.norm.weight = target.backbone.norm.weight.astype(mx.float32)
        step, total, t_train = 0, cfg.steps, 0.0
    opt.init(drafter.trainable_parameters())
    return drafter, opt, step, total, t_train


def _step_functions(master: Drafter, opt, io: FrozenIO, cfg: TrainConfig, dtype, world=None):
    """(step, evaluate, accept, state): one AdamW step on fp32 master weights, with the forward and
    backward passes run by a copy of the drafter in `dtype` when that is not float32. With a
    `world` group of W > 1 processes each computes its own batch's gradients and all apply their
    average (the logged loss and sums too), so the replicas stay equal."""
    W = world.size() if world is not None else 1
    work = master
    if dtype != mx.float32:
        work = Drafter(master.args)
        work.update(tree_map(lambda p: p.astype(dtype), master.parameters()))
    weights = position_weights(master.block_size, cfg.gamma)

    def loss_of(model, *batch):
        return block_loss(model, io, *batch, weights=weights)

    loss_and_grad = nn.value_and_grad(work, loss_of)
    state = [master.state, opt.state] + ([work.state] if work is not master else [])

    def step_fn(*batch):
        (loss, aux), grads = loss_and_grad(work, *batch)
        grads = tree_map(lambda g: g.astype(mx.float32), grads)
        if W > 1:
            grads = average_gradients(grads, world)
            loss = mx.distributed.all_sum(loss, group=world) / W
            aux = tuple(mx.distributed.all_sum(a, group=world) for a in aux)
        grads, gnorm = optim.clip_grad_norm(grads, cfg.clip)
        opt.update(master, grads)
        if work is not master:
            work.update(tree_map(lambda p: p.astype(dtype), master.parameters()))
        return loss, aux, gnorm

    def eval_fn(*batch):
        return loss_of(work, *batch)

    def accept_fn(*batch):
        return accept_lengths(work, io, *batch)

    if cfg.compile:
        return (mx.compile(step_fn, inputs=state, outputs=state),
                mx.compile(eval_fn, inputs=state), mx.compile(accept_fn, inputs=state), state)
    return step_fn, eval_fn, accept_fn, state


def rank_batch(train_ids: np.ndarray, step: int, S: int, seed: int, W: int = 1,
               rank: int = 0) -> np.ndarray:
    """The S training sequences of process `rank` (of W) at `step`: each epoch is one seeded
    permutation cut into consecutive batches, W per step, so the processes never share one."""
    per_epoch = max(1, len(train_ids) // (S * W))
    e, k = divmod(step, per_epoch)
    j = k * W + rank
    return np.random.default_rng([seed, e]).permutation(train_ids)[j * S : (j + 1) * S]


def _world(backend: str):
    """The data-parallel group of this process (None: it trains alone)."""
    if not backend:
        return None
    world = mx.distributed.init(strict=True, backend=backend)
    return world if world.size() > 1 else None


def _from_rank0(world, x) -> int:
    """Rank 0's integer `x` on every process: decisions taken from timings (when to stop, how
    many steps) must be the same everywhere or the gradient all-reduce would wait forever."""
    if world is None:
        return int(x)
    return _sum_over(world, int(x) if world.rank() == 0 else 0)


def _check_replicas(world, drafter: Drafter) -> None:
    """Every process must hold the same weights (same averaged gradients, same updates): each
    compares its per-array sums with rank 0's (sent as a sum with zeros, which is exact)."""
    sums = mx.stack([p.astype(mx.float32).sum() for _, p in tree_flatten(drafter.parameters())])
    rank0 = mx.distributed.all_sum(sums if world.rank() == 0 else mx.zeros_like(sums), group=world)
    if _sum_over(world, int(not mx.array_equal(sums, rank0).item())):
        raise RuntimeError("data-parallel replicas diverged: their weights differ")


def _sum_over(world, x: int) -> int:
    return int(mx.distributed.all_sum(mx.array(x), group=world).item())


def train(target, tokenizer, ds: Dataset, cfg: TrainConfig, resume: bool = False,
          progress: Callable[[str], None] = print, groups: Optional[np.ndarray] = None) -> Drafter:
    """Train (or continue training) a drafter for `target` on `ds`; returns it (float32).
    `groups` (one id per sequence, e.g. its prompt) keeps each group on one side of the split.

    Writes OUT/checkpoint/ every `save_every` steps and at the end, OUT/train_log.jsonl, and the
    drafter (config.json + model.safetensors in `save_dtype`) in OUT. With `cfg.distributed`, one
    process per device trains data-parallel (`--distributed` in the CLI says how to launch it);
    rank 0 validates, logs and writes.
    """
    t_start = time.perf_counter()
    world = _world(cfg.distributed)
    W, rank = (world.size(), world.rank()) if world else (1, 0)
    if rank:
        progress = lambda s: None
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    drafter, opt, step, total, t_train = _start(target, tokenizer, cfg, resume, progress)
    args = drafter.args
    if cfg.draft_vocab:
        drafter.vocab = DraftVocab(draft_vocab_from(ds, cfg.draft_vocab))
    target.tap_ids = list(args.target_layer_ids)
    B = args.block_size
    train_ids, val_ids = _split(ds, cfg.val_frac, cfg.seed, groups)
    L = int(min(cfg.seq_len, -(-int(ds.lengths.max()) // 64) * 64))
    S = min(cfg.batch_seqs, len(train_ids))
    if len(train_ids) < S * W:
        raise ValueError(f"{len(train_ids)} training sequences cannot fill {W} batches of {S}")
    pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
    n_params = sum(v.size for _, v in tree_flatten(drafter.parameters()))
    progress(f"drafter: {args.num_hidden_layers} layers, {n_params / 1e6:.1f}M params, taps "
             f"{args.target_layer_ids}, mask id {args.mask_token_id}, block {B}; data: "
             f"{len(train_ids)} train / {len(val_ids)} val sequences, "
             f"{int(ds.lengths.sum() - ds.prompt_lens.sum())} response tokens; step: {S} sequences "
             f"x {cfg.anchors} blocks{f' on each of {W} processes' if W > 1 else ''}, seq_len {L}, "
             f"{cfg.dtype}")

    dtype = SAVE_DTYPES[cfg.dtype]
    io = FrozenIO(target, dtype)
    step_fn, eval_fn, accept_fn, state = _step_functions(drafter, opt, io, cfg, dtype, world)
    features = Features(target, ds, L, S, pad_id, cfg.cache_features, progress)

    def batch_for(seqs, rng):
        b = sample_blocks(ds, seqs, rng, L, B, cfg.anchors, args.mask_token_id, pad_id)
        return [features(seqs, b["ids"])] + [mx.array(b[k]) for k in BLOCK_KEYS]

    val_batches = [val_ids[s : s + S] for s in range(0, len(val_ids) - S + 1, S)][:4]

    def validate():
        rng, tot, losses = np.random.default_rng(cfg.seed + 1), np.zeros((3, B - 1)), []
        for seqs in val_batches:
            loss, aux = eval_fn(*batch_for(seqs, rng))
            losses.append(loss.item())
            tot += np.array([a.tolist() for a in aux])
        accepted = {}
        for seqs in val_batches[:2]:
            feats = features(seqs, _pad(ds, seqs, L, pad_id))  # once for all of its anchors' chunks
            for keys, b in every_anchor(ds, seqs, L, B, S * cfg.anchors, args.mask_token_id, pad_id):
                n = accept_fn(feats, *[mx.array(b[k]) for k in BLOCK_KEYS])
                accepted.update(zip(keys, n.tolist()))
        walked = [i for seqs in val_batches[:2] for i in seqs]
        return dict(_metrics(float(np.mean(losses)), tot), tau_walk=walk_tau(ds, walked, accepted, L))

    log = _Log(out / LOG_FILE) if rank == 0 else (lambda **rec: None)
    run_info = {"data": ds.meta, "config": asdict(cfg), "processes": W}

    def save():
        if rank:
            return
        save_checkpoint(out, drafter, opt, step, total, dict(run_info, train_seconds=t_train))
        save_drafter(drafter, out, dtype=SAVE_DTYPES[cfg.save_dtype])

    bar = _bar(total, "training", initial=step) if rank == 0 else _Silent()
    sums, loss_sum, n_sum, timing = np.zeros((3, B - 1)), 0.0, 0, []
    stopped, first = False, step
    while total == 0 or step < total:
        if _from_rank0(world, bool(cfg.time_limit and time.perf_counter() - t_start > cfg.time_limit)
                       or bool(cfg.stop_after and step - first >= cfg.stop_after)):
            stopped = True
            break
        seqs = rank_batch(train_ids, step, S, cfg.seed, W, rank)
        t0 = time.perf_counter()
        opt.learning_rate = lr_at(cfg, step, total)
        rng = np.random.default_rng([cfg.seed, 1, step] + ([rank] if W > 1 else []))
        loss, aux, gnorm = step_fn(*batch_for(seqs, rng))
        mx.eval(loss, aux, gnorm, state)
        dt = time.perf_counter() - t0
        t_train += dt
        step += 1
        loss_sum += loss.item()
        sums += np.array([a.tolist() for a in aux])
        n_sum += 1
        bar.update(1)
        if total == 0:
            timing.append(dt)
            if len(timing) == 13:  # the first steps compile; time the next ten
                per_step = float(np.median(timing[3:]))
                if cfg.train_seconds > 0:
                    total = max(step + 1, int(cfg.train_seconds / per_step))
                elif cfg.time_limit:  # up to the limit, less time for validations and saves
                    left = cfg.time_limit - (time.perf_counter() - t_start) - 20
                    total = step + max(1, int(left / per_step / 1.03))
                else:
                    raise ValueError("--steps 0 needs --train-seconds > 0 or a --time-limit")
                total = _from_rank0(world, total)  # one schedule for every process
                progress(f"\n{per_step * 1e3:.0f} ms/step -> {total} steps")
                bar.total = total
        if step % cfg.log_every == 0 or step == total:
            m = _metrics(loss_sum / n_sum, sums)
            lr = opt.learning_rate.item()
            bar.set_postfix_str(f"loss {m['loss']:.3f} tau~{m['tau_est']:.2f} lr {lr:.1e}", refresh=False)
            log(step=step, lr=lr, grad_norm=gnorm.item(), sec_per_step=dt, elapsed=t_train, **m)
            sums, loss_sum, n_sum = np.zeros((3, B - 1)), 0.0, 0
        if step % cfg.save_every == 0 or step == total:
            if val_batches and rank == 0:
                v = validate()
                log(step=step, split="val", **v)
                progress(f"\nstep {step}: val loss {v['loss']:.3f} tau~{v['tau_est']:.2f} "
                         f"tau(walk) {v['tau_walk']:.2f} "
                         f"acc {' '.join(f'{x:.2f}' for x in v['acc'])}")
            save()
    bar.close()
    if world:
        _check_replicas(world, drafter)
    save()
    progress(f"{'stopped' if stopped else 'done'} at step {step}/{total}; "
             f"{t_train:.0f}s of training steps; drafter written to {out}")
    return drafter


def _metrics(loss: float, sums: np.ndarray) -> dict:
    correct, accepted, valid = sums
    n = np.maximum(valid, 1)
    return {"loss": float(loss), "acc": (correct / n).round(4).tolist(),
            "accept": (accepted / n).round(4).tolist(),
            "tau_est": float(1 + (accepted / max(valid[0], 1)).sum())}


# ---------------------------------------------------------------------------------------------
# held-out evaluation through the real engine


def evaluate(pair, prompts: list[tuple[str, str]], max_tokens: int,
             progress: Callable[[str], None] = print) -> dict:
    """Greedy DFlash vs target-only on each prompt: tau per category (committed tokens / verify
    cycles, pooled over the category's prompts), identity of the outputs, and the drafter's cost
    per cycle relative to one target decode step."""
    from .config import GenerationConfig
    from .engine import stream
    from .load import encode_prompt

    rows = []
    bar = _bar(len(prompts), "evaluating")
    for cat, text in prompts:
        ids = encode_prompt(pair.tokenizer, text)
        res = {}
        for mode in ("dflash", "target"):
            cfg = GenerationConfig(mode=mode, max_tokens=max_tokens,  # tau of the drafter's whole block
                                   block_size=pair.drafter.block_size if mode == "dflash" else None)
            *_, summary = stream(pair, ids, cfg)
            res[mode] = summary
        d, t = res["dflash"], res["target"]
        rows.append({"category": cat, "cycles": d.cycles, "accepted": sum(d.acceptance_lengths),
                     "tokens": d.tokens, "identical": d.token_ids == t.token_ids,
                     "draft_s": d.draft_s, "verify_s": d.verify_s, "target_cycles": t.cycles,
                     "target_step_s": t.verify_s, "lengths": list(d.acceptance_lengths)})
        bar.update(1)
        bar.set_postfix_str(f"tau {d.tau:.2f}", refresh=False)
    bar.close()

    def pool(rs):
        cyc = sum(r["cycles"] for r in rs)
        acc = sum(r["accepted"] for r in rs)
        lengths = [a for r in rs for a in r["lengths"]]
        B = pair.drafter.block_size
        return {"prompts": len(rs), "cycles": cyc, "tokens": sum(r["tokens"] for r in rs),
                "tau": 1 + acc / cyc if cyc else 0.0,
                "mean_prompt_tau": float(np.mean([1 + r["accepted"] / r["cycles"]
                                                  for r in rs if r["cycles"]] or [0.0])),
                "per_position": [round(sum(a > i for a in lengths) / max(len(lengths), 1), 4)
                                 for i in range(B - 1)],
                "identical": sum(r["identical"] for r in rs)}

    cats = sorted({r["category"] for r in rows})
    draft_per_cycle = sum(r["draft_s"] for r in rows) / max(sum(r["cycles"] for r in rows), 1)
    verify_per_cycle = sum(r["verify_s"] for r in rows) / max(sum(r["cycles"] for r in rows), 1)
    step = sum(r["target_step_s"] for r in rows) / max(sum(r["target_cycles"] for r in rows), 1)
    return {"max_tokens": max_tokens, "block_size": pair.drafter.block_size,
            "overall": pool(rows), "categories": {c: pool([r for r in rows if r["category"] == c])
                                                  for c in cats},
            "draft_s_per_cycle": draft_per_cycle, "verify_s_per_cycle": verify_per_cycle,
            "target_step_s": step, "draft_cost_vs_target_step": draft_per_cycle / step if step else None,
            "verify_cost_vs_target_step": verify_per_cycle / step if step else None}


def format_eval(res: dict) -> str:
    lines = [f"{'category':<14}{'prompts':>8}{'cycles':>8}{'tokens':>8}{'tau':>7}{'identical':>11}"]
    for name, p in list(res["categories"].items()) + [("overall", res["overall"])]:
        lines.append(f"{name:<14}{p['prompts']:>8}{p['cycles']:>8}{p['tokens']:>8}{p['tau']:>7.2f}"
                     f"{p['identical']:>8}/{p['prompts']}")
    if res["draft_cost_vs_target_step"] is not None:
        lines.append(f"draft pass {res['draft_s_per_cycle'] * 1e3:.1f} ms, verify "
                     f"{res['verify_s_per_cycle'] * 1e3:.1f} ms, target step "
                     f"{res['target_step_s'] * 1e3:.1f} ms: draft = "
                     f"{res['draft_cost_vs_target_step']:.2f} target steps")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# command line


def build_parser() -> argparse.ArgumentParser:
    c = TrainConfig(out="")
    p = argparse.ArgumentParser(
        prog="python -m dflash train",
        description="Train a DFlash drafter for an mlx-lm target by self-distillation, or (--eval) "
                    "measure a drafter's held-out tau through the engine.")
    p.add_argument("--target", default=None,
                   help="target model: directory, Hub id or builtin:smollm2-135m-instruct (default)")
    p.add_argument("--out", required=True, help="run directory: data, checkpoint, log, drafter")
    p.add_argument("--prompts", nargs="+", default=[str(DEFAULT_PROMPTS)],
                   help="training prompt files (JSONL); each gets its own token file")
    p.add_argument("--data", nargs="+", default=None,
                   help=f"token files, one per prompt file (default OUT/{DATA_FILE}, or "
                        "OUT/data-<prompt file>.npz for several); a complete one is reused, a "
                        "partial one resumed; training reads them all")
    p.add_argument("--generate-only", action="store_true", help="stop after writing the data")
    p.add_argument("--write-follow-ups", metavar="FILE", default=None,
                   help="after generating, write a prompt file of second user turns after every "
                        "answer that ended on its own (pass it as another --prompts next time)")
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=c.max_new_tokens)
    p.add_argument("--gen-batch", type=int, default=c.gen_batch, help="sequences generated at once")
    p.add_argument("--target-dtype", choices=TARGET_DTYPES, default="auto",
                   help="the target's dtype for data and features (load.py; auto: as the engine)")
    p.add_argument("--gen-time-limit", type=float, default=None,
                   help="stop generating after this many seconds and train on what is there "
                        "(0: no more generation)")
    p.add_argument("--opening", type=int, default=0, metavar="N",
                   help="answers open with 1..N sampled tokens, then go on greedy: more greedy data "
                        "from the same prompts (the opening counts as prompt: never a label)")
    p.add_argument("--opening-temp", type=float, default=1.0, help="temperature of the opening")
    p.add_argument("--opening-seed", type=int, default=1,
                   help="seed of the openings (another seed: another token file of the same prompts)")
    g = p.add_argument_group("drafter")
    g.add_argument("--layers", type=int, default=c.layers)
    g.add_argument("--intermediate-size", type=int, default=None, help="default: the target's")
    g.add_argument("--num-taps", type=int, default=c.num_taps)
    g.add_argument("--taps", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="comma-separated target layer ids (default: spread evenly)")
    g.add_argument("--block-size", type=int, default=c.block_size)
    g.add_argument("--mask-token-id", type=int, default=None, help="default: an unused special token")
    g.add_argument("--init", default=c.init, metavar="{random,target,DIR}",
                   help="random weights, the target's last layers, or a drafter directory to "
                        "continue from (its architecture wins over the flags above)")
    g.add_argument("--draft-vocab", type=int, default=c.draft_vocab, metavar="N",
                   help="ship the N most frequent answer tokens as the draft vocabulary "
                        "(a cheaper draft head; 0: the whole vocabulary)")
    t = p.add_argument_group("training")
    t.add_argument("--steps", type=int, default=c.steps, help="0: as many as fit in --train-seconds")
    t.add_argument("--train-seconds", type=float, default=c.train_seconds,
                   help="with --steps 0: the step count that fits this long (<= 0: up to --time-limit)")
    t.add_argument("--time-limit", type=float, default=None,
                   help="save and stop this many seconds after the command started")
    t.add_argument("--stop-after", type=int, default=None, help="save and stop after this many steps")
    t.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint (its schedule, unless --steps is given)")
    t.add_argument("--seq-len", type=int, default=c.seq_len)
    t.add_argument("--batch-seqs", type=int, default=c.batch_seqs, help="sequences per step")
    t.add_argument("--anchors", type=int, default=c.anchors, help="blocks per sequence per step")
    t.add_argument("--lr", type=float, default=c.lr)
    t.add_argument("--min-lr-ratio", type=float, default=c.min_lr_ratio)
    t.add_argument("--warmup", type=float, default=c.warmup, help="fraction of the steps")
    t.add_argument("--weight-decay", type=float, default=c.weight_decay)
    t.add_argument("--clip", type=float, default=c.clip)
    t.add_argument("--gamma", type=float, default=c.gamma, help="slot k weighs exp(-(k-1)/gamma)")
    t.add_argument("--val-frac", type=float, default=c.val_frac)
    t.add_argument("--seed", type=int, default=c.seed)
    t.add_argument("--save-every", type=int, default=c.save_every)
    t.add_argument("--log-every", type=int, default=c.log_every)
    t.add_argument("--save-dtype", choices=tuple(SAVE_DTYPES), default=c.save_dtype)
    t.add_argument("--dtype", choices=tuple(SAVE_DTYPES), default=c.dtype,
                   help="forward/backward dtype (master weights and optimizer stay float32)")
    t.add_argument("--cache-features", action="store_true",
                   help="compute the target's features once for all data and keep them on the device")
    t.add_argument("--no-compile", dest="compile", action="store_false")
    t.add_argument("--distributed", default="", metavar="BACKEND",
                   help="data-parallel over an mx.distributed group (nccl on CUDA GPUs, ring, mpi): "
                        "one process per device, each a batch of --batch-seqs, gradients averaged; "
                        "e.g. `mlx.launch --backend nccl -n 2 -m dflash.train ... --distributed nccl`")
    e = p.add_argument_group("evaluation")
    e.add_argument("--eval", nargs="?", const=str(DEFAULT_EVAL_PROMPTS), default=None, metavar="PROMPTS",
                   help="evaluate the drafter in OUT (or --draft) on PROMPTS instead of training")
    e.add_argument("--draft", default=None, help="drafter to evaluate (default OUT)")
    e.add_argument("--eval-max-tokens", type=int, default=128)
    e.add_argument("--eval-limit", type=int, default=None, help="prompts per category")
    return p


def _run_eval(args, say) -> int:
    from .load import load_pair

    pair = load_pair(args.target, args.draft or args.out, progress=say)
    prompts, per_cat = [], {}
    for cat, text in read_prompts(args.eval):
        per_cat[cat] = per_cat.get(cat, 0) + 1
        if not args.eval_limit or per_cat[cat] <= args.eval_limit:
            prompts.append((cat, text))
    for prompt_file in filter(lambda f: Path(f).exists(), args.prompts):
        overlap = {p for _, p in prompts} & {p for _, p in read_prompts(prompt_file)}
        if overlap:
            say(f"warning: {len(overlap)} eval prompts also occur in {prompt_file}")
    res = evaluate(pair, prompts, args.eval_max_tokens, progress=say)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "eval.json").write_text(json.dumps(res, indent=2) + "\n")
    print(format_eval(res))
    return 0


def _data_paths(args) -> list[Path]:
    if args.data:
        if len(args.data) != len(args.prompts):
            raise SystemExit(f"--data: {len(args.data)} token files for {len(args.prompts)} prompt files")
        return [Path(d) for d in args.data]
    if len(args.prompts) == 1:
        return [Path(args.out) / DATA_FILE]
    return [Path(args.out) / f"data-{Path(p).stem}.npz" for p in args.prompts]


def main(argv: Optional[list[str]] = None) -> int:
    t_main = time.perf_counter()
    args = build_parser().parse_args(argv)
    say = lambda s: print(s, file=sys.stderr, flush=True)
    if args.eval is not None:
        return _run_eval(args, say)

    from .load import load_target
    from .registry import BUILTIN_TARGET
    from .target import Target

    lm, tokenizer, model_type = load_target(args.target or BUILTIN_TARGET, progress=say,
                                            dtype=args.target_dtype)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    def prompts_of(prompt_file):  # the order generation uses (and prompt_index refers to)
        prompts = read_prompts(prompt_file)
        order = np.random.default_rng(args.seed).permutation(len(prompts))  # mixes categories
        return [prompts[i] for i in order][: args.max_prompts]

    parts, follow, groups, files, t0 = [], [], [], {}, time.perf_counter()
    for prompt_file, data in zip(args.prompts, _data_paths(args)):
        ds, prompts = (Dataset.load(data) if data.exists() else None), None
        if ds is None or not (ds.meta.get("complete") or args.resume):
            prompts = prompts_of(prompt_file)
            limit = args.gen_time_limit
            t1 = time.perf_counter()
            ds = generate_data(lm, tokenizer, prompts, data, args.max_new_tokens, args.gen_batch,
                               time_limit=None if limit is None else max(0.0, limit - (t1 - t0)),
                               progress=say, opening=args.opening,
                               temperature=args.opening_temp, seed=args.opening_seed)
            say(f"data: {len(ds)} answers, {int(ds.lengths.sum() - ds.prompt_lens.sum())} response "
                f"tokens in {time.perf_counter() - t1:.0f}s -> {data}")
        parts.append(ds)
        # a prompt answered in several token files (e.g. with --opening) is one validation group
        file_id = files.setdefault(str(Path(prompt_file).resolve()), len(files))
        groups.append(file_id * 2**32 + ds.prompt_index.astype(np.int64))
        if args.write_follow_ups:
            follow.extend(follow_ups(ds, prompts or prompts_of(prompt_file), tokenizer, args.seed))
    if args.write_follow_ups:
        with open(args.write_follow_ups, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in follow)
        say(f"{len(follow)} follow-up conversations -> {args.write_follow_ups}")
    ds = Dataset.concat(parts)
    if args.generate_only:
        return 0
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    if cfg.time_limit:  # the limit counts from the command's start
        cfg.time_limit -= time.perf_counter() - t_main
    train(Target(lm, model_type, []), tokenizer, ds, cfg, resume=args.resume, progress=say,
          groups=np.concatenate(groups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
