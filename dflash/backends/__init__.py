"""What differs per host: the code behind the choices `dflash/backend.py` makes once per process.

CPU: blas.py (an in-process OpenBLAS with row-invariant kernels), cpu_attention.py (attention
whose rows are bitwise the same alone, in a block and in a tree), cpu_rows.py (row-exact padded
calls), host_ops.py and host_draft.py (softmax, SwiGLU and the drafter's block pass in numpy).
CUDA: cuda_env.py (MLX's command-buffer sizes, set before MLX loads) and kernels.py (a tree
pass's and a verify block's attention). Metal runs MLX's own paths.
"""
