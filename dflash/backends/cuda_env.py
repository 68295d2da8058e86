"""MLX CUDA command-buffer sizes, set by backend.setup().

MLX's CUDA backend puts at most MLX_MAX_OPS_PER_BUFFER ops (and MLX_MAX_MB_PER_BUFFER MB) in one
command buffer / CUDA graph and reads both once, when it loads. Graphs of 20 ops keep a DFlash
cycle's cost steady at any context length: on an H100 with MLX's default of 100, a 4k-token
tree verify took 18-116 ms from one cycle to the next and DFlash ran 0.88x target-only on the
long suite; with 20, 19-21 ms and 1.44-1.66x, the short prompts' speedup unchanged or better
(docs/performance.md, "Speed against context length"). Values already in the environment win;
other backends (Metal keeps its own per-device defaults) are left alone.
"""

from __future__ import annotations

import os
from importlib import metadata

SETTINGS = {"MLX_MAX_OPS_PER_BUFFER": "20", "MLX_MAX_MB_PER_BUFFER": "100"}
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
