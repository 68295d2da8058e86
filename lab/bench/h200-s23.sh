#!/usr/bin/env bash
# The twenty-third session's device calls (after lab/bench/h200.sh's `stash NN` calls):
#   ab S          GPU: $SETTINGS (default target-only and a tree of 64) interleaved
#                 (planner_variants.py, $N (4) bench prompts a suite x 128), one process per run
#                 in $RUNS: "name" or "name:VAR=V,VAR=V"
#                 (MLP=<variant>: lab/bench/mlp_variants.py; MLX_* : MLX's own switches);
#                 e.g. RUNS=devtree SETTINGS="target,64,64-,64d" N=8: the tree chosen on the
#                 device (lab/bench/device_tree.py) against the shipped one without the copy;
#                 PROMPTS=assets/prompts/eval.jsonl: the first N of each of its categories instead.
#   bench S       GPU: `bench --tree 64` over the 24 bench prompts once per run in $RUNS (as
#                 above; DEVTREE=1: lab/bench/device_tree.py's trees), into $OUT/h200-s23-NAME.json.
set -uo pipefail
phase=${1:?phase}
T0=$(date +%s); budget=${2:?seconds}
left() { echo $(( budget - $(date +%s) + T0 - ${1:-15} )); }
pin="taskset -c 2-15"
envs() { tr ',' ' ' <<< "${1:-}"; }

$pin bash lab/bench/h200.sh setup || exit 1
. /tmp/dflash-env.sh
case $phase in
ab)
  for run in ${RUNS:-plain}; do
    name=${run%%:*}; vars=$( [ "$run" != "$name" ] && envs "${run#*:}" )
    [ $(left) -lt 60 ] && { echo "out of time before $name"; break; }
    mkdir -p $OUT/$name
    echo "== $name ${vars:-}"
    env OUT=$OUT/$name $vars $pin timeout $(left) python3 lab/bench/planner_variants.py ${SETTINGS:-target,64} ${N:-4} 128 ${PROMPTS:-} 2>&1 |
      grep -E "ratio|differ|Error|error" | tail -n 10
  done
  ;;
bench)
  for run in ${RUNS:-plain}; do
    name=${run%%:*}; vars=$( [ "$run" != "$name" ] && envs "${run#*:}" )
    [ $(left) -lt 60 ] && { echo "out of time before $name"; break; }
    echo "== $name ${vars:-}"
    env $vars $pin timeout $(left 5) python3 lab/bench/mlp_variants.py bench --tree 64 --max-tokens 128 \
      --repeat 1 --out $OUT/h200-s23-$name.json 2>&1 | grep -v '^\[' | tail -n 8
  done
  rm -f $OUT/*.html
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
