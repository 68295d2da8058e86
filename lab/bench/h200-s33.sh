#!/usr/bin/env bash
# Thirty-third session, one H200 (after `bash lab/bench/h200.sh stash NN` for every chunk):
#   bash lab/bench/h200-s33.sh all
# Step 2 needs the change it measured, not kept: `git apply lab/bench/experiments/queue-ahead.patch`
# first (the engine's queue and planner_variants' "<" / ">" settings). Records in results/s33/.
# 1. is target-only a fair baseline there (ours against mlx-lm's stream_generate);
# 2. the next draft queued ahead (engine._DraftContext.queue), interleaved: "64<" without it,
#    "64" as the engine now runs, "64>" with the compacted caches queued too; bench and held-out;
# 3. the README's command, `bench --tree 64`, on today's code.
set -uo pipefail
T0=$(date +%s)
bash lab/bench/h200.sh setup || exit 1
. /tmp/dflash-env.sh
left() { echo $(( ${1:?} - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; nproc
timeout 120 python3 lab/bench/baseline_check.py --prompts 3 --reps 3 2>&1 | grep -v '^\[' | tee $OUT/baseline-check.log
timeout $(left 330) python3 lab/bench/planner_variants.py "target,64<,64,64>" 8 128 2>&1 | grep -v '^\[' > $OUT/ab-bench.log; tail -n 4 $OUT/ab-bench.log
timeout $(left 420) python3 lab/bench/planner_variants.py "target,64<,64" 2 128 assets/prompts/eval.jsonl 2>&1 | grep -v '^\[' > $OUT/ab-eval.log; tail -n 3 $OUT/ab-eval.log
timeout $(left 570) python3 -m dflash bench --max-tokens 128 --repeat 1 --tree 64 --out $OUT/h200-s33-tree-64.json 2>&1 | grep -v '^\[' | tail -n 8
