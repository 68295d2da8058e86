#!/usr/bin/env bash
# The twenty-first session's device calls (after lab/bench/h200.sh's `stash NN` calls):
#   probe S   GPU: a tree cycle's phases (graph building and evaluation apart) at 16 and 64
#             nodes; then target-only and a tree of 64 with the target's pass queued for
#             evaluation every L layers (planner_variants.py "@L"), interleaved, 12 bench prompts.
#   copy S    GPU: the planner with and without its copy trigger, a tree of 64 (and queued every
#             10 layers), 12 bench prompts; then 24 held-out prompts: the default, 64, 32.
#   next S    lab/bench/h200-buffers.sh next: the default (min-of-runs probe) vs a tree of 64,
#             the per-shape planner patch, the same on a float32 target.
set -uo pipefail
phase=${1:?phase}
T0=$(date +%s); budget=${2:?seconds}
left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
pin="taskset -c 2-15"

case $phase in
probe)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  $pin timeout $(left 200) python3 lab/bench/cycle_phases.py --nodes 16 64 --cycles 20 2>&1 | tail -n 3
  $pin timeout $(left 10) python3 lab/bench/planner_variants.py ${VARIANTS:-target,target@5,64,64@5,64@10} 4 128 2>&1 | tail -n 6
  ls -R $OUT
  ;;
next)
  bash lab/bench/h200-buffers.sh next $(left 5)
  ;;
copy)  # the planner's copy trigger ("auto!": without it) against a tree of 64, order alternating
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  $pin timeout $(left 300) python3 lab/bench/planner_variants.py target,auto,auto!,64,64@10 4 128 2>&1 | tail -n 6
  $pin timeout $(left 10) python3 lab/bench/planner_variants.py target,auto,64,32 4 128 assets/prompts/eval.jsonl 2>&1 | tail -n 5
  ls -R $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
