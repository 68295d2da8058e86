#!/usr/bin/env bash
# The twentieth session's device calls: MLX's CUDA command-buffer sizes swept on the GPU, and
# the Intel Xeon's step measured with nothing else on the host.
# Before them: lab/bench/h200.sh's `stash NN` calls, and two calls carrying .gpux/p0 and
# .gpux/p1: `mkdir -p /tmp/cpuparts && cp .gpux/p?/* /tmp/cpuparts/`.
#   xeon S     cores 0-1: lab/cpu/xeon.sh bench (op probe, then bench --profile, 6 prompts x 128)
#              while the GPU's setup (install, GGUF conversion) runs on cores 2-15, GPU idle.
#   sweep S    GPU: target-only and the default interleaved prompt by prompt
#              (planner_variants.py, 4 prompts a suite, 128 tokens), once per buffer setting in
#              $SIZES (ops:MB; default "100:100 300:300 1000:1000"), each its own process.
#   next S     GPU: what this session left open: the default (min-of-runs probe) vs tree 64;
#              the per-shape patch vs the shipped planner; the same on a float32 target.
#   bench S NAME [ARGS]   GPU: python -m dflash bench with ARGS into $OUT/h200-NAME.json; the
#              buffer sizes from $OPS / $MB when set (else dflash/cuda_env.py's).
set -uo pipefail
phase=${1:?phase}
T0=$(date +%s); budget=${2:?seconds}
left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
pin="taskset -c 2-15"

case $phase in
xeon)
  ( bash lab/bench/h200.sh setup > /tmp/setup.log 2>&1 ) &
  mkdir -p .gpux/cpu && cat /tmp/cpuparts/cpupart.* > .gpux/cpu/cpu.tar.xz
  NO_ROWS=1 env -u PYTHONPATH -u LD_LIBRARY_PATH bash lab/cpu/xeon.sh bench $(left 120) \
      --prompts-limit 2 --repeat 1 --max-tokens 128 > $OUT/xeon-call.log 2>&1
  grep -v '^\[' $OUT/xeon-call.log | tail -n 60
  wait; tail -n 3 /tmp/setup.log
  (cd $OUT && rm -f *.html && tar cf xeon-logs.tar *.log && rm -f *.log)
  ls $OUT
  ;;
sweep)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  for s in ${SIZES:-100:100 300:300 1000:1000}; do
    [ $(left 60) -lt 60 ] && { echo "out of time before $s"; break; }
    echo "== ops:MB $s"
    mkdir -p $OUT/ops${s%%:*}
    OUT=$OUT/ops${s%%:*} MLX_MAX_OPS_PER_BUFFER=${s%%:*} MLX_MAX_MB_PER_BUFFER=${s##*:} \
      $pin timeout $(left 30) python3 lab/bench/planner_variants.py target,auto 4 128 2>&1 | tail -n 2
  done
  ls -R $OUT
  ;;
bench)
  name=${3:?name}; shift 3
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  [ -n "${OPS:-}" ] && export MLX_MAX_OPS_PER_BUFFER=$OPS MLX_MAX_MB_PER_BUFFER=${MB:-$OPS}
  $pin timeout $(left 30) python3 -m dflash bench --max-tokens 128 --repeat 1 --out $OUT/h200-$name.json "$@" 2>&1 |
    grep -v '^\[' | tail -n 6
  rm -f $OUT/*.html
  ;;
next)  # what the twentieth session left to measure on a GPU (commands in the README there)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  # 1. the default with the min-of-runs cost probe against a fixed tree of 64
  $pin timeout $(left 400) python3 lab/bench/planner_variants.py target,auto,64 4 128 2>&1 | tail -n 3
  # 2. the per-shape cost ratios (lab/bench/planner-per-shape.patch) against the shipped planner
  cp dflash/policy.py lab/bench/policy_before.py && git apply lab/bench/planner-per-shape.patch &&
    $pin timeout $(left 200) python3 lab/bench/planner_ab.py lab/bench/policy_before.py 4 128 2>&1 | tail -n 3
  cp lab/bench/policy_before.py dflash/policy.py  # not git checkout: the device's .git may lag
  # 3. the float32 target, interleaved on its own (its baseline is faster: compare tok/s too)
  DTYPE=float32 $pin timeout $(left 10) python3 lab/bench/planner_variants.py target,auto,64 4 128 2>&1 | tail -n 3
  ls -R $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
