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
from .markov import balance, freeze_base, sibling_metrics, sibling_sums, with_head
from .model import (draft_vocab_from, drafter_args_for, grow, init_from_target, set_window,
                    target_features)
from .parallel import check_replicas, from_rank0, rank_batch, world_group
from .progress import SilentBar, progress_bar

CKPT_DIR = "checkpoint"
LOG_FILE = "train_log.jsonl"
# a batch is padded to its longest sequence rounded up to this, not to the data set's longest:
# short answers in a long-context mix then cost their own length (a few compiled shapes)
LENGTH_BUCKET = 512


def save_checkpoint(out: Path, drafter: Drafter, opt, step: int, total: int, extra: dict) -> None:
    d = out / CKPT_DIR
    tmp = out / (CKPT_DIR + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(tmp / "weights.safetensors"), dict(tree_flatten(drafter.parameters())))
    mx.save_safetensors(str(tmp / "optimizer.safetensors"), dict(tree_flatten(opt.state)))
    (tmp / "config.json").write_text(json.dumps(drafter.args.to_config(), indent=2))
    if drafter.vocab is not None:  # a Markov head's rows are this vocabulary
        drafter.vocab.save(tmp)
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
    args = DrafterArgs.from_config(json.loads((d / "config.json").read_text()))
    vocab = DraftVocab.load(d, args.vocab_size)
    drafter = Drafter(args, head_rows=vocab and len(vocab.ids))
    drafter.load_weights(str(d / "weights.safetensors"))
    drafter.vocab = vocab
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
        if drafter.has_markov and not cfg.markov_rank:
            raise ValueError(f"{cfg.init} has a Markov head: train it on with --markov-rank "
                             f"{drafter.args.markov_rank} (--markov-joint: the base too)")
        if not cfg.markov_rank:  # --draft-vocab decides the new one (a head keeps the drafter's)
            drafter.vocab = None
        elif drafter.has_markov:  # a head trained on: the same bias, factors Adam can step alike
            balance(drafter.markov)
        check_pair(target, drafter)
        progress(f"drafter initialised from {cfg.init} (its config: layers, taps, block, mask id)")
        if cfg.grow:
            drafter = grow(drafter, cfg.grow)
            progress(f"grown by {cfg.grow} layers (identity until trained): {len(drafter.layers)} layers")
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
    if cfg.window is not None:
        drafter = set_window(drafter, cfg.window)
        progress(f"context window: {cfg.window or 'the whole context'}")
    if cfg.markov_rank:  # the head trains; the base only if joint
        if cfg.init in ("target", "random"):
            raise ValueError("--markov-rank trains the head of a trained drafter: give --init DIR")
        drafter = with_head(drafter, cfg.markov_rank, cfg.markov_joint)
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
        work = Drafter(master.args, head_rows=master.head_rows)
        work.update(tree_map(lambda p: p.astype(dtype), master.parameters()))
        work.vocab = master.vocab
        if cfg.markov_rank and not cfg.markov_joint:
            freeze_base(work)
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


class _Run:
    """One training run's state: the drafter, its optimizer and compiled steps, the split data,
    the log; `train` drives it step by step."""

    def __init__(self, target, tokenizer, ds: Dataset, cfg: TrainConfig, resume: bool, progress,
                 groups: Optional[np.ndarray], val_only: Optional[np.ndarray]):
        self.t_start, self.ds, self.cfg = time.perf_counter(), ds, cfg
        self.world = world_group(cfg.distributed)
        self.W, self.rank = (self.world.size(), self.world.rank()) if self.world else (1, 0)
        self.progress = (lambda s: None) if self.rank else progress
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.drafter, self.opt, self.step, self.total, self.t_train = _start(
            target, tokenizer, cfg, resume, self.progress)
        if cfg.draft_vocab:
            self.drafter.vocab = DraftVocab(draft_vocab_from(ds, cfg.draft_vocab))
        target.tap_ids = list(self.drafter.args.target_layer_ids)
        self.train_ids, val_ids = _split(ds, cfg.val_frac, cfg.seed, groups, val_only)
        self.lengths = ds.lengths  # by sequence id
        self.L = int(min(cfg.seq_len, -(-int(self.lengths.max()) // 64) * 64))
        self.S = S = min(cfg.batch_seqs, len(self.train_ids))
        if len(self.train_ids) < S * self.W:
            raise ValueError(f"{len(self.train_ids)} training sequences cannot fill {self.W} batches of {S}")
        self.pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
        self.progress(self._describe(len(val_ids)))
        dtype = SAVE_DTYPES[cfg.dtype]
        self.io = FrozenIO(target, dtype)
        self.step_fn, self.eval_fn, self.accept_fn, self.state = _step_functions(
            self.drafter, self.opt, self.io, cfg, dtype, self.world)
        self.features = Features(target, ds, self.L, S, self.pad_id, cfg.cache_features, self.progress)
        self.val_batches = [val_ids[s : s + S] for s in range(0, len(val_ids) - S + 1, S)][:4]
        self.log = _Log(self.out / LOG_FILE) if self.rank == 0 else (lambda **rec: None)
        self.run_info = {"data": ds.meta, "config": asdict(cfg), "processes": self.W}

    def _describe(self, n_val: int) -> str:
        a, cfg, ds = self.drafter.args, self.cfg, self.ds
        n_params = sum(v.size for _, v in tree_flatten(self.drafter.parameters()))
        loss = "CE" + (f", dropout {cfg.dropout:g}" if cfg.dropout else "") + (
            f", prefixes shown in {cfg.reveal:g} of the blocks" if cfg.reveal else "")
        procs = f" on each of {self.W} processes" if self.W > 1 else ""
        return (f"drafter: {a.num_hidden_layers} layers, {n_params / 1e6:.1f}M params, taps "
                f"{a.target_layer_ids}, mask id {a.mask_token_id}, block {a.block_size}; data: "
                f"{len(self.train_ids)} train / {n_val} val sequences, "
                f"{int(ds.lengths.sum() - ds.prompt_lens.sum())} response tokens; step: {self.S} "
                f"sequences x {cfg.anchors} blocks{procs}, seq_len {self.L}, {cfg.dtype}, loss {loss}")

    def batch(self, seqs, rng, reveal: float = 0.0) -> list:
        """Features, then the BLOCK_KEYS arrays, of random blocks in `seqs` (`reveal`:
        blocks.reveal_prefix; validation keeps the engine's all-MASK blocks)."""
        b = sample_blocks(self.ds, seqs, rng, self.length(seqs), self.drafter.block_size, self.cfg.anchors,
                          self.drafter.args.mask_token_id, self.pad_id, reveal)
        return [self.features(seqs, b["ids"])] + [mx.array(b[k]) for k in BLOCK_KEYS]

    def length(self, seqs) -> int:
        """The padded length of a batch of `seqs`: its longest rounded up to LENGTH_BUCKET, at most
        L (cached features are kept at L)."""
        if self.features.parts is not None:
            return self.L
        longest = int(self.lengths[np.asarray(seqs)].max())
        return min(self.L, -(-longest // LENGTH_BUCKET) * LENGTH_BUCKET)

    def validate(self) -> dict:
        """Loss, per-slot accuracy and tau~ on the validation batches (fixed anchors), and
        tau(walk): the engine's cycles replayed over every anchor of the first two."""
        ds, L, B, mask_id = self.ds, self.L, self.drafter.block_size, self.drafter.args.mask_token_id
        rng, tot, losses = np.random.default_rng(self.cfg.seed + 1), np.zeros((3, B - 1)), []
        sib = 0  # with a Markov head: how it does after a sibling (markov.sibling_sums)
        for seqs in self.val_batches:
            batch = self.batch(seqs, rng)
            loss, aux = self.eval_fn(*batch)
            losses.append(loss.item())
            tot += np.array([a.tolist() for a in aux])
            if self.drafter.has_markov:
                sib = sib + np.array(sibling_sums(self.drafter, self.io, *batch))
        accepted = {}
        for seqs in self.val_batches[:2]:
            feats = self.features(seqs, pad_ids(ds, seqs, L, self.pad_id))  # once for all chunks
            for keys, b in every_anchor(ds, seqs, L, B, self.S * self.cfg.anchors, mask_id, self.pad_id):
                n = self.accept_fn(feats, *[mx.array(b[k]) for k in BLOCK_KEYS])
                accepted.update(zip(keys, n.tolist()))
        walked = [i for seqs in self.val_batches[:2] for i in seqs]
        return dict(_metrics(float(np.mean(losses)), tot), tau_walk=walk_tau(ds, walked, accepted, L),
                    **(sibling_metrics(sib) if self.drafter.has_markov else {}))

    def validate_and_log(self) -> None:
        v = self.validate()
        self.log(step=self.step, split="val", **v)
        self.progress(f"\nstep {self.step}: val loss {v['loss']:.3f} tau~{v['tau_est']:.2f} "
                      f"tau(walk) {v['tau_walk']:.2f} acc {' '.join(f'{x:.2f}' for x in v['acc'])}"
                      + (f" after a sibling {v['after_sibling_head']:.3f} (base "
                         f"{v['after_sibling_base']:.3f})" if "after_sibling_head" in v else ""))

    def save(self) -> None:
        if self.rank:
            return
        extra = dict(self.run_info, train_seconds=self.t_train)
        save_checkpoint(self.out, self.drafter, self.opt, self.step, self.total, extra)
        save_drafter(self.drafter, self.out, dtype=SAVE_DTYPES[self.cfg.save_dtype])

    def should_stop(self, first: int) -> bool:
        """--time-limit or --stop-after reached (rank 0 decides for every process)."""
        cfg = self.cfg
        late = bool(cfg.time_limit and time.perf_counter() - self.t_start > cfg.time_limit)
        return from_rank0(self.world, late or bool(cfg.stop_after and self.step - first >= cfg.stop_after))

    def train_step(self):
        """One optimizer step on this process's batch; (loss, aux sums, grad norm, seconds)."""
        cfg, W = self.cfg, self.W
        seqs = rank_batch(self.train_ids, self.step, self.S, cfg.seed, W, self.rank,
                          self.lengths if cfg.group_lengths else None)
        t0 = time.perf_counter()
        self.opt.learning_rate = lr_at(cfg, self.step, self.total)
        rng = np.random.default_rng([cfg.seed, 1, self.step] + ([self.rank] if W > 1 else []))
        loss, aux, gnorm = self.step_fn(*self.batch(seqs, rng, cfg.reveal))
        mx.eval(loss, aux, gnorm, self.state)
        dt = time.perf_counter() - t0
        self.t_train += dt
        self.step += 1
        return loss, aux, gnorm, dt

    def fit_total(self, per_step: float) -> int:
        """The step count that fits --train-seconds, or what --time-limit leaves (less time for
        validations and saves), at `per_step` seconds a step; the same on every process."""
        cfg = self.cfg
        if cfg.train_seconds > 0:
            total = max(self.step + 1, int(cfg.train_seconds / per_step))
        elif cfg.time_limit:
            left = cfg.time_limit - (time.perf_counter() - self.t_start) - 20
            total = self.step + max(1, int(left / per_step / 1.03))
        else:
            raise ValueError("--steps 0 needs --train-seconds > 0 or a --time-limit")
        return from_rank0(self.world, total)


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
    r = _Run(target, tokenizer, ds, cfg, resume, progress, groups, val_only)
    B = r.drafter.block_size
    bar = progress_bar(r.total, "training", initial=r.step) if r.rank == 0 else SilentBar()
    sums, loss_sum, n_sum, timing = np.zeros((3, B - 1)), 0.0, 0, []
    stopped, first = False, r.step
    if cfg.markov_rank and r.step == 0 and r.val_batches and r.rank == 0:
        r.validate_and_log()  # the head it starts from (a new one is zero: the base drafter's)
    while r.total == 0 or r.step < r.total:
        if r.should_stop(first):
            stopped = True
            break
        loss, aux, gnorm, dt = r.train_step()
        loss_sum, n_sum = loss_sum + loss.item(), n_sum + 1
        sums += np.array([a.tolist() for a in aux])
        bar.update(1)
        if r.total == 0:
            timing.append(dt)
            if len(timing) == 13:  # the first steps compile; time the next ten
                per_step = float(np.median(timing[3:]))
                r.total = bar.total = r.fit_total(per_step)
                r.progress(f"\n{per_step * 1e3:.0f} ms/step -> {r.total} steps")
        if r.step % cfg.log_every == 0 or r.step == r.total:
            m, lr = _metrics(loss_sum / n_sum, sums), r.opt.learning_rate.item()
            bar.set_postfix_str(f"loss {m['loss']:.3f} tau~{m['tau_est']:.2f} lr {lr:.1e}", refresh=False)
            r.log(step=r.step, lr=lr, grad_norm=gnorm.item(), sec_per_step=dt, elapsed=r.t_train, **m)
            sums, loss_sum, n_sum = np.zeros((3, B - 1)), 0.0, 0
        if r.step % cfg.save_every == 0 or r.step == r.total:
            if r.val_batches and r.rank == 0:
                r.validate_and_log()
            r.save()
    bar.close()
    if r.world:
        check_replicas(r.world, r.drafter)
    r.save()
    r.progress(f"{'stopped' if stopped else 'done'} at step {r.step}/{r.total}; "
               f"{r.t_train:.0f}s of training steps; drafter written to {r.out}")
    return r.drafter


def _metrics(loss: float, sums: np.ndarray) -> dict:
    correct, accepted, valid = sums
    n = np.maximum(valid, 1)
    return {"loss": float(loss), "acc": (correct / n).round(4).tolist(),
            "accept": (accepted / n).round(4).tolist(),
            "tau_est": float(1 + (accepted / max(valid[0], 1)).sum())}
