#!/bin/bash
# How lab/cpu's Intel numbers were taken on a borrowed machine with no network (an H200 host's
# 16-core Intel Xeon, AVX-512), from the repository root there. Carried in an ignored folder:
# mlx 0.32.4 + mlx-cpu 0.32.4 (cp312) + mlx-lm 0.32.2 wheels, Debian's OpenBLAS 0.3.21
# (libopenblasp-r0.3.21.so, xz-compressed) and libvzu.so. Pinned to 2 cores like the Xeon.
set -u
W=${W:-.devx}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cpusite $W/*.whl || exit 1
export PYTHONPATH=/tmp/cpusite PYTHONUNBUFFERED=1
mkdir -p /usr/lib/x86_64-linux-gnu/openblas-pthread  # where dflash/blas.py looks
xz -dc $W/openblas.so.xz > /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 || exit 1
OB=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
cp $W/libvzu.so lab/cpu/
export OPENBLAS_NUM_THREADS=2
for c in "--blas none" "--blas $OB --coretype Sandybridge" "--blas $OB --coretype Sandybridge --vzu" \
         "--blas $OB --coretype Haswell" "--blas $OB --coretype SkylakeX"; do
  taskset -c 0,1 python3 lab/cpu/penalty_probe.py $c
done
taskset -c 0,1 python3 lab/cpu/product_probe.py auto --reps 5
taskset -c 0,1 python3 lab/cpu/product_probe.py Sandybridge --no-check --reps 5
OPENBLAS_NUM_THREADS= python3 lab/cpu/product_probe.py auto --reps 3  # all 16 threads
