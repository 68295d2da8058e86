#!/usr/bin/env bash
# Issue 54's long-context slice on one GPU (forty-first session), after the stash calls of
# lab/long/gpu.sh (MLX's CUDA build, the GGUF and the drafter as chunks):
#   gen [SECONDS]    the target's answers: lab/long/train-long (398 prompts of 0.8-4k tokens), NAT
#                    (1500) natural prompts, and lab/long/dev.jsonl for validation only
#   train SECONDS    from the shipped drafter (base and Markov head together) on those answers,
#                    sequences up to 4,352 tokens; the drafter comes back split in $OUT
#   grow SECONDS     issue 54's next design: the shipped drafter (or INIT=DIR, the last slice's,
#                    carried in and joined) with GROW (3) more layers, identity at the start
#                    (`train --grow`), trained with the rest on those answers; a new schedule each
#                    slice (weights only travel); the drafter comes back split in $OUT;
#                    WINDOW=W: every layer sees its context's last W positions (0: all), GROW=0: none added
# NATDATA=F.npz.xz: the natural prompts' answers from a token file carried in (the 8,058 of
# lab/train/smollm2-selfdistill-natural.npz.xz, in git at 0473aa8^) instead of generating NAT
set -uo pipefail
phase=${1:?phase}
bash lab/bench/h200.sh setup > /dev/null || exit 1
. /tmp/dflash-env.sh
# training's compiled steps were timed with 100-op command buffers (135 ms a step, slice 2); the
# engine's default of 20 is for decoding (dflash/backends/cuda_env.py)
export MLX_MAX_OPS_PER_BUFFER=${MLX_MAX_OPS_PER_BUFFER:-100}
R=/tmp/long
DATA=()
if [ -n "${NATDATA:-}" ]; then
  mkdir -p $R && xz -dc "$NATDATA" > $R/data-natural.npz || exit 1
  DATA=(--data $R/data-train-long.npz $R/data-natural.npz)
fi
COMMON="--target builtin:smollm2-135m-instruct --out $R --target-dtype float32 --max-new-tokens 256
  --prompts lab/long/train-long.jsonl.xz lab/prompts/train-natural.jsonl.xz --max-prompts ${NAT:-1500}
  --gen-batch 64 --val-prompts lab/long/dev.jsonl"
case $phase in
gen)
  python3 -m dflash train $COMMON "${DATA[@]}" --generate-only --gen-time-limit ${2:-300} ;;
train)
  python3 -m dflash train $COMMON "${DATA[@]}" --init assets/smollm2-135m-instruct-dflash --markov-rank 128 \
    --markov-joint --dropout 0.1 --dtype bfloat16 --seq-len 4352 --batch-seqs 8 --anchors 64 --group-lengths \
    --lr 2e-4 --warmup 0.02 --steps 0 --train-seconds 0 --time-limit ${2:?seconds} \
    --save-every 200 --save-dtype float16
  ls -la $R
  split -b 15000000 -d $R/model.safetensors $OUT/model.part.
  cp $R/config.json $R/train_log.jsonl $OUT/ ;;
grow)
  python3 -m dflash train $COMMON "${DATA[@]}" --init ${INIT:-assets/smollm2-135m-instruct-dflash} \
    --grow ${GROW:-3} --markov-rank 128 --markov-joint --dropout 0.1 --dtype bfloat16 --seq-len 4352 \
    --batch-seqs 8 --anchors 64 --group-lengths --lr ${LR:-3e-4} --warmup 0.02 --steps 0 --train-seconds 0 \
    --time-limit ${2:?seconds} --save-every 200 --save-dtype float16 ${WINDOW:+--window $WINDOW}
  ls -la $R
  split -b 16000000 -d $R/model.safetensors $OUT/model.part.
  cp $R/config.json $R/train_log.jsonl $R/draft_vocab.npy $OUT/ ;;
esac
