#!/usr/bin/env bash
# The nineteenth session's H200 calls: the context lookup (dflash/lookup.py) on the GPU, and
# the Intel bench after the score-call fix on the same host's Xeon, at once.
# Before them: lab/bench/h200.sh's `stash NN` calls (MLX's CUDA build + the GGUF), and two calls
# carrying .gpux/p0 and .gpux/p1: `mkdir -p /tmp/cpuparts && cp .gpux/p?/* /tmp/cpuparts/`.
#   run S     GPU, cores 2-15: setup; bench tree auto on the 24 bench prompts; tree auto and 32
#             on the 60 held-out prompts (assets/prompts/eval.jsonl), lookup on.
#             Xeon, cores 0-1: lab/cpu/xeon.sh bench, 18 prompts x 128 tokens.
#   off S     GPU: the same held-out runs with --no-lookup, then the 24 bench prompts likewise.
#   ab S      GPU (after setup, on a fresh machine too): target-only, default, default without
#             the lookup, interleaved prompt by prompt (lab/bench/planner_variants.py): the 24
#             bench prompts, then 4 a category of the held-out prompts, 128 tokens.
# Files come back through $OUT (8 at most a call): logs are tarred.
set -uo pipefail
phase=${1:?phase}
T0=$(date +%s); budget=${2:?seconds}
left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
pin="taskset -c 2-15"
gpu_bench() {  # NAME ARGS...: one bench into $OUT/h200-NAME.json, its last lines printed
  local name=$1; shift
  [ $(left 60) -lt 60 ] && { echo "out of time before $name"; return; }
  $pin timeout $(left 60) python3 -m dflash bench --max-tokens 128 --repeat 1 --out $OUT/h200-$name.json "$@" 2>&1 |
    grep -v '^\[' | tail -n 4
}

case $phase in
run)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  mkdir -p .gpux/cpu && cat /tmp/cpuparts/cpupart.* > .gpux/cpu/cpu.tar.xz
  ( env -u PYTHONPATH -u LD_LIBRARY_PATH bash lab/cpu/xeon.sh bench $(( budget - 200 )) \
      --prompts-limit 6 --repeat 1 --max-tokens 128 > $OUT/xeon-call.log 2>&1 ) &
  gpu_bench lookup-tree-auto
  gpu_bench lookup-eval-auto --prompts assets/prompts/eval.jsonl
  gpu_bench lookup-eval-32 --tree 32 --prompts assets/prompts/eval.jsonl
  wait
  grep -v '^\[' $OUT/xeon-call.log | tail -n 45
  (cd $OUT && rm -f *.html && tar cf logs.tar xeon-*.log && rm -f xeon-*.log)
  ls $OUT
  ;;
off)
  . /tmp/dflash-env.sh
  gpu_bench nolookup-eval-32 --tree 32 --no-lookup --prompts assets/prompts/eval.jsonl
  gpu_bench nolookup-eval-auto --no-lookup --prompts assets/prompts/eval.jsonl
  gpu_bench nolookup-tree-auto --no-lookup
  (cd $OUT && rm -f *.html)
  ;;
ab)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  $pin timeout $(left 200) python3 lab/bench/planner_variants.py target,auto,auto- 8 128 2>&1 | tail -n 3
  $pin timeout $(left 10) python3 lab/bench/planner_variants.py target,auto,auto- 4 128 assets/prompts/eval.jsonl 2>&1 | tail -n 3
  ls $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
