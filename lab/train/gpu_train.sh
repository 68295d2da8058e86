#!/usr/bin/env bash
# The GPU runs that train assets/smollm2-135m-instruct-dflash (lab/train/gpu_train.md says how
# each phase was called). Run from the repo root on the device machine, phases back to back
# while it stays warm (/tmp survives between calls only then). Each call carries <= 64 MiB.
#   part1  carry .dtrain/a .dtrain/g1   MLX CUDA part 1, GGUF bytes 0..20M
#   part2  carry .dtrain/b .dtrain/g2   MLX CUDA part 2 + mlx-lm wheel, GGUF 20M..40M; install
#   part3  carry .dtrain/g3             GGUF rest -> convert -> answers to the natural prompts
#   part4  carry .dtrain/d              the drafter to start from + the first run's answers:
#                                       finish train.jsonl's answers, start training
#   part5                               resume training to the end of its schedule, ship
#   bench                               `python -m dflash bench` with the new drafter
#   convert carry .dtrain/g3 (after part1, part2): the target only, for benches on a fresh machine
#   peer    carry .dtrain/e .dtrain/p: bench a drafter directory against the z-lab peer
# The fourth run (nvidia-h200-x2; one process per GPU, CUDA_VISIBLE_DEVICES):
#   open    carry .dtrain/g3 (after part1, part2)   convert; every prompt answered again, with
#                                       sampled openings: seed 1 on GPU 0, seed 2 on GPU 1
#   cand    carry .dtrain/d             two candidates from the shipped drafter on all answers
#                                       (lr 4e-4 on GPU 0, 8e-4 on GPU 1), first part
#   pick    resume both to the end of their schedule; bring back the one with the higher
#           validation tau(walk), both logs and the new token files
# The fifth run (nvidia-h200-x2; one drafter trained data-parallel, a process per GPU, NCCL):
#   smoke   carry .dtrain/g3 (after part1, part2)   convert; an all-reduce over both GPUs
#   dp      carry .dtrain/d                         the shipped drafter trained on all answers
#   dpmore  resume to the end of the schedule; bring the drafter and the log back
#   bench   with .dtrain/p carried it also sets up the z-lab peer (`--peer zlab`)
#   knobs   carry .dtrain/e (after part1, part2, convert): the same bench with MLX's CUDA
#           command-buffer settings as shipped and raised (MLX_MAX_OPS_PER_BUFFER / _MB_)
# The sixth run (nvidia-h200-x2): two more answers per prompt, then the fifth run's recipe
#   probe   carry .dtrain/g3 (after part1, part2)   convert; the all-reduce; where a verify pass
#                                       spends its time (lab/bench/verify_cost.py)
#   open    with SEED0=3: openings seeded 3 (GPU 0) and 4 (GPU 1)
#   dp, dpmore  as above, on every open*.npz there; dpmore also brings the new token files back
#   final   the bench of the new drafter, our target-only against mlx-lm's stream_generate,
#           the drafter's pass in fp32 / bf16 / fp16
#   rows    carry .dtrain/e (after part1, part2, convert): the bench as shipped, then with the
#           verify pass's attention in calls of 3 query rows (DFLASH_VERIFY_ATTENTION_ROWS=3)
# The seventh run (nvidia-h200-x2):
#   rowsab  carry .dtrain/e .dtrain/o (after part1, part2, convert)  interleaved A/B of the
#           attention row chunks on GPU 0 (lab/bench/interleaved_ab.py rows / blocks) while
#           GPU 1 (then GPU 0) goes on answering train.jsonl with seeds 3 and 4 (SEED0=3)
#   bench   DRAFT=/tmp/e, with the chosen DFLASH_*_ATTENTION_ROWS in the environment
#   dp7     carry .dtrain/d (token files only): the shipped drafter (/tmp/e) trained on on
#           every answer data-parallel; brings back the drafter, logs and the new token files
# The eighth run (nvidia-h200-x2): prompts the target writes itself; a deeper candidate
#   self8   carry .dtrain/d .dtrain/o (after part1, part2, convert)  unpack every token file; each
#           GPU has the target write user turns (--write-self-prompts; seed 1 on GPU 0, 2 on
#           GPU 1) and answers them; brings the prompt and token files back
#   cand8   carry .dtrain/e   two candidates from the shipped drafter on every answer file: as
#           it is (GPU 0) and deepened to 8 layers (GPU 1, --grow-layers 8), first part
#   pick8   resume both to the end of their schedule, evaluate both on the held-out prompts (on
#           the GPU), bring back candidate 0 and both logs; `ret8` brings back candidate 1
# The ninth run (nvidia-h200-x2): the loss reads the target's whole distribution (--distill)
#   unpack9 carry .dtrain/d .dtrain/o .dtrain/s (after part1, part2, convert)  every token file
#   kd9     carry .dtrain/e   two candidates from the shipped drafter on every answer file,
#           validated on lab/prompts/val-self-3.jsonl: --distill 1 (GPU 0), 0.5 (GPU 1)
#   kd9more resume both to the end of their schedule; bring back both logs and candidate 0
#           (`ret8` brings back candidate 1). On a one-GPU machine: CANDS=0 (only --distill 1)
#           The trainers' --time-limit counts from their own start: give the call >= $1 + 40 s.
# The tenth run (nvidia-h200-x2): what the drafter sees (--add-taps)
#   unpack9 as above (after part1, part2, convert)
#   tap10   carry .dtrain/e   two candidates from the shipped drafter on every answer file, CE,
#           validated on val-self-3.jsonl, reading more target layers: GPU 0 adds the last
#           layer (29), GPU 1 adds 4,11,17,23,29 (10 taps)
#   tap10more  resume both to their schedule's end (or the call's limit)
#   tap10fin   resume; bench both (one per GPU); bring back logs, benches and candidate 0
#           (`ret8` brings back candidate 1); the held-out evaluations run on the CPU here
# Prompts people wrote (eleventh session, nvidia-h200-x2):
#   share   (after part1, part2, convert) answers to lab/prompts/train-sharegpt.jsonl.xz:
#           GPU 0 greedy, then openings seeded 2; GPU 1 openings seeded 1, then 3; token files back
# Prepared for the next run (not run yet; nvidia-h200-x2): the same plus those answers
#   unpack11  as unpack9, plus lab/train/smollm2-selfdistill-sharegpt.tar.xz (keep that file
#           and train.jsonl out of the tree for part2 and convert: 64 MiB)
#   cand11  carry .dtrain/e   two candidates from the shipped drafter on every answer file and
#           the ShareGPT answers, validated on val-sharegpt.jsonl, cross-entropy: the ShareGPT
#           answers once (GPU 0, 9 % of the sequences) and three times over (GPU 1, 24 %)
#   cand11more  resume both, then bring back both drafters and logs (7 files); `cand11fin`
#           resumes, benches both and brings back everything again. Run 2026-12-01 (twelfth
#           session), when cand11more did not yet bring anything back: the two-GPU kind was
#           withdrawn between cand11more and cand11fin and both drafters were lost with the machine
#   short11 carry .dtrain/e .dtrain/s (one H200, after part1, part2, convert): the shipped drafter
#           on the self-written + ShareGPT x 3 answers for one call; brings the drafter back
#   The three-times-over candidate again (thirteenth session, one H200; cand11 now brings back too):
#           part1, part2, convert, unpack11, then `CANDS=1 cand11 530 950` (stopped at step 3,758;
#           the machine then went back), and on a fresh one part1..unpack11 and
#           `INIT=.dtrain/e2 CANDS=1 cand11 530 455 --lr 6.2e-4` (.dtrain/e2: the drafter the first
#           call brought back; a new schedule from the lr it had reached); then
#           `DRAFT=/tmp/run/cand1 bench --suite all --max-tokens 128 --repeat 1 --out ...`
#   pair13  carry .dtrain/e (after part1, part2, convert): two trainers side by side on one GPU
#   Dropout (fourteenth session, one H200): candidate B's data and settings plus `--dropout 0.1`
#           on the drafter's residual branches: part1..unpack11, `CANDS=1 cand11 530 SECS --dropout
#           0.1`, `CANDS=1 cand11more 530 --dropout 0.1`, then the bench as above
set -uo pipefail
phase=$1
shift
OUT=${OUT:-/tmp/out}
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
RUN=/tmp/run
PROMPTS="lab/prompts/train-natural.jsonl.xz lab/prompts/train.jsonl.xz"
DATA="$RUN/data-natural.npz $RUN/data-train.npz"
T0=$(date +%s)

env_on() {
  export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DFLASH_CACHE=/tmp/cache
  export LD_LIBRARY_PATH=$(python3 -c "import nvidia,os;print(':'.join(os.path.join(p,d,'lib') for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p,d,'lib'))))"):${LD_LIBRARY_PATH:-}
}

quiet() { tr '\r' '\n' | grep -v '^\(training\|generating\|features\|evaluating\):'; }

train() {  # the run's fixed settings; the caller adds the schedule
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out $RUN --target-dtype float32 \
    --max-new-tokens 256 --gen-batch 1024 --seq-len 320 --batch-seqs 32 --anchors 32 \
    --dtype bfloat16 --cache-features --save-every 1000 --log-every 100 --lr 4e-4 \
    --draft-vocab 16384 "$@" 2>&1 | quiet
}

OPEN="$RUN/open1-natural.npz $RUN/open1-train.npz $RUN/open2-natural.npz $RUN/open2-train.npz"
SEED0=${SEED0:-1}  # the open phase seeds GPU g's openings with SEED0 + g
LRS=(4e-4 8e-4)
CANDS=${CANDS:-0 1}  # the candidates per_gpu runs; CANDS=0 on a one-GPU machine runs only the first
# SHARE_GPU=1: on a one-GPU machine run the candidates side by side on it, not in turn
per_gpu() {  # run "$@" once per GPU in parallel, GPU g with G=g; a one-GPU machine takes turns
  local n=$(nvidia-smi -L | wc -l) g
  for g in $CANDS; do
    if [ "$n" -ge 2 ]; then CUDA_VISIBLE_DEVICES=$g G=$g "$@" > $RUN/gpu$g.log 2>&1 &
    elif [ -n "${SHARE_GPU:-}" ]; then G=$g "$@" > $RUN/gpu$g.log 2>&1 &  # both on the one GPU
    else G=$g "$@" > $RUN/gpu$g.log 2>&1; fi
  done
  wait
  for g in $CANDS; do echo "--- GPU $g"; tr '\r' '\n' < $RUN/gpu$g.log | grep -v '^\(training\|generating\|features\|evaluating\):' | tail -25; done
}
open_answers() {  # $1: seconds of generation
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out $RUN --target-dtype float32 \
    --max-new-tokens 256 --gen-batch 1024 --prompts $PROMPTS \
    --data $RUN/open$((G + SEED0))-natural.npz $RUN/open$((G + SEED0))-train.npz \
    --generate-only --gen-time-limit "$1" --opening 8 --opening-temp 0.8 --opening-seed $((G + SEED0))
}
candidate() {  # the fourth run's settings: no feature cache (3 x 44k answers would need 240 GB)
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out $RUN/cand$G \
    --target-dtype float32 --seq-len 320 --batch-seqs 32 --anchors 32 --dtype bfloat16 \
    --save-every 1000 --log-every 100 --lr ${LRS[$G]} --draft-vocab 16384 \
    --prompts $PROMPTS $PROMPTS $PROMPTS --data $DATA $OPEN --gen-time-limit 0 "$@"
}

as_rank() {  # $1: rank = GPU of 2; run the rest there, NCCL rendezvous on this host
  CUDA_VISIBLE_DEVICES=$1 MLX_RANK=$1 MLX_WORLD_SIZE=2 NCCL_HOST_IP=127.0.0.1 NCCL_PORT=12345 \
    NCCL_NVLS_ENABLE=0 "${@:2}"
}
dp_train() {  # one process per GPU, one drafter trained data-parallel, on every answer file there
  local g pids=() data=$DATA prompts="$PROMPTS" n
  for n in 1 2 3 4 5 6; do
    [ -f $RUN/open$n-natural.npz ] && data="$data $RUN/open$n-natural.npz $RUN/open$n-train.npz" \
      && prompts="$prompts $PROMPTS"
  done
  for g in 0 1; do
    as_rank $g python3 -m dflash.train --target builtin:smollm2-135m-instruct \
      --out $RUN/dp --target-dtype float32 --seq-len 320 --batch-seqs 32 --anchors 32 \
      --dtype bfloat16 --save-every 1000 --log-every 100 --lr 8e-4 --draft-vocab 16384 \
      --prompts $prompts --data $data --gen-time-limit 0 \
      --distributed nccl "$@" > $RUN/dp$g.log 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  for g in 0 1; do echo "--- rank $g"; tr '\r' '\n' < $RUN/dp$g.log | grep -v '^\(training\|features\|evaluating\):' | tail -20; done
}

every_answer() {  # the caller's data / prompts: every answer file there, with its prompt files
  local n
  data=$DATA prompts="$PROMPTS"
  for n in 1 2 3 4; do data="$data $RUN/open$n-natural.npz $RUN/open$n-train.npz" prompts="$prompts $PROMPTS"; done
  for n in 0 1; do data="$data $RUN/self$n.npz" prompts="$prompts $RUN/self$n.jsonl.xz"; done
}
cand_train() {  # $1: the drafter's run folder; the candidates' fixed settings, then "${@:2}"
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out "$1" \
    --target-dtype float32 --seq-len 320 --batch-seqs 32 --anchors 32 --dtype bfloat16 \
    --save-every 1000 --log-every 100 --lr 8e-4 --draft-vocab 16384 "${@:2}"
}
self_answers() {  # $1: seconds of generation (writing the prompts included); $2: prompts
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out $RUN --target-dtype float32 \
    --max-new-tokens 256 --gen-batch 1024 --write-self-prompts $RUN/self$G.jsonl.xz \
    --self-prompts "$2" --self-prompt-seed $((G + 1)) --prompts $RUN/self$G.jsonl.xz \
    --data $RUN/self$G.npz --generate-only --gen-time-limit "$1"
}
candidate8() {  # every answer file there; GPU 1 deepens its drafter to 8 layers
  local data prompts grow=()
  every_answer
  [ "$G" = 1 ] && grow=(--grow-layers 8)
  [ -n "${STEPS:-}" ] && grow+=(--steps $(echo $STEPS | cut -d, -f$((G + 1))))  # STEPS=a,b: new ends
  cand_train $RUN/cand$G \
    --prompts $prompts --data $data --gen-time-limit 0 "${grow[@]}" "$@"
}
DISTILL=(1.0 0.5)
candidate9() {  # every answer file there; GPU g distills with weight DISTILL[g]
  local data prompts
  every_answer
  cand_train $RUN/cand$G --distill ${DISTILL[$G]} \
    --val-prompts lab/prompts/val-self-3.jsonl \
    --prompts $prompts --data $data --gen-time-limit 0 "$@"
}
TAPS=(29 4,11,17,23,29)
candidate10() {  # every answer file there; GPU g's drafter also reads target layers TAPS[g]
  local data prompts taps=()
  every_answer
  [[ " $* " == *" --init "* ]] && taps=(--add-taps ${TAPS[$G]})
  cand_train $RUN/cand$G \
    --val-prompts lab/prompts/val-self-3.jsonl \
    --prompts $prompts --data $data --gen-time-limit 0 "${taps[@]}" "$@"
}
bench_cand() {  # $1: run name; $2: folder of the JSON
  python3 -m dflash bench --draft $RUN/cand$G --suite all --max-tokens 128 --repeat 1 \
    --out $2/h200-smollm2-$1-cand$G.json | tail -8
}
share_answers() {  # $1: the second (date +%s) by which every generation has stopped
  local seeds=(0 2) s left
  [ "$G" = 1 ] && seeds=(1 3)
  for s in "${seeds[@]}"; do
    left=$(( $1 - $(date +%s) - 20 ))
    [ $left -lt 20 ] && break
    python3 -m dflash.train --target builtin:smollm2-135m-instruct --out $RUN --target-dtype float32 \
      --max-new-tokens 256 --gen-batch 1024 --prompts lab/prompts/train-sharegpt.jsonl.xz \
      --data $RUN/share$s.npz --generate-only --gen-time-limit $left \
      $([ $s -gt 0 ] && echo --opening 8 --opening-temp 0.8 --opening-seed $s)
  done
}
SHAREW=(${SHAREW:-1 3})  # SHAREW="3 3": both GPUs read the ShareGPT answers three times over
candidate11() {  # every answer file there, ShareGPT's SHAREW[g] times over on GPU g
  local data prompts n r drop=()
  [ -n "${DROPS:-}" ] && drop=(--dropout $(echo $DROPS | cut -d, -f$((G + 1))))  # DROPS=a,b: per GPU
  every_answer
  for r in $(seq ${SHAREW[$G]}); do
    for n in 0 1 2 3; do data="$data $RUN/share$n.npz" prompts="$prompts lab/prompts/train-sharegpt.jsonl.xz"; done
  done
  cand_train $RUN/cand$G \
    --val-prompts lab/prompts/val-sharegpt.jsonl \
    --prompts $prompts --data $data --gen-time-limit 0 "${drop[@]}" "$@"
}
eval8() {
  python3 -m dflash.train --eval --out $RUN/eval$G --draft $RUN/cand$G && cp $RUN/eval$G/eval.json $RUN/eval-cand$G.json
}

bring_back() {  # the candidates' drafters, logs and any benches, as they are now: 7 files for two
  local g b
  rm -rf $OUT/run && mkdir -p $OUT/run
  for g in $CANDS; do
    cp $RUN/cand$g/train_log.jsonl $RUN/log-cand$g.jsonl && cp $RUN/gpu$g.log $RUN/train$g.log
    b=$(cd $RUN && ls h200-smollm2-run11-cand$g.json 2>/dev/null)
    tar -C $RUN -rf $OUT/run/meta.tar cand$g/config.json cand$g/draft_vocab.npy log-cand$g.jsonl train$g.log $b
    split -b 15000000 $RUN/cand$g/model.safetensors $OUT/run/cand$g.safetensors.part.
  done
  ls -la $OUT/run
}
start_cands() {  # $1: candidate function; $2: seconds this call may run; $3: seconds of steps
  env_on
  mkdir -p /tmp/e && cp ${INIT:-.dtrain/e}/* /tmp/e/  # INIT: another drafter to start from
  per_gpu $1 --init /tmp/e --steps 0 --train-seconds "$3" --time-limit $(( $2 - $(date +%s) + T0 )) "${@:4}"
}
resume_cands() {  # $1: candidate function; $2: seconds this call may run; more: trainer flags
  env_on
  per_gpu $1 --resume --time-limit $(( $2 - $(date +%s) + T0 )) "${@:3}"
}

case $phase in
part1)
  mkdir -p /tmp/parts /tmp/gguf
  cp .dtrain/a/* /tmp/parts/ && cp .dtrain/g1/gguf.part.1 /tmp/gguf/
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  ls -la /tmp/parts /tmp/gguf
  ;;
part2)
  cp .dtrain/g2/gguf.part.2 /tmp/gguf/
  mkdir -p /tmp/site && cat /tmp/parts/* .dtrain/b/mlx-cuda.part.* | xz -d | tar -C /tmp/site -xf - &&
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .dtrain/b/*.whl || exit 1
  env_on
  python3 -c "import mlx.core as mx; print(mx.default_device(), mx.__version__)"
  ;;
part3)  # $1: seconds of generation
  env_on
  mkdir -p /tmp/cache $RUN
  cat /tmp/gguf/gguf.part.1 /tmp/gguf/gguf.part.2 .dtrain/g3/gguf.part.3 > /tmp/cache/$GGUF
  python3 -m dflash.builtin || exit 1
  train --prompts lab/prompts/train-natural.jsonl.xz --data $RUN/data-natural.npz \
    --generate-only --gen-time-limit "$1"
  echo "data done at $(( $(date +%s) - T0 ))s"
  ;;
part4)  # $1: seconds of generation; $2: seconds of training planned over part4 + part5
  env_on
  xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
  train --prompts $PROMPTS --data $DATA --generate-only --gen-time-limit "$1"
  echo "data done at $(( $(date +%s) - T0 ))s"
  train --prompts $PROMPTS --data $DATA --gen-time-limit 0 --init .dtrain/d/drafter \
    --steps 0 --train-seconds "$2" --time-limit $(( 585 - $(date +%s) + T0 ))
  mkdir -p $OUT/run && cp $RUN/train_log.jsonl $OUT/run/
  ;;
part5)  # $1: seconds this call may run
  env_on
  train --prompts $PROMPTS --data $DATA --gen-time-limit 0 --resume --time-limit "$1"
  mkdir -p $OUT/run
  cp $RUN/config.json $RUN/train_log.jsonl $RUN/draft_vocab.npy $OUT/run/
  split -b 15000000 $RUN/model.safetensors $OUT/run/model.safetensors.part.
  xz -T0 -3 -c $RUN/data-natural.npz > $OUT/run/data-natural.npz.xz
  xz -T0 -3 -c $RUN/data-train.npz | split -b 15000000 - $OUT/run/data-train.npz.xz.part.
  ls -la $OUT/run
  ;;
convert)  # carry .dtrain/g3: the target only (for benches on a fresh machine)
  env_on
  mkdir -p /tmp/cache
  cat /tmp/gguf/gguf.part.1 /tmp/gguf/gguf.part.2 .dtrain/g3/gguf.part.3 > /tmp/cache/$GGUF
  python3 -m dflash.builtin || exit 1
  ;;
peer)  # carry .dtrain/e (a drafter directory) .dtrain/p (the z-lab peer's model_mlx.py)
  env_on
  mkdir -p /tmp/cache/peers/zlab-dflash-0.1.0 && cp .dtrain/p/model_mlx.py /tmp/cache/peers/zlab-dflash-0.1.0/
  python3 -m dflash bench --draft .dtrain/e --peer zlab "$@"
  ;;
open)  # $1: seconds of generation
  env_on
  mkdir -p /tmp/cache $RUN
  [ -f /tmp/cache/$GGUF ] || cat /tmp/gguf/gguf.part.1 /tmp/gguf/gguf.part.2 .dtrain/g3/gguf.part.3 > /tmp/cache/$GGUF
  python3 -m dflash.builtin || exit 1
  per_gpu open_answers "$1"
  ls -la $RUN
  ;;
cand)  # $1: seconds this call may run; $2: seconds of training steps over cand + pick
  env_on
  xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
  xz -dc .dtrain/d/smollm2-selfdistill-natural.npz.xz > $RUN/data-natural.npz
  per_gpu candidate --init .dtrain/d/drafter --steps 0 --train-seconds "$2" \
    --time-limit $(( $1 - $(date +%s) + T0 ))
  ;;
pick)  # $1: seconds this call may run
  env_on
  per_gpu candidate --resume --time-limit "$1"
  best=$(python3 -c "
import json, sys
def last(g):
    v = [r for r in map(json.loads, open(f'$RUN/cand{g}/train_log.jsonl')) if r.get('split') == 'val']
    return v[-1]['tau_walk'] if v else 0
t = [last(0), last(1)]
print(int(t[1] > t[0]), *t, file=sys.stderr); print(int(t[1] > t[0]))")
  echo "picked candidate $best (lr ${LRS[$best]})"
  mkdir -p $OUT/run
  cp $RUN/cand0/train_log.jsonl $RUN/log-cand0.jsonl && cp $RUN/cand1/train_log.jsonl $RUN/log-cand1.jsonl
  tar -C $RUN -cf $OUT/run/meta.tar cand$best/config.json cand$best/draft_vocab.npy \
    cand$best/train_log.jsonl log-cand0.jsonl log-cand1.jsonl gpu0.log gpu1.log
  split -b 15000000 $RUN/cand$best/model.safetensors $OUT/run/model.safetensors.part.
  tar -C $RUN -cf - open1-natural.npz open1-train.npz open2-natural.npz open2-train.npz | xz -T0 -3 \
    | split -b 15000000 - $OUT/run/open.tar.xz.part.
  ln -sfn cand$best $RUN/best
  ls -la $OUT/run
  ;;
bench)
  env_on
  if [ -d .dtrain/p ]; then
    mkdir -p /tmp/cache/peers/zlab-dflash-0.1.0 && cp .dtrain/p/model_mlx.py /tmp/cache/peers/zlab-dflash-0.1.0/
  fi
  python3 -m dflash bench --draft ${DRAFT:-$RUN} "$@"
  ;;
smoke)  # carry .dtrain/g3 (after part1, part2): the target, then an all-reduce over both GPUs
  env_on
  mkdir -p /tmp/cache $RUN
  cat /tmp/gguf/gguf.part.1 /tmp/gguf/gguf.part.2 .dtrain/g3/gguf.part.3 > /tmp/cache/$GGUF
  python3 -m dflash.builtin || exit 1
  for g in 0 1; do
    as_rank $g timeout 120 python3 -c "
import mlx.core as mx
w = mx.distributed.init(strict=True, backend='nccl')
x = mx.distributed.all_sum(mx.ones(4) * (w.rank() + 1))
print('rank', w.rank(), 'of', w.size(), x.tolist(), mx.default_device())" &
  done
  wait
  ;;
knobs)  # carry .dtrain/e (a drafter directory); "$@": bench arguments
  env_on
  python3 -m dflash bench --draft .dtrain/e --out $OUT/knobs-default.json "$@" | tail -6
  MLX_MAX_OPS_PER_BUFFER=100 MLX_MAX_MB_PER_BUFFER=100 \
    python3 -m dflash bench --draft .dtrain/e --out $OUT/knobs-ops100.json "$@" | tail -6
  ;;
dp)  # carry .dtrain/d; $1: seconds this call may run; $2: seconds of training steps over dp + dpmore
  env_on
  xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
  xz -dc .dtrain/d/smollm2-selfdistill-natural.npz.xz > $RUN/data-natural.npz
  tar -C $RUN -xJf .dtrain/d/smollm2-selfdistill-open.tar.xz
  dp_train --init .dtrain/d/drafter --steps 0 --train-seconds "$2" \
    --time-limit $(( $1 - $(date +%s) + T0 ))
  ;;
dpmore)  # $1: seconds this call may run; more arguments go to train (e.g. --steps N)
  env_on
  dp_train --resume --time-limit "$1" "${@:2}"
  mkdir -p $OUT/run
  cp $RUN/dp/config.json $RUN/dp/draft_vocab.npy $RUN/dp/train_log.jsonl $RUN/dp0.log $RUN/dp1.log $OUT/run/
  split -b 15000000 $RUN/dp/model.safetensors $OUT/run/model.safetensors.part.
  new=$(cd $RUN && ls open[3-9]-*.npz 2>/dev/null)
  [ -n "$new" ] && tar -C $RUN -cf - $new | xz -T0 -3 | split -b 15000000 - $OUT/run/open2.tar.xz.part.
  ls -la $OUT/run
  ;;
probe)  # carry .dtrain/g3 (after part1, part2)
  bash $0 smoke
  env_on
  python3 lab/bench/verify_cost.py --out $OUT/verify-cost.json
  ;;
rows)  # carry .dtrain/e; "$@": bench arguments
  env_on
  python3 -m dflash bench --draft .dtrain/e --profile --out $OUT/rows-off.json "$@" | tail -9
  DFLASH_VERIFY_ATTENTION_ROWS=3 python3 -m dflash bench --draft .dtrain/e --profile \
    --out $OUT/rows-3.json "$@" | tail -9
  ;;
rowsab)  # carry .dtrain/e .dtrain/o; $1: seconds this call may run
  env_on
  mkdir -p $RUN /tmp/e && cp .dtrain/e/* /tmp/e/ && tar -C $RUN -xJf .dtrain/o/smollm2-selfdistill-open2.tar.xz
  gen_until=$(( T0 + $1 - 45 ))  # each generation stops starting batches 45 s before the end
  (CUDA_VISIBLE_DEVICES=1 G=0 open_answers $(( gen_until - $(date +%s) )) > $RUN/gen-a.log 2>&1) &
  ab() { CUDA_VISIBLE_DEVICES=0 timeout 150 python3 lab/bench/interleaved_ab.py "$@"; }
  ab rows 0 3 --draft /tmp/e > $OUT/ab-rows-0-3.json; tail -4 $OUT/ab-rows-0-3.json
  ab rows 3 3,3 --draft /tmp/e > $OUT/ab-rows-3-33.json; tail -4 $OUT/ab-rows-3-33.json
  DFLASH_VERIFY_ATTENTION_ROWS=3 DFLASH_DRAFT_ATTENTION_ROWS=3 ab blocks 16 8 --draft /tmp/e \
    > $OUT/ab-rows33-blocks-16-8.json; tail -4 $OUT/ab-rows33-blocks-16-8.json
  left=$(( gen_until - $(date +%s) ))
  [ $left -gt 40 ] && (CUDA_VISIBLE_DEVICES=0 G=1 open_answers $left > $RUN/gen-b.log 2>&1)
  wait
  for f in $RUN/gen-a.log $RUN/gen-b.log; do [ -f $f ] && tr '\r' '\n' < $f | grep -v '^generating:' | tail -4; done
  ls -la $RUN
  ;;
dp7)  # carry .dtrain/d; $1: seconds this call may run; $2: seconds of training steps
  env_on
  xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
  xz -dc .dtrain/d/smollm2-selfdistill-natural.npz.xz > $RUN/data-natural.npz
  tar -C $RUN -xJf .dtrain/d/smollm2-selfdistill-open.tar.xz
  dp_train --init /tmp/e --steps 0 --train-seconds "$2" --time-limit $(( $1 - 75 - $(date +%s) + T0 ))
  mkdir -p $OUT/run
  tar -C $RUN -cf $OUT/run/meta.tar dp/config.json dp/draft_vocab.npy dp/train_log.jsonl dp0.log dp1.log
  split -b 15000000 $RUN/dp/model.safetensors $OUT/run/model.safetensors.part.
  tar -C $RUN -cf - open3-natural.npz open3-train.npz open4-natural.npz open4-train.npz | xz -T0 -3 \
    | split -b 15000000 - $OUT/run/open2.tar.xz.part.
  ls -la $OUT/run
  ;;
self8)  # carry .dtrain/d .dtrain/o; $1: seconds of generation; $2: prompts each GPU writes
  env_on
  mkdir -p $RUN
  (xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
   xz -dc .dtrain/d/smollm2-selfdistill-natural.npz.xz > $RUN/data-natural.npz
   tar -C $RUN -xJf .dtrain/d/smollm2-selfdistill-open.tar.xz
   tar -C $RUN -xJf .dtrain/o/smollm2-selfdistill-open2.tar.xz) &
  per_gpu self_answers "$1" "$2"
  wait
  tar -C $RUN -cf - self0.jsonl.xz self1.jsonl.xz self0.npz self1.npz | xz -T0 -3 \
    | split -b 15000000 - $OUT/self.tar.xz.part.
  ls -la $RUN $OUT
  ;;
cand8)  # carry .dtrain/e; $1: seconds this call may run; $2: seconds of training steps
  env_on
  mkdir -p /tmp/e && cp .dtrain/e/* /tmp/e/
  per_gpu candidate8 --init /tmp/e --steps 0 --train-seconds "$2" --time-limit $(( $1 - $(date +%s) + T0 ))
  ;;
pick8)  # $1: seconds of training this call may run before the evaluations
  env_on
  per_gpu candidate8 --resume --time-limit "$1"
  per_gpu eval8
  mkdir -p $OUT/run
  for g in 0 1; do cp $RUN/cand$g/train_log.jsonl $RUN/log-cand$g.jsonl; done
  tar -C $RUN -cf $OUT/run/meta.tar cand0/config.json cand0/draft_vocab.npy cand1/config.json \
    cand1/draft_vocab.npy log-cand0.jsonl log-cand1.jsonl eval-cand0.json eval-cand1.json gpu0.log gpu1.log
  split -b 15000000 $RUN/cand0/model.safetensors $OUT/run/cand0.safetensors.part.
  ls -la $OUT/run
  ;;
unpack9)
  mkdir -p $RUN
  xz -dc .dtrain/d/smollm2-selfdistill-data.npz.xz > $RUN/data-train.npz
  xz -dc .dtrain/d/smollm2-selfdistill-natural.npz.xz > $RUN/data-natural.npz
  for f in .dtrain/d/smollm2-selfdistill-open.tar.xz .dtrain/o/smollm2-selfdistill-open2.tar.xz \
    .dtrain/s/smollm2-selfdistill-self.tar.xz; do tar -C $RUN -xJf $f; done
  ls -la $RUN
  ;;
kd9)  # carry .dtrain/e; $1: seconds this call may run; $2: seconds of training steps
  start_cands candidate9 "$1" "$2"
  ;;
kd9more)  # $1: seconds this call may run
  resume_cands candidate9 "$1"
  mkdir -p $OUT/run
  for g in $CANDS; do
    cp $RUN/cand$g/train_log.jsonl $RUN/log-cand$g.jsonl
    tar -C $RUN -rf $OUT/run/meta.tar cand$g/config.json cand$g/draft_vocab.npy log-cand$g.jsonl gpu$g.log
  done
  split -b 15000000 $RUN/cand0/model.safetensors $OUT/run/cand0.safetensors.part.
  ls -la $OUT/run
  ;;
tap10)  # carry .dtrain/e; $1: seconds this call may run; $2: seconds of training steps
  start_cands candidate10 "$1" "$2"
  ;;
tap10more)  # $1: seconds this call may run
  resume_cands candidate10 "$1"
  ;;
tap10fin)  # $1: seconds of training this call may run before the benches
  resume_cands candidate10 "$1"
  for g in $CANDS; do
    cp $RUN/cand$g/train_log.jsonl $RUN/log-cand$g.jsonl && cp $RUN/gpu$g.log $RUN/train$g.log
  done
  mkdir -p $OUT/run
  per_gpu bench_cand run10 $OUT/run
  for g in $CANDS; do
    tar -C $RUN -rf $OUT/run/meta.tar cand$g/config.json cand$g/draft_vocab.npy log-cand$g.jsonl train$g.log
  done
  split -b 15000000 $RUN/cand0/model.safetensors $OUT/run/cand0.safetensors.part.
  ls -la $OUT/run
  ;;
share)  # $1: seconds this call may run
  env_on
  mkdir -p $RUN
  per_gpu share_answers $(( T0 + $1 - 20 ))
  tar -C $RUN -cf - $(cd $RUN && ls share*.npz) | xz -T0 -3 | split -b 15000000 - $OUT/share.tar.xz.part.
  ls -la $RUN $OUT
  ;;
unpack11)
  bash $0 unpack9 && tar -C $RUN -xJf lab/train/smollm2-selfdistill-sharegpt.tar.xz && ls -la $RUN
  ;;
cand11)  # carry .dtrain/e; $1: seconds this call may run; $2: seconds of training steps
  start_cands candidate11 "$1" "$2" "${@:3}"  # more: trainer flags (the last one wins)
  bring_back
  ;;
cand11more)  # $1: seconds this call may run; brings both drafters back (the machine may not stay);
  # more: trainer flags, as given to cand11 (a resumed run takes its settings from the command)
  resume_cands candidate11 "$1" "${@:2}"
  bring_back
  ;;
cand11fin)  # $1: seconds of training this call may run before the benches; more: trainer flags
  resume_cands candidate11 "$1" "${@:2}"
  per_gpu bench_cand run11 $RUN
  bring_back
  ;;
short11)  # carry .dtrain/e .dtrain/s (after part1, part2, convert; one GPU): $1: seconds this
  # call may run; $2: seconds of steps. The second candidate's data without the older answer
  # files (no room to carry them with the drafter): self-written prompts + ShareGPT x 3
  env_on
  mkdir -p $RUN /tmp/e && cp .dtrain/e/* /tmp/e/
  tar -C $RUN -xJf .dtrain/s/smollm2-selfdistill-self.tar.xz
  tar -C $RUN -xJf lab/train/smollm2-selfdistill-sharegpt.tar.xz
  data="$RUN/self0.npz $RUN/self1.npz" prompts="$RUN/self0.jsonl.xz $RUN/self1.jsonl.xz"
  for r in 1 2 3; do for n in 0 1 2 3; do
    data="$data $RUN/share$n.npz" prompts="$prompts lab/prompts/train-sharegpt.jsonl.xz"
  done; done
  cand_train $RUN/short \
    --val-prompts lab/prompts/val-sharegpt.jsonl --prompts $prompts --data $data \
    --gen-time-limit 0 --init /tmp/e --steps 0 --train-seconds "$2" \
    --time-limit $(( $1 - $(date +%s) + T0 - 15 )) 2>&1 | quiet | tail -20
  mkdir -p $OUT/run && cp $RUN/short/config.json $RUN/short/draft_vocab.npy $RUN/short/train_log.jsonl $OUT/run/
  split -b 15000000 $RUN/short/model.safetensors $OUT/run/model.safetensors.part.
  ls -la $OUT/run
  ;;
pair13)  # carry .dtrain/e (after part1, part2, convert; one GPU): do two trainers share one H200
  # at full speed? Two short runs side by side on the ShareGPT answers (the step costs the same
  # whatever the data); compare their ms/step with one alone (92-101 ms in the eleventh run)
  env_on
  mkdir -p $RUN /tmp/e && cp .dtrain/e/* /tmp/e/
  tar -C $RUN -xJf lab/train/smollm2-selfdistill-sharegpt.tar.xz
  pair() {
    cand_train $RUN/pair$G --seed $G \
      --prompts $(for n in 0 1 2 3; do echo lab/prompts/train-sharegpt.jsonl.xz; done) \
      --data $RUN/share0.npz $RUN/share1.npz $RUN/share2.npz $RUN/share3.npz \
      --gen-time-limit 0 --init /tmp/e --steps 0 --train-seconds "$1" --time-limit "$2"
  }
  SHARE_GPU=1 per_gpu pair "$1" "$2"
  for g in $CANDS; do grep -h '"step"' $RUN/pair$g/train_log.jsonl | tail -3 | cut -c1-160; done
  ;;
ret8)
  mkdir -p $OUT/run && split -b 15000000 /tmp/run/cand1/model.safetensors $OUT/run/cand1.safetensors.part.
  ;;
final)  # the new drafter ($RUN/dp): the bench ("$@"), our baseline against mlx-lm, draft costs
  env_on
  python3 -m dflash bench --draft $RUN/dp "$@"
  python3 lab/bench/baseline_check.py --prompts 3 --reps 3
  python3 lab/bench/verify_cost.py --draft $RUN/dp --draft-only --out $OUT/draft-cost.json
  ;;
esac
