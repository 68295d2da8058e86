"""An optimized BLAS under MLX's Linux CPU wheel, loaded in-process (no LD_PRELOAD).

The `mlx[cpu]` wheel links a reference BLAS (`mlx_cpu.libs/libblas-*.so`, ~3 GFLOP/s). libmlx
imports `cblas_sgemm` unversioned, and the dynamic linker resolves it through the global scope
before libmlx's own dependencies, so loading OpenBLAS with RTLD_GLOBAL before `import mlx.core`
routes every float32 matmul of MLX's CPU backend through it (~40 GFLOP/s here). Quantized
matmuls are MLX's own kernels and do not change. `DFLASH_BLAS=reference` keeps the wheel's BLAS.

Losslessness needs a token's logits to be bitwise the same alone and inside a block. OpenBLAS's
Haswell/Zen/SkylakeX sgemm kernels give row results that depend on M (1 vs 16 rows); its
Sandybridge kernels do not (measured: assets/bench/results/cpu-profile.md), so we pin them.
Attention's p @ v still needs fixed-size key chunks (target.py, _attention_rows_invariant).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from pathlib import Path
from typing import Optional

# Debian/Ubuntu `libopenblas0-pthread` (the README's set-up installs it)
CANDIDATES = ("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",)
CORETYPE = "Sandybridge"  # row-invariant sgemm kernels (AVX, no FMA)

loaded: Optional[str] = None  # the BLAS library this process uses, when not the wheel's


def use_openblas() -> Optional[str]:
    """Load OpenBLAS globally if present and mlx is not imported yet; returns its path or None."""
    global loaded
    if loaded or sys.platform != "linux" or os.environ.get("DFLASH_BLAS") == "reference":
        return loaded
    if "mlx.core" in sys.modules:  # too late: libmlx already bound its BLAS symbols
        return None
    if platform.machine() != "x86_64" or " avx " not in Path("/proc/cpuinfo").read_text():
        return None
    for path in CANDIDATES:
        if Path(path).exists():
            os.environ["OPENBLAS_CORETYPE"] = CORETYPE  # read once, when the library loads
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            loaded = path
            return path
    return None


def fast_fp32_matmul() -> bool:
    """True when float32 matmuls on the CPU go through an optimized BLAS (OpenBLAS or Accelerate)."""
    return loaded is not None or sys.platform == "darwin"
