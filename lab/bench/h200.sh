#!/usr/bin/env bash
# Benchmarks on one H200 through the device tool, whose calls carry at most 64 MiB with the tree
# (~55 MB): MLX's CUDA build and the SmolLM2 GGUF travel as chunks of CHUNK bytes (16 MB; 12 MB
# once the tree grew), one per call, into the
# machine's /tmp (kept while it stays warm: make the calls back to back).
#
# Here, once:   ../shared/gpu/pack-mlx-cuda.sh mlx-lm==0.32.2     (-> .gpu/a, .gpu/b)
#               bash lab/bench/h200.sh chunk                         (-> .gpux/cNN, ignored by git)
# There:        call k (k = 0..N-1), carry [".gpux/cNN"]:  bash lab/bench/h200.sh stash NN
#               last call:                                   bash lab/bench/h200.sh bench SECONDS [ARGS]
# `bench` first runs `setup` (once per machine: MLX and mlx-lm into /tmp/site, the GGUF converted,
# /tmp/dflash-env.sh written for later calls and lab/markov-head/h200.sh), then `python -m dflash
# bench` once per setting in TREES with the given ARGS, each writing $OUT/h200-tree-<setting>.json.
set -uo pipefail
phase=${1:?phase}

case $phase in
chunk)
  rm -rf .gpux/c[0-9]* && mkdir -p .gpux/all  # not .gpux/cpu (lab/cpu/xeon.sh pack)
  cat .gpu/a/mlx-cuda.part.* .gpu/b/mlx-cuda.part.* > .gpux/all/mlx-cuda.tar.xz
  cp .gpu/b/*.whl .gpux/all/ 2>/dev/null
  cp "${DFLASH_CACHE:-$HOME/.cache/dflash}/SmolLM2-135M-Instruct.Q4_1.gguf" .gpux/all/
  # DRAFTER=1: the shipped drafter travels as a chunk too, so that the tree can leave it out
  # (git rm --cached it for the lease): the tree drops to ~12 MB and CHUNK=48000000 fits a call
  [ -n "${DRAFTER:-}" ] && cp assets/smollm2-135m-instruct-dflash/model.safetensors .gpux/all/drafter.safetensors
  (cd .gpux/all && tar -cf - * | split -b ${CHUNK:-16000000} -d - ../chunk.)
  for f in .gpux/chunk.*; do n=${f##*.}; mkdir -p .gpux/c$n && mv "$f" .gpux/c$n/; done
  rm -rf .gpux/all && ls -d .gpux/c*
  ;;
stash)
  mkdir -p /tmp/chunks && cp .gpux/c$2/* /tmp/chunks/ && ls /tmp/chunks | wc -l
  ;;
setup)  # MLX's CUDA build into /tmp/site and the target converted into /tmp/cache, once per
  # machine; writes /tmp/dflash-env.sh, which later phases (and lab/markov-head/h200.sh) source
  if [ ! -f /tmp/dflash-env.sh ]; then
    mkdir -p /tmp/all /tmp/site /tmp/cache
    cat /tmp/chunks/chunk.* | tar -C /tmp/all -xf - || exit 1
    xz -dc /tmp/all/mlx-cuda.tar.xz | tar -C /tmp/site -xf - || exit 1
    python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/all/*.whl || exit 1
    mv /tmp/all/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/cache/
    [ -f /tmp/all/drafter.safetensors ] && mv /tmp/all/drafter.safetensors /tmp/cache/
    lib=$(PYTHONPATH=/tmp/site python3 -c "import nvidia, os; print(':'.join(os.path.join(p, d, 'lib')
for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p, d, 'lib'))))") || exit 1
    printf '%s\n' 'export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DFLASH_CACHE=/tmp/cache' \
      "export LD_LIBRARY_PATH=$lib:\${LD_LIBRARY_PATH:-}" > /tmp/dflash-env.tmp
    . /tmp/dflash-env.tmp
    python3 -c "import mlx.core as mx; print(mx.default_device(), mx.__version__)" || exit 1
    python3 -m dflash.builtin || exit 1
    mv /tmp/dflash-env.tmp /tmp/dflash-env.sh
  fi
  d=assets/smollm2-135m-instruct-dflash/model.safetensors  # the drafter, where it travelled apart
  [ -f $d ] || cp /tmp/cache/drafter.safetensors $d || exit 1
  ;;
bench)
  T0=$(date +%s); budget=${2:?seconds}; shift 2
  bash "$0" setup || exit 1
  . /tmp/dflash-env.sh
  # CHECK=1: trees on MLX's CUDA backend, DFlash == target-only on tiny targets (a near-tie can
  # fail it there: tree rows are not bitwise their paths on the GPU)
  [ -n "${CHECK:-}" ] && timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree.py -k "lossless" 2>&1 | tail -n 3
  for t in ${TREES:-0 auto 16 32}; do
    left=$(( budget - $(date +%s) + T0 ))
    [ $left -lt 60 ] && { echo "out of time before tree $t"; break; }
    timeout $left python3 -m dflash bench --tree $t --out $OUT/h200-tree-$t.json "$@" 2>&1 |
      grep -v '^\[' | tail -n 12
  done
  ;;
esac
