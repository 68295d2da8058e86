"""DFlash playground. Importing the package first lets it set up MLX's backends before mlx loads:
the CPU BLAS (blas.py) and the CUDA command-buffer sizes (cuda_env.py)."""

from . import blas as _blas
from . import cuda_env as _cuda_env

_blas.use_openblas()
_cuda_env.apply()
