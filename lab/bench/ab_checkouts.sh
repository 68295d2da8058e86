#!/usr/bin/env bash
# Two checkouts of dflash benched in turn (A B B A A B ...), the same command each time, so that
# the host's drift hits both alike; one JSON per run in OUT_DIR, then each run's overall line.
#   bash lab/bench/ab_checkouts.sh DIR_A DIR_B ROUNDS OUT_DIR [bench args...]
# e.g. before/after a refactor: git worktree add /tmp/before <commit>; run from anywhere.
set -uo pipefail
A=${1:?dir A}; B=${2:?dir B}; rounds=${3:?rounds}; out=${4:?out dir}; shift 4
py=${PYTHON:-python3}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
  for side in $order; do
    dir=$A; [ $side = B ] && dir=$B
    (cd "$dir" && $py -m dflash bench "$@" --out "$out/$side-$r.json" 2>&1 |
      grep -E '^all|rror' | sed "s/^/$side round $r: /")
  done
done
