#!/usr/bin/env bash
# One warm H200 session for the tree work (2026-12-01, second session of the day): the phases the
# lead calls after lab/bench/h200.sh's `stash NN` calls (MLX's CUDA build + the GGUF),
# lab/markov-head/h200.sh's `stash 0|1` (the head's token files) and carrying .gpux/cpu (xeon.sh).
#   check            setup; the CUDA tree kernel's tests; trees lossless on tiny targets; costs
#                    of tree / chain passes with the kernel and with the masked call
#   parallel S       at once: the Markov head's training (GPU, cores 2-15, S seconds), the real
#                    pair on the host's Xeon pinned to cores 0-1 (lab/cpu/xeon.sh), and tau per
#                    tree temperature on validation prompts (GPU; tau only, timing not used)
#   final S [T]      the drafter (shipped, or with the trained head) with the higher tree-32 tau
#                    on validation prompts; then `bench` of TREES on the 24 bench prompts and tree
#                    auto / 32 on the 60 held-out prompts of assets/prompts/eval.jsonl
# Files come back through $OUT (8 at most a call): logs are tarred.
set -uo pipefail
phase=${1:?phase}
VAL="--prompts lab/train/valself30.jsonl --per-category 2"

case $phase in
check)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels.py 2>&1 | tail -n 5
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree.py -k "lossless" 2>&1 | tail -n 3
  timeout 150 python3 lab/bench/tree_kernel_probe.py --reps 15 > $OUT/kernel-probe.log 2>&1
  grep -v '^{"kernel"' $OUT/kernel-probe.log | tail -n 6
  ;;
parallel)
  budget=${2:?seconds}
  . /tmp/dflash-env.sh
  mkdir -p .gpux/cpu && cat /tmp/cpuparts/cpupart.* > .gpux/cpu/cpu.tar.xz  # carried in 2 parts
  ( env -u PYTHONPATH bash lab/cpu/xeon.sh bench $(( budget - 250 )) --prompts-limit 4 --repeat 1 \
      --max-tokens 96 > $OUT/xeon-call.log 2>&1 ) &
  ( sleep 60; taskset -c 2-15 timeout $(( budget - 90 )) python3 lab/bench/tree_temperature.py $VAL \
      --trees 32 --temperatures 0.7 0.85 1.0 1.2 1.5 --out $OUT/temperature.json > $OUT/temperature.log 2>&1 ) &
  taskset -c 2-15 bash lab/markov-head/h200.sh train $(( budget - 20 ))
  wait
  tail -n 30 $OUT/xeon-call.log; cat $OUT/temperature.log | grep tau
  (cd $OUT && tar cf logs.tar xeon-* temperature.log xeon-call.log train.log 2>/dev/null && rm -f xeon-*.log xeon-*.html temperature.log xeon-call.log train.log)
  ls $OUT
  ;;
final)
  T0=$(date +%s); budget=${2:?seconds}; temp=${3:-1.0}
  . /tmp/dflash-env.sh
  draft=""
  if [ -d /tmp/head/drafter ]; then  # keep the trained head only if its tree tau is higher
    for d in shipped /tmp/head/drafter; do
      arg=$([ $d = shipped ] || echo "--draft $d")
      timeout 150 python3 lab/bench/tree_temperature.py $VAL --trees 32 --temperatures $temp $arg | tail -n 1
    done | tee $OUT/head-ab.log
    python3 - <<'PY' && draft="--draft /tmp/head/drafter"
import json, sys
rows = [json.loads(l) for l in open(__import__("os").environ["OUT"] + "/head-ab.log") if l.startswith("{")]
sys.exit(0 if len(rows) == 2 and rows[1]["tau"] > rows[0]["tau"] else 1)
PY
  fi
  echo "drafter: ${draft:-shipped}; tree temperature $temp"
  sed -i "s/^TEMPERATURE = .*/TEMPERATURE = $temp  # set for this run/" dflash/tree.py
  for t in ${TREES:-auto 32 0}; do
    left=$(( budget - $(date +%s) + T0 - 150 ))
    [ $left -lt 60 ] && { echo "out of time before tree $t"; break; }
    timeout $left python3 -m dflash bench --tree $t --max-tokens 128 --repeat 1 $draft \
      --out $OUT/h200-tree-$t.json 2>&1 | grep -v '^\[' | tail -n 6
  done
  left=$(( budget - $(date +%s) + T0 - 10 ))
  timeout $left python3 -m dflash bench --tree auto --max-tokens 128 --repeat 1 $draft \
    --prompts assets/prompts/eval.jsonl --out $OUT/h200-eval-auto.json 2>&1 | grep -v '^\[' | tail -n 4
  (cd $OUT && rm -f *.html)
  ls $OUT
  ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
