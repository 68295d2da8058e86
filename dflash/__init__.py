"""DFlash playground: lossless speculative decoding with block-diffusion drafters on MLX.

Importing the package loads no library and sets no environment variable; a program chooses
how MLX computes with `dflash.backend.setup()` before it first imports mlx."""
