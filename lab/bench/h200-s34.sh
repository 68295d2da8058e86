#!/usr/bin/env bash
# Thirty-fourth session, one H200 (after `bash lab/bench/h200.sh stash NN` for every chunk):
#   bash lab/bench/h200-s34.sh base|bench|eval|product
# base:  is target-only a fair baseline (ours against mlx-lm's stream_generate, order alternating); STREAM=1: ours on mlx-lm's generation stream too
# bench: the tree chosen on the device (device_tree.py: "64d", "64dc" compiled) against the host's
#        tree without the copy ("64-", the fair comparison) and as shipped ("64"), interleaved,
#        24 bench prompts x 128
# eval:  the same on 12 held-out prompts (2 a category of assets/prompts/eval.jsonl)
# product: the README's GPU command with mlx-lm's decoding as a second baseline
# Records in results/s34/.
set -uo pipefail
bash lab/bench/h200.sh setup || exit 1
. /tmp/dflash-env.sh
case ${1:?phase} in
base)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; nproc
  python3 lab/bench/baseline_check.py --prompts 3 --reps 4 ${STREAM:+--stream} 2>&1 | grep -v '^\[' | tee $OUT/baseline-check${STREAM:+-stream}.log ;;
bench)
  python3 lab/bench/planner_variants.py "${SETTINGS:-target,64-,64d,64dc,64}" 8 128 2>&1 | grep -v '^\[' > $OUT/ab-bench.log
  tail -n 6 $OUT/ab-bench.log ;;
eval)
  python3 lab/bench/planner_variants.py "${SETTINGS:-target,64-,64d,64dc,64}" 2 128 assets/prompts/eval.jsonl 2>&1 | grep -v '^\[' > $OUT/ab-eval.log
  tail -n 6 $OUT/ab-eval.log ;;
product)
  python3 -m dflash bench --max-tokens 128 --repeat 1 --tree 64 --baseline mlx-lm \
    --out $OUT/h200-s34-tree-64-baseline.json 2>&1 | grep -v '^\[' | tail -n 12 ;;
esac
