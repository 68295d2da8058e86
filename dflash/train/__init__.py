"""Training a DFlash drafter for an mlx-lm target, by self-distillation, in MLX (Metal, CUDA, CPU).

    python -m dflash train --target builtin:smollm2-135m-instruct --prompts P.jsonl --out runs/smol

1. data      the target's own greedy answers to a prompt set (chat template applied), generated in
             lockstep batches of similar-length prompts (`greedy_batch`) and saved as a token
             file (`data.npz`) that later runs reuse. `--opening N` answers the prompts again from
             other starts (1..N sampled tokens, counted as prompt, then greedy): more greedy data
             without more prompts.
2. blocks    random anchors a inside each response. A block is [x_a, MASK x (B-1)] at positions
             a..a+B-1; its context is the target's tapped features of positions < a. Mask slot k
             predicts x_{a+k} (docs/training.md), exactly what the engine asks of the drafter.
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
the drafter itself is written to OUT in the z-lab checkpoint layout the engine loads (`save_drafter`).
`--distributed nccl|ring|mpi` trains one drafter data-parallel, one process per device.

Modules: data (1), model (the drafter a target gets), blocks (2-3), loop (training), parallel
(data-parallel), evaluate (4), config, progress, cli.
"""

from .blocks import (BLOCK_KEYS, FrozenIO, accept_lengths, block_loss, drafter_forward,
                     every_anchor, pad_ids, position_weights, sample_blocks, walk, walk_tau)
from .cli import DEFAULT_EVAL_PROMPTS, build_parser, main
from .config import SAVE_DTYPES, TrainConfig
from .data import DATA_FILE, FOLLOW_UPS, Dataset, follow_ups, generate_data, greedy_batch, read_prompts
from .evaluate import evaluate, format_eval
from .loop import CKPT_DIR, LOG_FILE, Features, load_checkpoint, lr_at, save_checkpoint, train
from .model import (choose_mask_token, draft_vocab_from, drafter_args_for, grow, init_from_target,
                    target_features)
from .parallel import rank_batch

__all__ = [
    "BLOCK_KEYS", "CKPT_DIR", "DATA_FILE", "DEFAULT_EVAL_PROMPTS", "FOLLOW_UPS",
    "LOG_FILE", "SAVE_DTYPES", "Dataset", "Features", "FrozenIO", "TrainConfig", "accept_lengths",
    "block_loss", "build_parser", "choose_mask_token", "draft_vocab_from", "drafter_args_for",
    "drafter_forward", "evaluate", "every_anchor", "follow_ups", "format_eval", "generate_data",
    "greedy_batch", "grow", "init_from_target", "load_checkpoint", "lr_at", "main", "pad_ids",
    "position_weights", "rank_batch", "read_prompts", "sample_blocks", "save_checkpoint",
    "target_features", "train", "walk", "walk_tau",
]
