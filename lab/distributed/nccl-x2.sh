#!/usr/bin/env bash
# Issue 26's benchmark on two H200s with NCCL (device kind nvidia-h200-x2). NOT RUN YET: the
# two-GPU kind was not lent in the session that wrote it, so it was checked only for syntax and
# its two pieces on the CPU (pass_costs.py under the ring backend; bench --distributed in
# tests/test_distributed.py).
#
# Here, once:  ../shared/gpu/pack-mlx-cuda.sh mlx-lm==0.32.2 && bash lab/bench/h200.sh chunk
# There, on nvidia-h200-x2, back to back:
#   call k (k = 0..N-1), carry [".gpux/cNN"]:  bash lab/bench/h200.sh stash NN
#   last call (timeout_s 600):                 bash lab/distributed/nccl-x2.sh 560
# Writes to $OUT: one-gpu-smollm2.json and nccl-x2-smollm2.json (bench: target-only vs DFlash on
# the embedded pair, alone and sharded over the two GPUs; a chain of 16 in both, so that the
# pass costs compare; TREE=auto for the planner's choice instead), passes-qwen3-8b-1gpu.json and
# passes-qwen3-8b-nccl-x2.json (a Qwen3-8B-shaped random bf16 target: ms per k-token pass,
# k = 1..32, and, sharded, the all_sum cost per pass). Extra ARGS go to both bench runs.
set -uo pipefail
T0=$(date +%s); budget=${1:?seconds}; shift
bash lab/bench/h200.sh setup || exit 1
. /tmp/dflash-env.sh
# MLX's CUDA wheel, unpacked with --target, has no mlx.launch script: its module does the same
LAUNCH=(python3 -c 'import sys; from mlx._distributed_utils.launch import main; sys.argv[0] = "mlx.launch"; sys.exit(main())'
        --backend nccl -n 2 --python python3 --)
left() { echo $(( budget - $(date +%s) + T0 )); }
nvidia-smi -L
python3 -c "import mlx.core as mx; print('nccl in this MLX build:', mx.distributed.is_available('nccl'))"
BENCH=(-m dflash bench --suite all --prompts-limit 4 --repeat 1 --max-tokens 128 ${TREE:+--tree $TREE} "$@")
[ -z "${TREE:-}" ] && BENCH+=(--tree 0 --block-size 16)
timeout "$(left)" python3 "${BENCH[@]}" --out "$OUT/one-gpu-smollm2.json" 2>&1 | grep -v '^\[' | tail -n 12
timeout "$(left)" "${LAUNCH[@]}" "${BENCH[@]}" --distributed nccl --out "$OUT/nccl-x2-smollm2.json" 2>&1 |
  grep -v '^\[' | tail -n 16
timeout "$(left)" python3 lab/distributed/pass_costs.py --out "$OUT/passes-qwen3-8b-1gpu.json" 2>&1 | tail -n 20
timeout "$(left)" "${LAUNCH[@]}" lab/distributed/pass_costs.py --distributed nccl \
  --out "$OUT/passes-qwen3-8b-nccl-x2.json" 2>&1 | tail -n 40
echo "done in $(( $(date +%s) - T0 )) s"
