"""One training run's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import mlx.core as mx

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
    grow: int = 0  # with init=DIR: append this many layers, identity at the start (model.grow)
    window: Optional[int] = None  # every layer's context window (0: the whole context); None: as built
    draft_vocab: int = 0  # > 0: ship the N most frequent answer tokens as the draft vocabulary
    markov_rank: int = 0  # > 0 with init=DIR: train a Markov head of this rank (markov.py)
    markov_joint: bool = False  # with markov_rank: the base trains with its head (DSpark)
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
    dropout: float = 0.0  # on each residual branch of the drafter's layers, in training steps only
    reveal: float = 0.0  # P(a training block shows a true prefix after its staged token: blocks.reveal_prefix)
    val_frac: float = 0.02
    seed: int = 0
    save_every: int = 500
    log_every: int = 25
    time_limit: Optional[float] = None  # seconds since start: save and stop
    stop_after: Optional[int] = None  # steps in this run: save and stop
    save_dtype: str = "float16"
    dtype: str = "float32"  # forward/backward dtype; the master weights stay float32
    cache_features: bool = False
    group_lengths: bool = False  # a step's sequences of similar lengths (parallel.rank_batch)
    compile: bool = True
    distributed: str = ""  # an mx.distributed backend (nccl, ring, mpi): data-parallel over its group
