"""The training loop: checkpoints, the split, the schedule, the (optionally data-parallel) step,
validation and logging."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.nn.utils import average_gradients
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from ..drafter import Drafter, DrafterArgs, DraftVocab, save_drafter
from .blocks import (BLOCK_KEYS, FrozenIO, accept_lengths, block_loss, every_anchor, pad_ids,
                     position_weights, sample_blocks, walk_tau)
from .config import SAVE_DTYPES, TrainConfig
from .data import Dataset
from .model import draft_vocab_from, drafter_args_for, init_from_target, target_features
from .parallel import check_replicas, from_rank0, rank_batch, world_group
from .progress import SilentBar, progress_bar

CKPT_DIR = "checkpoint"
LOG_FILE = "train_log.jsonl"


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




class _Log:
    def __init__(self, path: Path):
        self.f = open(path, "a")

    def __call__(self, **rec):
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()


def _split(ds: Dataset, val_frac: float, seed: int, groups: Optional[np.ndarray] = None,
           val_only: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Train / validation sequence indices. Sequences of one group (several answers to one prompt)
    fall on the same side, so validation never sees a prompt that training saw. `val_only` (one
    bool per sequence, some True): exactly those validate, the rest train."""
    ok = np.flatnonzero(ds.lengths - ds.prompt_lens >= 2)
    if val_only is not None and np.any(val_only):
        held = np.asarray(val_only, dtype=bool)[ok]
        return ok[~held], ok[held]
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
            n, self.parts, bar = len(ds), [], progress_bar(len(ds), "features")
            progress(f"caching features: {n} x {L} x {len(target.tap_ids) * target.hidden_size} "
                     f"float16 = {n * L * len(target.tap_ids) * target.hidden_size * 2 / 2**30:.1f} GiB")
            for s in range(0, n, S):
                idx = np.arange(s, s + S) % n  # fixed shape: the last batch wraps around
                self.parts.append(target_features(target, mx.array(pad_ids(ds, idx, L, pad_id)))
                                  [: min(S, n - s)].astype(mx.float16))
                mx.eval(self.parts[-1])
                bar.update(min(S, n - s))
            bar.close()

    def __call__(self, seqs: np.ndarray, ids: np.ndarray):
        if self.parts is not None:
            return mx.stack([self.parts[i // self.S][i % self.S] for i in seqs.tolist()])
        return target_features(self.target, mx.array(ids))


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
        from ..drafter import load_drafter
        from ..load import check_pair

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

    def loss_of(model, *batch, p=0.0):  # batch: features, then the BLOCK_KEYS arrays
        return block_loss(model, io, *batch, weights=weights, p=p)

    loss_and_grad = nn.value_and_grad(work, lambda model, *batch: loss_of(model, *batch, p=cfg.dropout))
    # the random state too: a compiled step must draw new dropout masks each call
    state = [master.state, opt.state, mx.random.state] + ([work.state] if work is not master else [])

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


def train(target, tokenizer, ds: Dataset, cfg: TrainConfig, resume: bool = False,
          progress: Callable[[str], None] = print, groups: Optional[np.ndarray] = None,
          val_only: Optional[np.ndarray] = None) -> Drafter:
    """Train (or continue training) a drafter for `target` on `ds`; returns it (float32).
    `groups` (one id per sequence, e.g. its prompt) keeps each group on one side of the split;
    `val_only` (one bool per sequence) names the validation sequences instead.

    Writes OUT/checkpoint/ every `save_every` steps and at the end, OUT/train_log.jsonl, and the
    drafter (config.json + model.safetensors in `save_dtype`) in OUT. With `cfg.distributed`, one
    process per device trains data-parallel (`--distributed` in the CLI says how to launch it);
    rank 0 validates, logs and writes.
    """
    t_start = time.perf_counter()
    world = world_group(cfg.distributed)
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
    train_ids, val_ids = _split(ds, cfg.val_frac, cfg.seed, groups, val_only)
    L = int(min(cfg.seq_len, -(-int(ds.lengths.max()) // 64) * 64))
    S = min(cfg.batch_seqs, len(train_ids))
    if len(train_ids) < S * W:
        raise ValueError(f"{len(train_ids)} training sequences cannot fill {W} batches of {S}")
    pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
    n_params = sum(v.size for _, v in tree_flatten(drafter.parameters()))
    loss_desc = "CE" + (f", dropout {cfg.dropout:g}" if cfg.dropout else "")
    progress(f"drafter: {args.num_hidden_layers} layers, {n_params / 1e6:.1f}M params, taps "
             f"{args.target_layer_ids}, mask id {args.mask_token_id}, block {B}; data: "
             f"{len(train_ids)} train / {len(val_ids)} val sequences, "
             f"{int(ds.lengths.sum() - ds.prompt_lens.sum())} response tokens; step: {S} sequences "
             f"x {cfg.anchors} blocks{f' on each of {W} processes' if W > 1 else ''}, seq_len {L}, "
             f"{cfg.dtype}, loss {loss_desc}")

    dtype = SAVE_DTYPES[cfg.dtype]
    io = FrozenIO(target, dtype)
    step_fn, eval_fn, accept_fn, state = _step_functions(drafter, opt, io, cfg, dtype, world)
    features = Features(target, ds, L, S, pad_id, cfg.cache_features, progress)

    def batch_for(seqs, rng):  # features, then the BLOCK_KEYS arrays
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
            feats = features(seqs, pad_ids(ds, seqs, L, pad_id))  # once for all of its anchors' chunks
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

    bar = progress_bar(total, "training", initial=step) if rank == 0 else SilentBar()
    sums, loss_sum, n_sum, timing = np.zeros((3, B - 1)), 0.0, 0, []
    stopped, first = False, step
    while total == 0 or step < total:
        if from_rank0(world, bool(cfg.time_limit and time.perf_counter() - t_start > cfg.time_limit)
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
                total = from_rank0(world, total)  # one schedule for every process
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
        check_replicas(world, drafter)
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
