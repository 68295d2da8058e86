"""Generation settings shared by the engine, the CLI, the server and the UI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_MAX_TOKENS = 256
DEFAULT_BLOCK_SIZE = 16
MAX_TOKENS_LIMIT = 4096
# On a CPU the target verifies compute-bound: each token past ~4 adds to a verify pass (CPU
# profile: 2/4/8/16 tokens = 1.1/1.2/1.5/2.0 target steps), so unless tau is high a short verify
# length wins. The embedded pair over the 24 bench prompts: 1.47-1.55x target-only at 4 (fifth
# and sixth drafters, eight runs), 1.19x at 16 (fourth); with the sixth drafter, interleaved
# prompt by prompt, 5 beat 4 by 4.5 % and 4.1 % (19 and 18 of 24 prompts) and tied with 6
# (lab/bench/results/cpu-ab-blocks-*.json). On a GPU a 16-token pass costs about what a
# 4-token one does: there the drafter's whole block is the default.
CPU_BLOCK_SIZE = 5
MAX_TREE = 64  # drafted nodes per tree verify pass


def default_block_size(drafter_block_size: int, on_cpu: bool | None = None) -> int:
    """The verify length when none is asked for (and it is not adaptive); on_cpu=None: whether
    MLX computes on the CPU here."""
    if on_cpu is None:
        from .backend import on_cpu as here

        on_cpu = here()
    return min(drafter_block_size, CPU_BLOCK_SIZE) if on_cpu else drafter_block_size


def default_tree_nodes(on_cuda: bool | None = None) -> int | str:
    """The tree when none is asked for: on a CUDA GPU MAX_TREE nodes every cycle, elsewhere
    "auto" (each cycle's size, or a plain step, from measured costs: policy.TreePlanner). On an
    H200 a pass of 64 nodes costs what one of 5 does, and the fixed 64 beat the per-cycle
    planner in every interleaved comparison (its plain-step stretches cost more than they
    saved, and its noisy cost probe sometimes chose 16 nodes: docs/tree.md). Apple GPUs were
    not measured: they keep the planner, which times their passes. Either default gives way
    where a cheaper shape commits more (engine._plan: the fixed tree to its spine's chain or to
    plain target steps, by policy.Fallback)."""
    if on_cuda is None:
        from .backend import on_cuda as here

        on_cuda = here()
    return MAX_TREE if on_cuda else "auto"


@dataclass(frozen=True)
class GenerationConfig:
    """What one generation does. `block_size=None`: `default_block_size` (the drafter's block on a
    GPU, 5 on a CPU), or the drafter's block as the upper bound of an adaptive verify length."""

    mode: Literal["dflash", "target"] = "dflash"
    max_tokens: int = DEFAULT_MAX_TOKENS
    block_size: int | None = None
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    adaptive: bool = False  # DFlash: choose each cycle's verify length (<= block_size) from measured costs
    # DFlash: drafted nodes verified per target pass (tree.py); 0 = the argmax chain; None =
    # default_tree_nodes() where the target takes trees, unless a chain length (block_size /
    # adaptive) is asked for
    tree: int | None = None
    lookup: bool = True  # tree cycles also verify a copy from earlier in the context (lookup.py)

    def validate(self, drafter_block_size: int | None = None) -> "GenerationConfig":
        """Raise ValueError naming the bad value; return self when all is well."""
        if self.mode not in ("dflash", "target"):
            raise ValueError(f"mode must be 'dflash' or 'target' (got {self.mode!r})")
        if not isinstance(self.max_tokens, int) or not 0 <= self.max_tokens <= MAX_TOKENS_LIMIT:
            raise ValueError(f"max_tokens must be an integer in 0..{MAX_TOKENS_LIMIT} (got {self.max_tokens!r})")
        if not (self.temperature >= 0.0 and self.temperature <= 10.0):
            raise ValueError(f"temperature must be in [0, 10] (got {self.temperature!r})")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p!r})")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer in 0..2**63-1 (got {self.seed!r})")
        if self.tree is not None and (not isinstance(self.tree, int) or not 0 <= self.tree <= MAX_TREE):
            raise ValueError(f"tree must be an integer in 0..{MAX_TREE} (got {self.tree!r})")
        if not isinstance(self.lookup, bool):
            raise ValueError(f"lookup must be true or false (got {self.lookup!r})")
        if self.block_size is not None and drafter_block_size is not None:
            if not 2 <= self.block_size <= drafter_block_size:
                raise ValueError(
                    f"block_size must be in 2..{drafter_block_size} for this drafter (got {self.block_size})"
                )
        return self

    def wants_tree(self) -> bool:
        """Tree verification asked for, or left to the engine (the default)."""
        if self.tree is not None:
            return self.tree > 0
        return self.block_size is None and not self.adaptive

    def verify_length(self, drafter_block_size: int, on_cpu: bool | None = None) -> int:
        """The block (upper bound when adaptive) this generation drafts and verifies."""
        if self.block_size is not None:
            return self.block_size
        return drafter_block_size if self.adaptive else default_block_size(drafter_block_size, on_cpu)
