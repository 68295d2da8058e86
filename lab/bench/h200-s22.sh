#!/usr/bin/env bash
# The twenty-second session's device calls (after lab/bench/h200.sh's `stash NN` calls; for
# `xeon`, two more calls carrying .gpux/p0 and .gpux/p1: `mkdir -p /tmp/cpuparts && cp .gpux/p?/* /tmp/cpuparts/`):
#   parts S   GPU: where a tree verify pass's time goes by rows (verify_parts.py, 1..257 rows),
#             then a tree cycle's phases at 64 and 128 nodes (cycle_phases.py).
#   mlp S     GPU: verify_parts.py's MLP variants at 65 and 1 rows, then target-only and a tree of
#             64 interleaved (12 bench prompts), one process per MLP setting in $MLPS (default
#             "plain densedown": down as a dense matmul in passes of several rows; "fused": gate+up).
#   ab S      GPU: target-only, trees of 64 and 128 nodes interleaved (MAX_TREE lifted for the
#             run), 12 bench prompts; then `bench --tree 64` over the 24 bench prompts.
#   parts and ab start, if /tmp/cpuparts holds the CPU wheels and no run has started, the
#   Xeon's bench on cores 0-1 in the background (lab/cpu/xeon.sh bench, 6 prompts x 128 tokens,
#   into /tmp/xeonout); `ab` copies what it wrote so far into $OUT/xeon/.
set -uo pipefail
phase=${1:?phase}
T0=$(date +%s); budget=${2:?seconds}
left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
pin="taskset -c 2-15"

xeon_bg() {  # the Xeon's bench, once per machine, detached from this call
  [ -d /tmp/cpuparts ] && [ ! -d /tmp/xeonout ] || return 0
  mkdir -p /tmp/xeonout .gpux/cpu && cat /tmp/cpuparts/cpupart.* > .gpux/cpu/cpu.tar.xz
  OUT=/tmp/xeonout NO_ROWS=1 nohup env -u PYTHONPATH -u LD_LIBRARY_PATH bash lab/cpu/xeon.sh bench 500 \
    --prompts-limit 2 --repeat 1 --max-tokens 128 > /tmp/xeonout/xeon-call.log 2>&1 < /dev/null &
}

case $phase in
parts)
  $pin bash lab/bench/h200.sh setup || exit 1
  xeon_bg
  . /tmp/dflash-env.sh
  $pin timeout $(left 100) python3 lab/bench/verify_parts.py --rows 1 17 65 129 257 --reps 20 \
    --out $OUT/h200-verify-parts.json 2>&1 | tail -n 6
  $pin timeout $(left 5) python3 lab/bench/cycle_phases.py --nodes 64 128 --cycles 20 2>&1 | tail -n 2
  ;;
ab)
  $pin bash lab/bench/h200.sh setup || exit 1
  xeon_bg
  . /tmp/dflash-env.sh
  MAX_TREE=256 $pin timeout $(left 260) python3 lab/bench/planner_variants.py ${VARIANTS:-target,64,128} 4 128 2>&1 | tail -n 4
  $pin timeout $(left 10) python3 -m dflash bench --tree ${TREE:-64} --max-tokens 128 --repeat 1 \
    --out $OUT/h200-s22-tree-${TREE:-64}.json 2>&1 | grep -v '^\[' | tail -n 6
  rm -f $OUT/*.html
  [ -d /tmp/xeonout ] && mkdir -p $OUT/xeon && cp /tmp/xeonout/* $OUT/xeon/ && rm -f $OUT/xeon/*.html
  ls -R $OUT
  ;;
mlp)  # the MLP's share of a 65-row pass, part by part; then gate+up as one matmul, interleaved
  $pin bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  $pin timeout $(left 250) python3 lab/bench/verify_parts.py --rows 65 1 --reps 20 \
    --out $OUT/h200-verify-parts-mlp.json 2>&1 | tail -n 2
  for m in ${MLPS:-plain densedown}; do
    mkdir -p $OUT/$m
    OUT=$OUT/$m MLP=$m $pin timeout $(left 10) python3 lab/bench/planner_variants.py target,64 4 128 2>&1 | tail -n 2
  done
  ls -R $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
