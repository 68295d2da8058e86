"""`python -m dflash train`: generate data, train, or evaluate (`--eval`)."""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Optional

import numpy as np

from ..cli import command
from ..load import TARGET_DTYPES
from ..registry import ASSETS
from .config import SAVE_DTYPES, TrainConfig
from .data import (DATA_FILE, Dataset, follow_ups, generate_data, norm_prompt, read_prompts,
                   self_prompts)
from .evaluate import evaluate, format_eval
from .loop import train

DEFAULT_EVAL_PROMPTS = ASSETS / "prompts" / "eval.jsonl"


def build_parser() -> argparse.ArgumentParser:
    c = TrainConfig(out="")
    p = argparse.ArgumentParser(
        prog=command("train"),
        description="Train a DFlash drafter for an mlx-lm target by self-distillation, or (--eval) "
                    "measure a drafter's held-out tau through the engine.")
    p.add_argument("--target", default=None,
                   help="target model: directory, Hub id or builtin:smollm2-135m-instruct (default)")
    p.add_argument("--out", required=True, help="run directory: data, checkpoint, log, drafter")
    _data_args(p.add_argument_group("data"), c)
    _drafter_args(p.add_argument_group("drafter"), c)
    _training_args(p.add_argument_group("training"), c)
    e = p.add_argument_group("evaluation")
    e.add_argument("--eval", nargs="?", const=str(DEFAULT_EVAL_PROMPTS), default=None, metavar="PROMPTS",
                   help="evaluate the drafter in OUT (or --draft) on PROMPTS instead of training")
    e.add_argument("--draft", default=None, help="drafter to evaluate (default OUT)")
    e.add_argument("--eval-max-tokens", type=int, default=128)
    e.add_argument("--eval-limit", type=int, default=None, help="prompts per category")
    return p


def _data_args(p, c: TrainConfig) -> None:
    """The prompts, the target's answers to them (token files) and how they are generated."""
    p.add_argument("--prompts", nargs="+", default=[],
                   help="training prompt files (JSONL, or .jsonl.xz); each gets its own token file")
    p.add_argument("--data", nargs="+", default=None,
                   help=f"token files, one per prompt file (default OUT/{DATA_FILE}, or "
                        "OUT/data-<prompt file>.npz for several); a complete one is reused, a "
                        "partial one resumed; training reads them all")
    p.add_argument("--val-prompts", nargs="+", default=[], metavar="FILE",
                   help="validate on the answers to these prompt files only (token files "
                        "OUT/val-<name>.npz), never trained on; prompts that also occur in --prompts "
                        "are left out. Default: a random --val-frac of the training prompts, whose "
                        "templates and variants training still sees")
    p.add_argument("--generate-only", action="store_true", help="stop after writing the data")
    p.add_argument("--write-follow-ups", metavar="FILE", default=None,
                   help="after generating, write a prompt file of second user turns after every "
                        "answer that ended on its own (pass it as another --prompts next time)")
    p.add_argument("--write-self-prompts", metavar="FILE", default=None,
                   help="first have the target write --self-prompts user turns itself (sampled "
                        "after a starter of each category) into FILE (.jsonl or .jsonl.xz), unless "
                        "FILE exists; name FILE in --prompts to answer them too")
    p.add_argument("--self-prompts", type=int, default=20000, metavar="N")
    p.add_argument("--self-prompt-temp", type=float, default=0.8)
    p.add_argument("--self-prompt-seed", type=int, default=0)
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=c.max_new_tokens)
    p.add_argument("--gen-batch", type=int, default=c.gen_batch, help="sequences generated at once")
    p.add_argument("--target-dtype", choices=TARGET_DTYPES, default="auto",
                   help="the target's dtype for data and features (load.py; auto: as the engine)")
    p.add_argument("--gen-time-limit", type=float, default=None,
                   help="stop generating (prompts and answers) after this many seconds and "
                        "train on what is there (0: no more generation); --val-prompts answers "
                        "are always generated in full")
    p.add_argument("--opening", type=int, default=0, metavar="N",
                   help="answers open with 1..N sampled tokens, then go on greedy: more greedy data "
                        "from the same prompts (the opening counts as prompt: never a label)")
    p.add_argument("--opening-temp", type=float, default=1.0, help="temperature of the opening")
    p.add_argument("--opening-seed", type=int, default=1,
                   help="seed of the openings (another seed: another token file of the same prompts)")


def _drafter_args(g, c: TrainConfig) -> None:
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
    g.add_argument("--grow", type=int, default=c.grow, metavar="N",
                   help="with --init DIR: append N layers after that drafter's, copies of its last "
                        "with their output projections at zero (it drafts as before until trained)")
    g.add_argument("--window", type=int, default=c.window, metavar="W",
                   help="every drafter layer sees the context's last W positions (0: all of it), "
                        "in training and in the saved config (default: the drafter's own; full "
                        "for a new one)")
    g.add_argument("--draft-vocab", type=int, default=c.draft_vocab, metavar="N",
                   help="ship the N most frequent answer tokens as the draft vocabulary "
                        "(a cheaper draft head; 0: the whole vocabulary)")
    g.add_argument("--markov-rank", type=int, default=c.markov_rank, metavar="R",
                   help="with --init DIR: give that drafter a Markov head of rank R (a transition "
                        "bias from the previous token; zero at the start) and train the head, the "
                        "rest frozen (--markov-joint: the layers too), over the drafter's own "
                        "draft vocabulary")
    g.add_argument("--markov-joint", action="store_true", default=c.markov_joint,
                   help="with --markov-rank: train the drafter's layers together with the head "
                        "(--dropout applies to them)")


def _training_args(t, c: TrainConfig) -> None:
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
    t.add_argument("--dropout", type=float, default=c.dropout, metavar="P",
                   help="dropout on the attention and MLP branches of the drafter's layers in "
                        "training steps (a regulariser; validation and the engine drop nothing)")
    t.add_argument("--reveal", type=float, default=c.reveal, metavar="P",
                   help="the share of training blocks that show their first 1..(B-1)/2 true tokens "
                        "after the staged one instead of MASK (no loss there): teaches the "
                        "drafter to continue a path written into its block")
    t.add_argument("--val-frac", type=float, default=c.val_frac)
    t.add_argument("--seed", type=int, default=c.seed)
    t.add_argument("--save-every", type=int, default=c.save_every)
    t.add_argument("--log-every", type=int, default=c.log_every)
    t.add_argument("--save-dtype", choices=tuple(SAVE_DTYPES), default=c.save_dtype)
    t.add_argument("--dtype", choices=tuple(SAVE_DTYPES), default=c.dtype,
                   help="forward/backward dtype (master weights and optimizer stay float32)")
    t.add_argument("--cache-features", action="store_true",
                   help="compute the target's features once for all data and keep them on the device")
    t.add_argument("--group-lengths", action="store_true",
                   help="draw each step's sequences from similar lengths (each still once an epoch): "
                        "a mix of short and long answers pads less")
    t.add_argument("--no-compile", dest="compile", action="store_false")
    t.add_argument("--distributed", default="", metavar="BACKEND",
                   help="data-parallel over an mx.distributed group (nccl on CUDA GPUs, ring, mpi): "
                        "one process per device, each a batch of --batch-seqs, gradients averaged; "
                        "e.g. `mlx.launch --backend nccl -n 2 --python \"$(which python)\" -- -m dflash.train ... --distributed nccl`")


def _run_eval(args, say) -> int:
    from ..load import load_pair

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


def _write_self_prompts(args, lm, tokenizer, say) -> None:
    held_out = [DEFAULT_EVAL_PROMPTS, *sorted((ASSETS / "bench").glob("*.jsonl"))]  # eval + bench
    held = [p for f in held_out for _, p in read_prompts(f) if isinstance(p, str)]
    recs = self_prompts(lm, tokenizer, args.self_prompts, args.gen_batch, args.self_prompt_temp,
                        seed=args.self_prompt_seed, exclude=held, progress=say)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs).encode("utf-8")
    path = Path(args.write_self_prompts)
    path.write_bytes(lzma.compress(text) if path.suffix == ".xz" else text)
    say(f"{len(recs)} self-written prompts -> {path}")


def _data_paths(args) -> list[Path]:
    if args.data:
        if len(args.data) != len(args.prompts):
            raise SystemExit(f"--data: {len(args.data)} token files for {len(args.prompts)} prompt files")
        return [Path(d) for d in args.data]
    if len(args.prompts) == 1:
        return [Path(args.out) / DATA_FILE]
    return [Path(args.out) / f"data-{Path(p).stem}.npz" for p in args.prompts]


def _prompt_reader(args):
    """prompts_of(file): its prompts in the order generation uses (a token file's prompt_index
    refers to it); for a --val-prompts file, without the prompts training has."""
    # what validation prompts must not repeat: each training file read once, and only if needed
    train_files = dict.fromkeys(args.prompts) if args.val_prompts else {}
    seen = {norm_prompt(p) for f in train_files for _, p in read_prompts(f) if isinstance(p, str)}

    def prompts_of(prompt_file):
        prompts = read_prompts(prompt_file)
        order = np.random.default_rng(args.seed).permutation(len(prompts))  # mixes categories
        prompts = [prompts[i] for i in order][: args.max_prompts]
        if prompt_file in args.val_prompts:
            prompts = [(c, p) for c, p in prompts if not isinstance(p, str) or norm_prompt(p) not in seen]
        return prompts

    return prompts_of


def _answer(args, lm, tokenizer, prompts, data: Path, is_val: bool, t0: float, say) -> Dataset:
    """The target's answers to `prompts` in token file `data` (a partial file is resumed)."""
    # validation answers are few and always generated in full: a limit (or 0, "no more
    # generation") that left them out would quietly validate on nothing
    limit = None if is_val else args.gen_time_limit
    t1 = time.perf_counter()
    ds = generate_data(lm, tokenizer, prompts, data, args.max_new_tokens, args.gen_batch,
                       time_limit=None if limit is None else max(0.0, limit - (t1 - t0)),
                       progress=say, opening=args.opening,
                       temperature=args.opening_temp, seed=args.opening_seed)
    say(f"data: {len(ds)} answers, {int(ds.lengths.sum() - ds.prompt_lens.sum())} response "
        f"tokens in {time.perf_counter() - t1:.0f}s -> {data}")
    return ds


def _load_data(args, lm, tokenizer, t0: float, say):
    """(every token file as one Dataset, a validation group per sequence, validation-only flags),
    generating what is missing; writes --write-follow-ups on the way."""
    prompts_of = _prompt_reader(args)
    val_data = [Path(args.out) / f"val-{Path(f).name.split('.')[0]}.npz" for f in args.val_prompts]
    parts, follow, groups, files, val_only = [], [], [], {}, []
    for prompt_file, data in zip(args.prompts + args.val_prompts, _data_paths(args) + val_data):
        ds, prompts = (Dataset.load(data) if data.exists() else None), None
        is_val = prompt_file in args.val_prompts
        if ds is None or not (ds.meta.get("complete") or args.resume):
            prompts = prompts_of(prompt_file)
            ds = _answer(args, lm, tokenizer, prompts, data, is_val, t0, say)
        parts.append(ds)
        # a prompt answered in several token files (e.g. with --opening) is one validation group
        file_id = files.setdefault(str(Path(prompt_file).resolve()), len(files))
        groups.append(file_id * 2**32 + ds.prompt_index.astype(np.int64))
        val_only.append(np.full(len(ds), is_val))
        if args.write_follow_ups and not is_val:
            follow.extend(follow_ups(ds, prompts or prompts_of(prompt_file), tokenizer, args.seed))
    if args.write_follow_ups:
        with open(args.write_follow_ups, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in follow)
        say(f"{len(follow)} follow-up conversations -> {args.write_follow_ups}")
    return Dataset.concat(parts), np.concatenate(groups), np.concatenate(val_only)


def main(argv: Optional[list[str]] = None) -> int:
    t_main = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout {args.dropout}: a probability in [0, 1)")
    if not 0 <= args.reveal <= 1:
        parser.error(f"--reveal {args.reveal}: a probability in [0, 1]")
    if args.markov_rank and (args.init in ("random", "target") or args.draft_vocab
                             or (args.dropout and not args.markov_joint)):
        parser.error("--markov-rank trains the head of a trained drafter: it needs --init DIR and "
                     "keeps that drafter's vocabulary (no --draft-vocab) and, without "
                     "--markov-joint, its layers as they are (no --dropout)")
    if args.markov_joint and not args.markov_rank:
        parser.error("--markov-joint: give the head's rank with --markov-rank R")
    if args.markov_rank < 0:
        parser.error(f"--markov-rank {args.markov_rank}: a rank >= 1 (0: no head)")
    if args.window is not None and args.window < 0:
        parser.error(f"--window {args.window}: W >= 1 positions, or 0 for the whole context")
    if args.grow and (args.grow < 0 or args.init in ("random", "target")
                      or (args.markov_rank and not args.markov_joint)):
        parser.error(f"--grow {args.grow}: N >= 1 layers added to a trained drafter (--init DIR), "
                     "trained with the rest (with --markov-rank: --markov-joint)")
    say = lambda s: print(s, file=sys.stderr, flush=True)
    if args.eval is not None:
        return _run_eval(args, say)
    if not args.prompts:
        parser.error("--prompts: name the prompt files to answer and train on "
                     "(docs/training.md lists the shipped drafter's)")

    from ..load import load_target
    from ..registry import BUILTIN_TARGET
    from ..target import Target

    lm, tokenizer, model_type = load_target(args.target or BUILTIN_TARGET, progress=say,
                                            dtype=args.target_dtype)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()  # --gen-time-limit counts from here: writing prompts is generation
    if args.write_self_prompts and not Path(args.write_self_prompts).exists():
        _write_self_prompts(args, lm, tokenizer, say)
    ds, groups, val_only = _load_data(args, lm, tokenizer, t0, say)
    if args.generate_only:
        return 0
    if args.val_prompts and not val_only.any():
        raise SystemExit("--val-prompts: no answers to validate on (are all its prompts also "
                         "training prompts?)")
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    if cfg.time_limit:  # the limit counts from the command's start
        cfg.time_limit -= time.perf_counter() - t_main
    train(Target(lm, model_type, []), tokenizer, ds, cfg, resume=args.resume, progress=say,
          groups=groups, val_only=val_only)
    return 0
