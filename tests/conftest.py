# Import the package before any test module imports mlx: dflash.blas must load OpenBLAS first.
import dflash  # noqa: F401
