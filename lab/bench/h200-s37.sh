#!/usr/bin/env bash
# Thirty-seventh session (not run: no machine could be started in 18 calls). One H200
# machine, after `bash lab/bench/h200.sh stash NN` for every chunk, made with
# `CHUNK=48000000 DRAFTER=1 bash lab/bench/h200.sh chunk` while the drafter was out of the
# index; carry [".gpux/cpu"]:
#   bash lab/bench/h200-s37.sh exact|xeon|gpu|eval
# exact: the host's Intel Xeon (AVX-512), pinned to cores 0-1, MLX's CPU build (lab/cpu/xeon.sh
#        install): the padded-rows test on the real target (block + tree, target's SwiGLU and
#        softmax in numpy since the thirty-sixth session), then the CPU exactness, tree, host_ops
#        and host_draft test files
# xeon:  the README's CPU command on the Xeon, pinned to cores 0-1, with mlx-lm's decoding too
# gpu:   the README's GPU command (--tree 64 --baseline mlx-lm), the process on cores 2-15
# eval:  held-out tau and speed on the GPU: target-only, 32 and 64 nodes interleaved on the 24
#        held-out prompts of assets/prompts/eval.jsonl (4 a category) x 128
# With no MLX CUDA build needed (the Xeon alone): `ystash NN` calls, then `bash
# lab/bench/h200-s37.sh cpu-setup && bash lab/bench/h200-s37.sh exact`.
# Each call starts with `bash lab/bench/h200.sh setup` (MLX's CUDA build, the target converted,
# the drafter put back); two phases may then run at once (one on cores 0-1, one on 2-15):
# `bash lab/bench/h200.sh setup && { bash lab/bench/h200-s37.sh exact & bash lab/bench/h200-s37.sh
# gpu; wait; }`. Records in results/s37/.
set -uo pipefail
phase=${1:?phase}
case $phase in
ystash)  # the CPU-only lease: the GGUF and the drafter alone, in .gpuy/cNN (see cpu-setup)
  mkdir -p /tmp/ychunks && cp .gpuy/c$2/* /tmp/ychunks/ && ls /tmp/ychunks ;;
cpu-setup)  # without MLX's CUDA build: the target's GGUF into /tmp/cache, the drafter back
  # (here: tar -cf - SmolLM2-135M-Instruct.Q4_1.gguf drafter.safetensors | split -b 48000000 -d
  # into .gpuy/cNN, one chunk a call; carry [".gpux/cpu"] in the calls that test or bench)
  mkdir -p /tmp/cache && { [ -f /tmp/cache/drafter.safetensors ] || cat /tmp/ychunks/chunk.* | tar -C /tmp/cache -xf -; } || exit 1
  d=assets/smollm2-135m-instruct-dflash/model.safetensors; [ -f $d ] || cp /tmp/cache/drafter.safetensors $d ;;
exact)
  TESTS="tests/test_exact_cpu.py tests/test_tree.py tests/test_host_ops.py tests/test_host_draft.py" \
    bash lab/cpu/xeon.sh exact > $OUT/xeon-exact-s37.log 2>&1
  tail -n 12 $OUT/xeon-exact-s37.log ;;
xeon)
  bash lab/cpu/xeon.sh bench ${2:-540} --max-tokens 128 --repeat 1 --profile ${ARGS:-} > $OUT/xeon-bench-s37.log 2>&1
  mv $OUT/xeon-cpu-2core.json $OUT/xeon-s37.json 2>/dev/null; tail -n 25 $OUT/xeon-bench-s37.log ;;
gpu)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
  taskset -c 2-15 python3 -m dflash bench --max-tokens 128 --repeat 1 --tree 64 --baseline mlx-lm \
    --out $OUT/h200-s37-tree-64-baseline.json 2>&1 | grep -v '^\[' | tail -n 14 ;;
eval)
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh
  OUT=$OUT taskset -c 2-15 python3 lab/bench/planner_variants.py "${SETTINGS:-target,32,64}" 4 128 assets/prompts/eval.jsonl \
    2>&1 | grep -v '^\[' > $OUT/h200-s37-eval.log
  tail -n 8 $OUT/h200-s37-eval.log ;;
*) echo "unknown phase $phase"; exit 2 ;;
esac
