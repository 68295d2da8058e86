"""DFlash playground. Importing the package first lets it pick the CPU BLAS before mlx loads."""

from . import blas as _blas

_blas.use_openblas()
