"""How MLX computes on this host: one explicit setting, chosen before `mlx.core` loads.

Importing dflash loads no library and writes no environment variable. A program calls
`setup()` first (the CLI, the playground, the tests' conftest): it loads an optimized BLAS on a
Linux CPU (backends/blas.py) and sizes MLX's CUDA command buffers (backends/cuda_env.py), read only when MLX
loads. `load_pair` takes the resulting `Backend` (`active()` unless given) and passes its
choices down to the target; `bench` records it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Optional

from .backends import blas, cuda_env

# GPU: a verify pass attends in calls of this many query rows on MLX's CUDA backend (MLX's
# fused attention kernel takes fewer than 4 rows); 0 elsewhere: mlx-lm's one call.
CUDA_VERIFY_ROWS = 3
BLAS_CHOICES = ("auto", "reference", *blas.KERNELS)


@dataclass(frozen=True)
class Backend:
    """What this process computes with; fixed once MLX has loaded."""

    blas: Optional[str] = None  # OpenBLAS loaded in-process; None: the BLAS MLX brought
    coretype: Optional[str] = None  # its kernel family (OPENBLAS_CORETYPE)
    row_tile: int = 0  # CPU target passes: rows padded (score calls of this many rows; 0: no padding)
    attention_rows: int = 0  # GPU verify passes: query rows per attention call (0: one call)
    cuda_buffers: dict = field(default_factory=dict)  # MLX_MAX_*_PER_BUFFER this process set
    cpu: str = ""  # CPU vendor and model, for the record
    host_ops: bool = True  # CPU float32 passes: softmax and SwiGLU in numpy (host_ops.py)
    host_draft: bool = True  # CPU: the drafter's block pass in numpy (host_draft.py)


_active: Optional[Backend] = None


def setup(cpu_blas: str = "auto", environ=None) -> Backend:
    """Choose the backend for this process; call before the first `import mlx.core`.

    cpu_blas "auto": OpenBLAS with the row-invariant kernels blas.choose() picks for this CPU;
    a core type ("Sandybridge", "SkylakeX"): those kernels; "reference": the BLAS MLX's wheel
    brought. A later call returns the first call's choice.
    """
    global _active
    if cpu_blas not in BLAS_CHOICES:
        raise ValueError(f"cpu_blas {cpu_blas!r} is not one of {BLAS_CHOICES}")
    if _active is not None:
        return _active
    cuda = cuda_env.mlx_is_cuda_build()
    kernels = None
    if cpu_blas != "reference":
        kernels = blas.use_openblas(None if cpu_blas == "auto" else cpu_blas)
    _active = Backend(
        blas=kernels.path if kernels else None,
        coretype=kernels.coretype if kernels else None,
        row_tile=kernels.row_tile if kernels else 0,
        attention_rows=CUDA_VERIFY_ROWS if cuda else 0,
        cuda_buffers=cuda_env.apply(os.environ if environ is None else environ, cuda),
        cpu=blas.cpu_name(),
    )
    return _active


@contextmanager
def overridden(**choices):
    """This process's backend with some choices changed (`host_ops=False`, ...), for A/B runs
    and tests; change it between generations only."""
    global _active
    before = _active
    _active = replace(active(), **choices)
    try:
        yield _active
    finally:
        _active = before


def device() -> str:
    """Where MLX computes in this process now: "cpu", "cuda", "metal" or "gpu". Every device
    check of the package asks here (tests/test_backend.py keeps it so)."""
    import mlx.core as mx

    if mx.default_device() == mx.cpu:
        return "cpu"
    return "cuda" if mx.cuda.is_available() else "metal" if mx.metal.is_available() else "gpu"


def on_cpu() -> bool:
    import mlx.core as mx

    return mx.default_device() == mx.cpu  # per forward pass (host_ops): the cheap check alone


def on_cuda() -> bool:
    return device() == "cuda"


def uses(choice: str) -> bool:
    """One of this process's on/off choices (`host_ops`, `host_draft`), cheap enough for every
    pass: no Backend is built where no program called setup()."""
    return getattr(_active if _active is not None else Backend, choice)


def active() -> Backend:
    """The backend `setup()` chose, or, where no program called it, what MLX uses by itself."""
    if _active is not None:
        return _active
    cuda = cuda_env.mlx_is_cuda_build()
    return Backend(attention_rows=CUDA_VERIFY_ROWS if cuda else 0, cpu=blas.cpu_name())
