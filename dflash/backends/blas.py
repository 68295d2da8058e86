"""An optimized BLAS under MLX's Linux CPU wheel, loaded in-process (no LD_PRELOAD).

The `mlx[cpu]` wheel links a reference BLAS (`mlx_cpu.libs/libblas-*.so`, ~3 GFLOP/s). libmlx
imports `cblas_sgemm` unversioned, and the dynamic linker resolves it through the global scope
before libmlx's own dependencies, so loading OpenBLAS with RTLD_GLOBAL before `import mlx.core`
routes every float32 matmul of MLX's CPU backend through it (~40 GFLOP/s). Quantized matmuls are
MLX's own kernels and do not change. backend.setup() calls `use_openblas`; nothing here runs at
import.

Losslessness needs a token's logits to be bitwise the same alone and inside a block, so the
kernels are pinned (OPENBLAS_CORETYPE) to a family whose rows do not depend on the row count:
- Sandybridge (AVX, no FMA): row-invariant as they come. They return with the upper halves of
  the vector registers dirty (no vzeroupper), and Intel cores then slow every non-VEX SSE
  instruction on that thread, MLX's elementwise CPU ops included, ~30x (AMD's: ~1.7x).
- SkylakeX (AVX-512): row-invariant once each projection pads its rows to a tile that depends
  on its shape (found by trying, cpu_rows.exact_tile) and attention scores are calls of ROW_TILE
  rows x cpu_rows.KEY_TILE keys (cpu_rows.py). The padding costs the 1-token step more on AMD's
  AVX-512 than Intel's, so only Intel CPUs get these.
Attention's p @ v also needs fixed-size key chunks (backends/cpu_attention.py, rows_invariant).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# Debian/Ubuntu `libopenblas0-pthread` (the README's set-up installs it)
CANDIDATES = ("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",)
AVX512 = {"avx512f", "avx512dq", "avx512bw", "avx512vl"}  # what OpenBLAS's SkylakeX kernels use
ROW_TILE = 8  # SkylakeX: attention-score calls of this many rows; nonzero: the target pads rows
KERNELS = {"Sandybridge": 0, "SkylakeX": ROW_TILE}  # core type -> row tile


@dataclass(frozen=True)
class Kernels:
    path: str
    coretype: str
    row_tile: int  # 0: rows need no padding


def choose(vendor: str, flags: set[str]) -> Optional[str]:
    """The row-invariant core type for a CPU (/proc/cpuinfo vendor_id and flags); None: no AVX."""
    if vendor == "GenuineIntel" and AVX512 <= flags:
        return "SkylakeX"
    return "Sandybridge" if "avx" in flags else None


def use_openblas(coretype: Optional[str] = None, candidates=CANDIDATES) -> Optional[Kernels]:
    """Load OpenBLAS globally with row-invariant kernels (`choose`'s unless given), if installed
    and mlx is not imported yet; None: MLX keeps its own BLAS."""
    if coretype is not None and coretype not in KERNELS:
        raise ValueError(f"OpenBLAS core type {coretype!r} is not one of {sorted(KERNELS)}")
    if coretype == "SkylakeX" and not AVX512 <= cpu_flags():
        raise ValueError("the SkylakeX kernels need a CPU with AVX-512")
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return None
    if "mlx.core" in sys.modules:  # too late: libmlx already bound its BLAS symbols
        if coretype:
            raise ValueError("OpenBLAS kernels are chosen before mlx is imported (backend.setup)")
        return None
    coretype = coretype or choose(_cpuinfo().get("vendor_id", ""), cpu_flags())
    path = next((p for p in candidates if Path(p).exists()), None)
    if coretype is None or path is None:
        return None
    before = os.environ.get("OPENBLAS_CORETYPE")
    os.environ["OPENBLAS_CORETYPE"] = coretype  # read once, while the library loads
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    finally:  # later libraries (numpy's own OpenBLAS) choose for themselves
        if before is None:
            os.environ.pop("OPENBLAS_CORETYPE")
        else:
            os.environ["OPENBLAS_CORETYPE"] = before
    return Kernels(path, _corename(lib) or coretype, KERNELS[coretype])


def _corename(lib) -> Optional[str]:
    """The kernels OpenBLAS actually runs (it may fall back from the ones asked for)."""
    try:
        f = lib.openblas_get_corename
    except AttributeError:
        return None
    f.restype = ctypes.c_char_p
    return f().decode()


def _cpuinfo() -> dict[str, str]:
    """The first processor's /proc/cpuinfo fields ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in first.splitlines())}


def cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def cpu_name() -> str:
    """Vendor and model, e.g. 'AuthenticAMD AMD EPYC'."""
    info = _cpuinfo()
    name = " ".join(v for v in (info.get("vendor_id"), info.get("model name")) if v)
    return name or platform.processor() or platform.machine()
