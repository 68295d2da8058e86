#!/usr/bin/env bash
# Gradient training of the shipped drafter's Markov head on one H200 (README.md here), in the
# warm session of lab/bench/h200.sh: after its `stash NN` calls have put MLX's CUDA build and the
# GGUF in /tmp. The token files the drafter trained on (commit 88f35b2: the answers to the plain,
# natural, self-written and ShareGPT prompts, as fit.py read them) travel as .gpux/m0, .gpux/m1
# (8.1 MB each: the device call carries the tree, 52.3 MiB now, too; ignored by git through
# .git/info/exclude).
#
# Here, once:  bash lab/markov-head/h200.sh chunk
# There:       carry [".gpux/m0"]: bash lab/markov-head/h200.sh stash 0    (then m1: stash 1)
#              bash lab/markov-head/h200.sh train SECONDS [trainer flags, the last one wins]
# `train` runs lab/bench/h200.sh setup (a no-op once done), unpacks the token files, trains the
# head from the shipped closed-form one (the base frozen) with a validation line every
# --save-every steps, stops itself SECONDS after it started (the trainer at SECONDS - 35, a hard
# `timeout` at SECONDS - 10), then writes the head alone (float16) to $OUT/head.safetensors and
# $ROOT/head/head.safetensors, and the shipped drafter with it to $ROOT/head/drafter for the bench
# (`bash lab/bench/h200.sh bench S --draft /tmp/head/drafter ...`). Also in $OUT: train_log.jsonl,
# train.log.
# LOCAL=1: skip setup (this machine's venv has MLX); ROOT (default /tmp): where chunks, token
# files, the run and the head go.
set -uo pipefail
phase=${1:?phase}
ROOT=${ROOT:-/tmp}
OUT=${OUT:-$ROOT/head-out}
DATA=$ROOT/mdata RUN=$ROOT/mrun DRAFTER=assets/smollm2-135m-instruct-dflash
FILES="smollm2-selfdistill-data.npz.xz smollm2-selfdistill-natural.npz.xz
  smollm2-selfdistill-self.tar.xz smollm2-selfdistill-sharegpt.tar.xz"

case $phase in
chunk)
  rm -rf .gpux/m[0-9]* .gpux/mall && mkdir -p .gpux/mall
  for f in $FILES; do git show 88f35b2:lab/train/$f > .gpux/mall/$f || exit 1; done
  (cd .gpux/mall && tar -cf - $FILES | split -b ${CHUNK:-8100000} -d -a 2 - ../mchunk.)
  for f in .gpux/mchunk.*; do n=$((10#${f##*.})); mkdir -p .gpux/m$n && mv "$f" .gpux/m$n/; done
  rm -rf .gpux/mall && du -b .gpux/m[0-9]*/*
  ;;
stash)
  mkdir -p $ROOT/mchunks && cp .gpux/m${2:?chunk number}/* $ROOT/mchunks/ && ls $ROOT/mchunks
  ;;
unpack)  # the token files into $DATA, once
  [ -f $DATA/.ok ] && exit 0
  rm -rf $DATA && mkdir -p $DATA
  cat $ROOT/mchunks/mchunk.* | tar -C $DATA -xf - || { echo "unpack: chunks missing (stash 0 and 1?)"; exit 1; }
  for f in $FILES; do [ -s $DATA/$f ] || { echo "unpack: $f missing (stash 0 and 1?)"; exit 1; }; done
  xz -dc $DATA/smollm2-selfdistill-data.npz.xz > $DATA/data-train.npz &
  xz -dc $DATA/smollm2-selfdistill-natural.npz.xz > $DATA/data-natural.npz &
  tar -C $DATA -xJf $DATA/smollm2-selfdistill-self.tar.xz &
  tar -C $DATA -xJf $DATA/smollm2-selfdistill-sharegpt.tar.xz &
  wait
  for f in data-train data-natural self0 self1 share0 share1 share2 share3; do
    [ -s $DATA/$f.npz ] || { echo "unpack: $f.npz missing"; exit 1; }
  done
  touch $DATA/.ok && ls -la $DATA
  ;;
train)  # $2: seconds this call may run; more: trainer flags
  T0=$(date +%s); budget=${2:?seconds}; shift 2
  if [ -z "${LOCAL:-}" ]; then
    bash lab/bench/h200.sh setup || exit 1
    . /tmp/dflash-env.sh
  fi
  bash "$0" unpack || exit 1
  mkdir -p $OUT $ROOT/head && rm -rf $RUN
  left=$(( budget - $(date +%s) + T0 ))
  share=lab/prompts/train-sharegpt.jsonl.xz
  timeout $(( left - 10 )) python3 -m dflash train --target builtin:smollm2-135m-instruct \
    --out $RUN --init $DRAFTER --markov-rank 128 --target-dtype float32 \
    --prompts lab/prompts/train.jsonl.xz lab/prompts/train-natural.jsonl.xz $DATA/self0.jsonl.xz \
      $DATA/self1.jsonl.xz $share $share $share $share \
    --data $DATA/data-train.npz $DATA/data-natural.npz $DATA/self0.npz $DATA/self1.npz \
      $DATA/share0.npz $DATA/share1.npz $DATA/share2.npz $DATA/share3.npz \
    --val-prompts lab/prompts/val-sharegpt.jsonl --gen-time-limit 0 --gen-batch 512 \
    --seq-len 320 --batch-seqs 32 --anchors 32 --dtype bfloat16 --lr 3e-4 --warmup 0.02 \
    --steps 0 --train-seconds 0 --time-limit $(( left - 35 )) --save-every 400 --log-every 100 \
    "$@" > $OUT/train.log 2>&1
  rc=$?  # the progress bars stay in train.log: the validation lines are what the tail shows
  tr '\r' '\n' < $OUT/train.log | grep -v -E '^(training|generating|features)|^\s*$'
  echo "train: exit $rc after $(( $(date +%s) - T0 ))s"
  cp $RUN/train_log.jsonl $OUT/ 2>/dev/null
  python3 lab/markov-head/merge.py --extract $RUN $OUT/head.safetensors || exit 1
  cp $OUT/head.safetensors $ROOT/head/head.safetensors
  python3 lab/markov-head/merge.py $ROOT/head/head.safetensors $DRAFTER --out $ROOT/head/drafter || exit 1
  echo "head -> $OUT/head.safetensors, $ROOT/head/; $(( $(date +%s) - T0 ))s in all"
  ;;
*)
  echo "unknown phase $phase (chunk, stash N, unpack, train SECONDS [flags])"; exit 2
  ;;
esac
