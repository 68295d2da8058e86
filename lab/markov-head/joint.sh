#!/usr/bin/env bash
# The shipped drafter's base and Markov head trained together (`train --markov-joint`, DSpark's
# way) on one H200, on every answer file the base trained on (the twelfth run's data: the plain,
# natural, open1-4, self-written answers and the ShareGPT answers three times over), in the warm
# session of lab/bench/h200.sh (its stash calls put MLX's CUDA build and the GGUF in /tmp).
#
# Here, once:  bash lab/markov-head/joint.sh pack   puts everything a session needs (MLX's CUDA
#              build, mlx-lm, the GGUF, the six answer archives of commit 0473aa8^, the shipped
#              drafter, the Xeon's CPU pack) into one stream in chunks of 54 MB (.gpux/k0..k4),
#              for calls made with the drafter's 43 MB moved out of the working tree (`away`
#              before the calls, `back` after them): the tree is then ~10 MB.
# There:       carry [".gpux/kN"]: bash lab/markov-head/joint.sh stash N   (N = 0..4); every
#              later phase takes the archives, the drafter and the CPU pack from what
#              lab/bench/h200.sh setup unpacked ($ARCHIVES, default /tmp/all).
#              bash lab/markov-head/joint.sh start STEP_SECONDS [trainer flags]: the trainer,
#                detached, on cores 2-15, a schedule sized for STEP_SECONDS of steps
#              bash lab/markov-head/joint.sh wait SECONDS: until it ends (or SECONDS), then the
#                drafter back to $OUT (float16, split under 16 MiB: `cat model.safetensors.part.*
#                > model.safetensors` here), its log and the trainer's output
#              bash lab/markov-head/joint.sh xeon SECONDS: lab/cpu/xeon.sh's real-pair CPU bench
#                on cores 0-1 (meanwhile the trainer may run on the others), output in $OUT/xeon/
#              bash lab/markov-head/joint.sh ab SECONDS: shipped vs the new drafter, interleaved
#                on one loaded target (lab/bench/planner_variants.py, "+" = the new drafter)
# LOCAL=1: no setup and no pinning (this machine's venv has MLX; a tiny run with trainer flags;
# ARCHIVES: a folder holding the six archives, e.g. from `git show 0473aa8^:lab/train/FILE`).
set -uo pipefail
phase=${1:?phase}
PIN=$([ -n "${LOCAL:-}" ] || echo "taskset -c 2-15")
ROOT=${ROOT:-/tmp}
OUT=${OUT:-$ROOT/joint-out}
DATA=$ROOT/jdata RUN=$ROOT/jrun DRAFTER=assets/smollm2-135m-instruct-dflash ARCHIVES=${ARCHIVES:-/tmp/all}
FILES="smollm2-selfdistill-data.npz.xz smollm2-selfdistill-natural.npz.xz
  smollm2-selfdistill-open.tar.xz smollm2-selfdistill-open2.tar.xz
  smollm2-selfdistill-self.tar.xz smollm2-selfdistill-sharegpt.tar.xz"

bring_back() {  # the drafter as it is now, its config, vocabulary and log
  rm -rf $OUT/drafter && mkdir -p $OUT/drafter
  cp $RUN/config.json $RUN/draft_vocab.npy $RUN/train_log.jsonl $OUT/drafter/ 2>/dev/null
  split -b 15000000 $RUN/model.safetensors $OUT/drafter/model.safetensors.part.
  rm -rf $ROOT/joint-drafter && mkdir -p $ROOT/joint-drafter &&
    cp $RUN/config.json $RUN/draft_vocab.npy $RUN/model.safetensors $ROOT/joint-drafter/
  ls -la $OUT/drafter
}

quiet() { tr '\r' '\n' | grep -v -E '^(training|generating|features|evaluating):|^\s*$'; }

ensure_drafter() {  # after `away` here, the device's tree lacks the drafter's weights
  [ -s $DRAFTER/model.safetensors ] || cp $ARCHIVES/drafter/model.safetensors $DRAFTER/ || exit 1
  [ -s .gpux/cpu/cpu.tar.xz ] || { mkdir -p .gpux/cpu && cp $ARCHIVES/cpu.tar.xz .gpux/cpu/; }
}

case $phase in
pack)  # needs .gpu (pack-mlx-cuda.sh), the converted GGUF and .gpux/cpu (lab/cpu/xeon.sh pack)
  rm -rf .gpux/k[0-9]* .gpux/kall && mkdir -p .gpux/kall/drafter
  cat .gpu/a/mlx-cuda.part.* .gpu/b/mlx-cuda.part.* > .gpux/kall/mlx-cuda.tar.xz
  cp .gpu/b/*.whl .gpux/cpu/cpu.tar.xz .gpux/kall/ &&
    cp "${DFLASH_CACHE:-$HOME/.cache/dflash}/SmolLM2-135M-Instruct.Q4_1.gguf" .gpux/kall/ &&
    cp $DRAFTER/model.safetensors .gpux/kall/drafter/ || exit 1
  for f in $FILES; do git show 0473aa8^:lab/train/$f > .gpux/kall/$f || exit 1; done
  (cd .gpux/kall && tar -cf - * | split -b ${CHUNK:-54000000} -d - ../chunk.)
  for f in .gpux/chunk.*; do n=$((10#${f##*.})); mkdir -p .gpux/k$n && mv "$f" .gpux/k$n/; done
  rm -rf .gpux/kall && du -b .gpux/k[0-9]*/*
  ;;
away)  # here: the drafter's weights out of the tree for the calls (git status shows it deleted)
  mkdir -p .gpux/away && mv $DRAFTER/model.safetensors .gpux/away/ && git status --short
  ;;
back)
  mv .gpux/away/model.safetensors $DRAFTER/ && git status --short
  ;;
stash)  # chunk N of `pack`, where lab/bench/h200.sh setup reads its chunks
  mkdir -p /tmp/chunks && cp .gpux/k${2:?chunk number}/* /tmp/chunks/ && ls /tmp/chunks
  ;;
unpack)  # the token files into $DATA, once
  [ -f $DATA/.ok ] && exit 0
  rm -rf $DATA && mkdir -p $DATA
  for f in $FILES; do cp $ARCHIVES/$f $DATA/ || { echo "unpack: $f missing (stash 0..4?)"; exit 1; }; done
  xz -dc $DATA/smollm2-selfdistill-data.npz.xz > $DATA/data-train.npz &
  xz -dc $DATA/smollm2-selfdistill-natural.npz.xz > $DATA/data-natural.npz &
  for f in open open2 self sharegpt; do tar -C $DATA -xJf $DATA/smollm2-selfdistill-$f.tar.xz & done
  wait
  rm -f $DATA/*.xz.tar $DATA/smollm2-*
  touch $DATA/.ok && ls -la $DATA
  ;;
start)  # $2: seconds of training steps (the schedule's length); more: trainer flags. The trainer
  # runs detached (setsid): it outlives this call, and later calls (`wait`, `xeon`) keep the
  # machine warm while it trains
  budget=${2:?seconds of steps}; shift 2
  if [ -z "${LOCAL:-}" ]; then bash lab/bench/h200.sh setup && . /tmp/dflash-env.sh && ensure_drafter || exit 1; fi
  bash "$0" unpack || exit 1
  P="lab/prompts/train-natural.jsonl.xz lab/prompts/train.jsonl.xz"
  prompts="$P" data="$DATA/data-natural.npz $DATA/data-train.npz"
  for n in 1 2 3 4; do prompts="$prompts $P" data="$data $DATA/open$n-natural.npz $DATA/open$n-train.npz"; done
  for n in 0 1; do prompts="$prompts $DATA/self$n.jsonl.xz" data="$data $DATA/self$n.npz"; done
  for r in 1 2 3; do for n in 0 1 2 3; do
    prompts="$prompts lab/prompts/train-sharegpt.jsonl.xz" data="$data $DATA/share$n.npz"
  done; done
  rm -rf $RUN $ROOT/joint.log $ROOT/joint.rc && mkdir -p $RUN
  # the data loads in ~2 min first; --time-limit is a guard, the schedule ends the run
  setsid bash -c "$PIN python3 -m dflash train --target builtin:smollm2-135m-instruct --out $RUN \
    --init $DRAFTER --markov-rank 128 --markov-joint --dropout 0.1 --target-dtype float32 \
    --prompts $prompts --data $data --val-prompts lab/prompts/val-sharegpt.jsonl \
    --gen-time-limit 0 --gen-batch 512 --seq-len 320 --batch-seqs 32 --anchors 32 \
    --dtype bfloat16 --lr 3e-4 --warmup 0.02 --save-every 1000 --log-every 100 --steps 0 \
    --train-seconds $budget --time-limit $(( budget + 400 )) $* > $ROOT/joint.log 2>&1;
    echo \$? > $ROOT/joint.rc" < /dev/null > /dev/null 2>&1 &
  sleep 5 && echo "trainer started: $ROOT/joint.log" && tail -n 3 $ROOT/joint.log
  ;;
wait)  # $2: seconds at most: until the detached trainer ends; then its log and the drafter to $OUT
  T0=$(date +%s)
  while [ ! -f $ROOT/joint.rc ] && [ $(( $(date +%s) - T0 )) -lt $(( ${2:?seconds} - 15 )) ]; do sleep 5; done
  mkdir -p $OUT && tr '\r' '\n' < $ROOT/joint.log | quiet > $OUT/train.log
  tr '\r' '\n' < $ROOT/joint.log | tail -n 2; grep -v '^\[' $OUT/train.log | tail -n 20
  if [ -f $ROOT/joint.rc ]; then echo "trainer exit $(cat $ROOT/joint.rc)"; bring_back; else echo "still training"; fi
  ;;
xeon)  # $2: seconds: the real pair's CPU bench on the Xeon's cores 0-1 (lab/cpu/xeon.sh)
  [ -z "${LOCAL:-}" ] && { bash lab/bench/h200.sh setup && ensure_drafter || exit 1; }
  mkdir -p $OUT/xeon && OUT=$OUT/xeon env -u PYTHONPATH -u LD_LIBRARY_PATH bash lab/cpu/xeon.sh bench \
    $(( ${2:?seconds} - 150 )) ${XEON_ARGS:---prompts-limit 2 --max-tokens 128 --repeat 1} 2>&1 | tail -n 45
  ;;
ab)  # $2: seconds; the shipped drafter vs the joint one ("+"), interleaved on one loaded target:
  # 24 bench prompts (target-only, 64 nodes), then 24 held-out prompts (32 and 64 nodes)
  T0=$(date +%s); budget=${2:?seconds}
  bash lab/bench/h200.sh setup || exit 1
  . /tmp/dflash-env.sh && ensure_drafter
  for spec in "target,64,64+ 8" "target,32,32+,64,64+ 4 assets/prompts/eval.jsonl"; do
    left=$(( budget - $(date +%s) + T0 - 5 ))
    [ $left -lt 60 ] && { echo "out of time before $spec"; break; }
    set -- $spec  # settings, prompts a suite or category, [prompts file]
    DRAFT_B=$ROOT/joint-drafter OUT=$OUT timeout $left $PIN \
      python3 lab/bench/planner_variants.py $1 $2 128 ${3:-} 2>&1 | grep -E "ratio|differ|rror" | tail -n 8
  done
  ;;
*)
  echo "unknown phase $phase (pack, away, back, stash N, unpack, start STEPS_S, wait S, xeon S, ab S)"; exit 2
  ;;
esac
