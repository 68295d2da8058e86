"""MLX CUDA command-buffer sizes for launch-bound small models, set by backend.setup().

MLX's CUDA backend puts at most MLX_MAX_OPS_PER_BUFFER ops (and MLX_MAX_MB_PER_BUFFER MB) in one
command buffer / CUDA graph and reads both once, when it loads. A 135M-parameter target on an
H200 is bound by kernel launches and host work, and buffers of 100 ops and 100 MB made both
target-only and DFlash faster there (docs/performance.md). Values already in the environment
win; other backends (Metal keeps its own per-device defaults) are left alone.
"""

from __future__ import annotations

import os
from importlib import metadata

SETTINGS = {"MLX_MAX_OPS_PER_BUFFER": "100", "MLX_MAX_MB_PER_BUFFER": "100"}
CUDA_DISTRIBUTIONS = ("mlx-cuda-13", "mlx-cuda-12", "mlx-cuda")  # MLX's CUDA builds on PyPI


def mlx_is_cuda_build() -> bool:
    """Whether the installed MLX is a CUDA build, known without importing it."""
    for name in CUDA_DISTRIBUTIONS:
        try:
            metadata.distribution(name)
            return True
        except metadata.PackageNotFoundError:
            continue
    return False


def apply(environ=os.environ, cuda: bool | None = None) -> dict[str, str]:
    """Set the command-buffer sizes on a CUDA build unless given; returns what it set."""
    if cuda is None:
        cuda = mlx_is_cuda_build()
    if not cuda:
        return {}
    new = {k: v for k, v in SETTINGS.items() if k not in environ}
    environ.update(new)
    return new
