#!/usr/bin/env bash
# Long-context runs on one GPU machine (thirty-ninth session), after `bash lab/bench/h200.sh stash
# NN` for every chunk made with `CHUNK=48000000 DRAFTER=1 bash lab/bench/h200.sh chunk` while the
# drafter was out of the index (git rm --cached; .git/info/exclude):
#   bash lab/long/gpu.sh tau|micro|long|short|heldout
# tau:     the chats' answers, then the chain's tau against the drafter's context window
#          (lab/long/window_tau.py) on PROMPTS (lab/long/dev.jsonl) and on lab/long/short.jsonl
# micro:   tree attention against the context (lab/long/tree_attention_gpu.py) and the kernel's
#          tests on CUDA
# long:    `dflash bench --suite long` with the default (the planner) and with a fixed 64-node tree
# short:   the README's GPU command with the default, then with --tree 64 (both --baseline mlx-lm)
# heldout: the README's held-out command (assets/prompts/eval.jsonl, 4 a category), default
# cudnn:   attention with a repeated against a growing key count, cuDNN on and off
#          (lab/long/cudnn_gpu.py; fortieth session)
# why:     which long-prompt cycles are slow, and under which MLX settings (lab/long/why_cycles.py)
# buffer:  the tree's verify ms, masked call over the cache's buffer / the fetched keys / graphs off
# split:   the tree's verify ms, split kernel (default) against the masked call over the buffer
# shapes:  the long suite with the default (Fallback: tree, its spine, steps), --tree 64 and
#          --tree 0 (LONG), then the short suite with the default and --tree 64 (SHORT), each a
#          fresh process; ~2.5 min a long run: split over calls, e.g. LONG="default 64" SHORT=""
# trace:   per-cycle traces of ROWS, target-only and the default twice each in one process,
#          graphs on and off (lab/long/cycle_trace.py; forty-fourth session)
# pad:     the fixed tree's verify ms with the drafter's context padded to 16 rows a cycle, and with
#          MLX's graphs of 20 ops (why_cycles.py; forty-fourth session's plan)
# Records: lab/bench/results/s39/.
set -uo pipefail
phase=${1:?phase}
bash lab/bench/h200.sh setup > /dev/null || exit 1
. /tmp/dflash-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
case $phase in
tau)  # the chats' answers (lab/long/answers.py) and the drafter's tau against windows
  python3 lab/long/answers.py lab/long/chat-prompts.jsonl $OUT/answers.jsonl 84 160 | tail -n 2
  python3 lab/long/window_tau.py ${PROMPTS:-lab/long/dev.jsonl} $OUT/window-tau.json 96 ${SETTINGS:-full,128,192,256,384,512}
  # short prompts (held-out, not the bench's) with answers long enough to cross the small windows
  python3 lab/long/window_tau.py lab/long/short.jsonl $OUT/window-tau-short.json 192 ${SETTINGS:-full,128,192,256,384,512} ;;
micro)
  python3 lab/long/tree_attention_gpu.py 2>&1 | tee $OUT/tree-attention-gpu.txt
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels.py 2>&1 | tail -n 3 ;;
long)
  for t in ${TREES:-auto 64}; do
    python3 -m dflash bench --suite long --max-tokens 128 --repeat 1 --tree $t --out $OUT/gpu-long-$t.json 2>&1 |
      grep -v '^\[' | tail -n 20
  done ;;
short)
  for t in ${TREES:-auto 64}; do
    python3 -m dflash bench --max-tokens 128 --repeat 1 --tree $t --baseline mlx-lm --out $OUT/gpu-short-$t.json 2>&1 |
      grep -v '^\[' | tail -n 8
  done ;;
cudnn)
  python3 lab/long/cudnn_gpu.py
  MLX_CUDA_USE_CUDNN_SDPA=0 python3 lab/long/cudnn_gpu.py ;;
why)
  W=lab/long/why_cycles.py
  timeout 60 python3 $W 2k-document 2 table 2>&1 | grep -v '^load\|^dequant'
  for e in WHY_BUCKET=256 WHY_KERNEL_MAX=1000000000 WHY_CACHE_LIMIT=0 MLX_USE_CUDA_GRAPHS=0; do
    echo "== $e"; env $e timeout 60 python3 $W 2k-document 2 2>&1 | grep cycles:
  done
  for e in WHY_NONE=1 WHY_BUCKET=256; do echo "== $e"; env $e timeout 60 python3 $W 4k-chat 2 2>&1 | grep cycles:; done ;;
shapes)  # forty-first session's plan for the next lease
  for t in ${LONG-default 64 0}; do
    a=(); [ $t != default ] && a=(--tree $t)
    timeout 240 python3 -m dflash bench --suite long --max-tokens 128 --repeat 1 "${a[@]}" --out $OUT/long-$t.json 2>&1 |
      grep -E '^(0.5k|1k|2k|4k|7k|all) +\(median'
  done
  for t in ${SHORT-default 64}; do
    a=(); [ $t != default ] && a=(--tree $t)
    timeout 150 python3 -m dflash bench --max-tokens 128 --repeat 1 --baseline mlx-lm "${a[@]}" --out $OUT/short-$t.json 2>&1 |
      grep -E '^all'
  done ;;
buffer)  # forty-first session: TreeAttention over the cache's buffer (default) against the fetched keys
  W=lab/long/why_cycles.py
  for r in 2k-document 4k-chat 7k-document; do for e in WHY_NONE=1 WHY_SLICES=1 MLX_USE_CUDA_GRAPHS=0; do
    echo "== $r $e"; env $e timeout 90 python3 $W $r 2 2>&1 | grep cycles:
  done; done ;;
split)  # forty-second session: the split kernel against the masked call, both over the buffer
  W=lab/long/why_cycles.py
  for r in ${ROWS:-2k-document 4k-chat 7k-document}; do for e in WHY_NONE=1 WHY_NOSPLIT=1; do
    echo "== $r $e"; env $e timeout 90 python3 $W $r 2 2>&1 | grep cycles:
  done; done ;;
trace)  # forty-fourth session: per-cycle traces (lab/long/cycle_trace.py), graphs on and off
  for g in 1 0; do for r in ${ROWS:-0.5k-document 4k-chat}; do
    MLX_USE_CUDA_GRAPHS=$g timeout 120 python3 lab/long/cycle_trace.py $r target dflash target dflash \
      > $OUT/trace-$r-graphs$g.txt 2>&1
    echo "== $r graphs $g"; grep 'tok/s' $OUT/trace-$r-graphs$g.txt
  done; done ;;
pad)  # forty-fourth session's plan: do the cycles' varying shapes (the drafter's context rows) cost?
  W=lab/long/why_cycles.py
  for r in ${ROWS:-4k-chat 2k-document}; do for e in ${PADS:-WHY_NONE=1 WHY_PAD=16 MLX_MAX_OPS_PER_BUFFER=20}; do
    echo "== $r $e"; env $e timeout 90 python3 $W $r 2 2>&1 | grep cycles:
  done; done ;;
heldout)
  python3 -m dflash bench --prompts assets/prompts/eval.jsonl --prompts-limit 4 --max-tokens 128 --repeat 1 \
    --out $OUT/gpu-heldout.json 2>&1 | grep -v '^\[' | tail -n 10 ;;
esac
