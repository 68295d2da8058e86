#!/usr/bin/env bash
# One H200 call (2026-12-01, eighteenth session): the GPU side of the TreePlanner and host-side
# candidates changes, and the Intel side of issue 27 on the same host's Xeon, at once.
# Before it: lab/bench/h200.sh's `stash NN` calls (MLX's CUDA build + the GGUF), and two calls
# carrying .gpux/p0 and .gpux/p1: `mkdir -p /tmp/cpuparts && cp .gpux/p?/* /tmp/cpuparts/`.
#   run S   GPU, cores 2-15: setup; lab/bench/cycle_phases.py; bench tree auto on the 24 bench
#           prompts; tree auto and 32 on the 60 held-out prompts (assets/prompts/eval.jsonl).
#           Xeon, cores 0-1: lab/cpu/xeon.sh exact, then xeon.sh bench (6 prompts x 96 tokens).
# Files come back through $OUT (8 at most a call): logs are tarred.
set -uo pipefail
phase=${1:?phase}

case $phase in
run)
  T0=$(date +%s); budget=${2:?seconds}
  left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  mkdir -p .gpux/cpu && cat /tmp/cpuparts/cpupart.* > .gpux/cpu/cpu.tar.xz
  ( env -u PYTHONPATH -u LD_LIBRARY_PATH bash -c "bash lab/cpu/xeon.sh exact; \
      bash lab/cpu/xeon.sh bench $(( budget - 330 )) --prompts-limit 2 --repeat 1 --max-tokens 96" \
      > $OUT/xeon-call.log 2>&1 ) &
  pin="taskset -c 2-15"
  $pin timeout 120 python3 lab/bench/cycle_phases.py --nodes 8 32 64 2>&1 | tee $OUT/gpu-phases.log
  $pin timeout $(left 400) python3 -m dflash bench --max-tokens 128 --repeat 1 \
    --out $OUT/h200-planner2-tree-auto.json 2>&1 | grep -v '^\[' | tail -n 4
  for t in auto 32; do
    $pin timeout $(left 60) python3 -m dflash bench --tree $t --max-tokens 128 --repeat 1 \
      --prompts assets/prompts/eval.jsonl --out $OUT/h200-planner2-eval-$t.json 2>&1 | grep -v '^\[' | tail -n 4
  done
  wait
  grep -v '^\[' $OUT/xeon-call.log | tail -n 45
  (cd $OUT && rm -f *.html && tar cf logs.tar xeon-*.log gpu-phases.log && rm -f xeon-*.log gpu-phases.log)
  ls $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
