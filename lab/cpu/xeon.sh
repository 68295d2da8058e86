#!/usr/bin/env bash
# The real embedded pair on the H200 host's Intel Xeon CPU, pinned to 2 cores: `python -m dflash
# bench --profile` at the defaults (DFlash vs target-only), MLX on the CPU with the product's
# BLAS choice (backend.setup: SkylakeX kernels, rows padded, on an AVX-512 Intel CPU).
#
# Here, once:  bash lab/cpu/xeon.sh pack     (-> .gpux/cpu/cpu.tar.xz, < 12 MB, ignored by git)
#   MLX's CPU wheels (mlx + mlx-cpu 0.32.4 cp312, mlx-lm 0.32.2) and Debian's OpenBLAS 0.3.21,
#   stripped, in one xz tarball. The device has no MLX CPU build; MLX's CUDA build would make
#   backend.setup() pick the GPU's attention path, so this process never sees it.
# There, after lab/bench/h200.sh's stash calls (they put the SmolLM2 GGUF in /tmp/chunks) or
# its bench call (it converts the model into /tmp/cache), one call, carry [".gpux/cpu"]:
#   bash lab/cpu/xeon.sh bench 300 [bench ARGS]     (default ARGS: $DEFAULT_ARGS below)
#   -> $OUT/xeon-cpu-2core.json (+ .log, .html), xeon-op-probe.log, xeon-rows-probe.log
#   (install ~30 s, op_probe.py <= 90 s, the bench <= 300 s, rows_probe.py <= 90 s)
# Then (or instead), one call, carry [".gpux/cpu"], no model needed:
#   bash lab/cpu/xeon.sh scores 400   -> $OUT/xeon-scores-probe.log (scores_probe.py, SkylakeX; ~2-3 min)
#   [TESTS=...] bash lab/cpu/xeon.sh exact -> $OUT/xeon-exact.log (the SkylakeX padded-rows test; needs the
#   model as for bench), xeon-rows64-probe.log (rows_probe.py: gate/up and lm_head unpadded, L <= 64,
#   1 and 2 threads; <= 2 min)
# Local check of everything but the cp312 wheels: NOINSTALL=1 OUT=/tmp/x bash lab/cpu/xeon.sh bench 120 ...
set -uo pipefail
phase=${1:?phase: pack | bench | scores | exact | eval | costs | product | suite}
SITE=/tmp/cpusite
OB=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3  # where dflash/backends/blas.py looks
MODEL=smollm2-135m-instruct-mlx-v1
DEFAULT_ARGS="--prompts-limit 2 --repeat 1"  # 6 prompts (2 per suite): ~200 s at ~90 ms a step

install() {  # the carried wheels and OpenBLAS (NOINSTALL=1: use this machine's own)
  export PYTHONUNBUFFERED=1 OPENBLAS_NUM_THREADS=2
  [ -n "${NOINSTALL:-}" ] && return 0
  rm -rf $SITE && mkdir -p $SITE && xz -dc .gpux/cpu/cpu.tar.xz | tar -C $SITE -xf - || return 1
  [ -e $OB ] || { mkdir -p ${OB%/*} && cp $SITE/libopenblasp-r0.3.21.so $OB; } || return 1
  # OpenBLAS needs libgfortran.so.5: the wheel's copy where the system has none
  if ! ldconfig -p | grep -q 'libgfortran.so.5 '; then
    mkdir -p $SITE/sys && ln -sf $SITE/mlx_cpu.libs/libgfortran-*.so.5* $SITE/sys/libgfortran.so.5 &&
      ln -sf $SITE/mlx_cpu.libs/libquadmath-*.so.0* $SITE/sys/libquadmath.so.0
    export LD_LIBRARY_PATH=$SITE/sys:${LD_LIBRARY_PATH:-}
  fi
  export PYTHONPATH=$SITE:$PWD  # not /tmp/site: its mlx-cuda-13 would count as a CUDA build
}

case $phase in
pack)
  set -e
  w=$(mktemp -d) && mkdir -p $w/site .gpux/cpu
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 -d $w/whl mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2
  for f in $w/whl/*.whl; do (cd $w/site && python3 -m zipfile -e $f .); done
  cp /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so $w/site/
  strip --strip-unneeded $w/site/mlx/lib/libmlx.so $w/site/libopenblasp-r0.3.21.so
  tar -C $w/site -cf - . | xz -9e -T0 > .gpux/cpu/cpu.tar.xz
  rm -rf $w && ls -l .gpux/cpu/cpu.tar.xz
  [ $(stat -c %s .gpux/cpu/cpu.tar.xz) -lt 12000000 ] || { echo "over 12 MB"; exit 1; }
  ;;
bench)
  budget=${2:?seconds for the bench}; shift 2
  args=${*:-$DEFAULT_ARGS}
  export DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache}
  install || exit 1
  mkdir -p $DFLASH_CACHE
  if [ ! -e $DFLASH_CACHE/$MODEL/model.safetensors ] && [ ! -e $DFLASH_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
    cat /tmp/chunks/chunk.* | tar -C $DFLASH_CACHE -xf - SmolLM2-135M-Instruct.Q4_1.gguf || exit 1
  fi
  cat /proc/cpuinfo | grep -m1 'model name'; nproc
  pin="taskset -c 0,1"
  $pin python3 -c "from dflash import backend; print(backend.setup()); import mlx.core as mx; print(mx.default_device(), mx.__version__)" || exit 1
  $pin python3 -m dflash.builtin || exit 1
  # the target's per-op table and plain step / verify times at a 128-token context (~30 s)
  timeout 90 $pin python3 lab/cpu/op_probe.py --ks 1,5,16 --reps 5 2>&1 | tee $OUT/xeon-op-probe.log
  echo "bench: $args, ${budget}s"
  timeout $budget $pin python3 -m dflash bench --profile --out $OUT/xeon-cpu-2core.json $args \
    > $OUT/xeon-cpu-2core.log 2>&1
  echo "rc $?"; grep -v '^\[' $OUT/xeon-cpu-2core.log | tail -n 40
  # which SkylakeX matmuls keep rows exact unpadded (pad 1) vs padded to 8: the next cut
  [ -z "${NO_ROWS:-}" ] && grep -q avx512f /proc/cpuinfo && timeout 90 $pin python3 lab/cpu/rows_probe.py --coretype SkylakeX --threads 2 --pads 1,8 --max-rows 24 \
    2>&1 | tee $OUT/xeon-rows-probe.log
  ;;
scores)
  # the product's attention-score calls (block, tree) vs the token alone
  budget=${2:?seconds for the probe}
  install || exit 1
  grep -q avx512f /proc/cpuinfo || { echo "no AVX-512 here: SkylakeX cannot run"; exit 1; }
  for ctx in 1:1100 1100:4100:7; do  # every context to 1099, then every 7th to 4099 (each <= budget/2)
    timeout $((budget / 2)) taskset -c 0,1 python3 lab/cpu/scores_probe.py SkylakeX --contexts $ctx --blocks 5,16 2>&1
  done | tee $OUT/xeon-scores-probe.log
  ;;
eval)  # held-out tau and speed of DFlash settings against target-only, interleaved prompt by prompt
  # (lab/bench/planner_variants.py; SETTINGS, default target,auto), on 24 held-out prompts x 128
  budget=${2:?seconds}
  install || exit 1
  export DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache}
  OUT=$OUT timeout $budget taskset -c 0,1 python3 lab/bench/planner_variants.py ${SETTINGS:-target,auto} 4 128 \
    assets/prompts/eval.jsonl 2>&1 | grep -v '^\[' > $OUT/xeon-eval.log
  tail -n 6 $OUT/xeon-eval.log
  ;;
costs)  # the planner's cost probe (policy.measure_costs, lab/bench/cost_noise.py) N times
  install || exit 1
  export DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache}
  taskset -c 0,1 python3 -m dflash.builtin > /dev/null || exit 1
  timeout ${3:-240} taskset -c 0,1 python3 lab/bench/cost_noise.py ${2:-2} 2>&1 | grep -v '^\[' | tee $OUT/xeon-costs.log
  ;;
product)
  # product_probe.py: random-weight SmolLM2-shaped target, rows alone vs in blocks / a tree
  # (bitwise) and pass costs at a 128-token context, SkylakeX; no model needed
  install || exit 1
  timeout ${2:-200} taskset -c 0,1 python3 lab/cpu/product_probe.py SkylakeX 2>&1 | tee $OUT/xeon-product-probe.log
  ;;
exact)
  # the product's exactness on SkylakeX: tests/test_backend.py's padded-rows test (a 16-token
  # block and a 12-node tree after 450 tokens, row by row against tokens fed alone; gate/up and
  # the head on the real rows since 2026-12-01), then gate/up and lm_head unpadded up to 64 rows
  install || exit 1
  grep -q avx512f /proc/cpuinfo || { echo "no AVX-512 here: SkylakeX cannot run"; exit 1; }
  DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache} timeout 240 taskset -c 0,1 python3 -m pytest -q -p no:cacheprovider \
    tests/test_backend.py -k skylakex 2>&1 | tail -n 5 | tee $OUT/xeon-exact.log
  for th in 1 2; do
    timeout 60 taskset -c 0,1 python3 lab/cpu/rows_probe.py --coretype SkylakeX --threads $th --pads 1 \
      --max-rows 64 --shapes gate/up,lm_head 2>&1
  done | tee $OUT/xeon-rows64-probe.log
  # TESTS="tests/a.py tests/b.py": more test files on the same 2 cores and MLX CPU build
  [ -n "${TESTS:-}" ] && DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache} timeout ${TESTS_S:-420} taskset -c 0,1 \
    python3 -m pytest -q -p no:cacheprovider $TESTS 2>&1 | tail -n 5 | tee $OUT/xeon-tests.log
  ;;
suite)
  # issue 56: the whole test suite on the Xeon's MLX CPU build, pytest-xdist workers of 2 BLAS
  # threads each (the image has pytest-xdist; it lacks gradio/plotly/fastapi/playwright, so the
  # files importing them are collection errors, listed in the log); needs the model as for bench
  install || exit 1
  export DFLASH_CACHE=${DFLASH_CACHE:-/tmp/cache}
  mkdir -p $DFLASH_CACHE
  [ -e $DFLASH_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf ] || [ -e $DFLASH_CACHE/$MODEL/model.safetensors ] ||
    cat /tmp/chunks/chunk.* | tar -C $DFLASH_CACHE -xf - SmolLM2-135M-Instruct.Q4_1.gguf || exit 1
  grep -m1 'model name' /proc/cpuinfo; nproc
  python3 -c "from dflash import backend; print(backend.setup())" || exit 1
  python3 -m dflash.builtin > /dev/null || exit 1
  timeout ${2:-480} python3 -m pytest -q -p no:cacheprovider -n ${WORKERS:-8} --continue-on-collection-errors \
    ${TESTS:-tests} 2>&1 | grep -vE '^\[|^$' > $OUT/xeon-suite.log
  tail -n 25 $OUT/xeon-suite.log
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
