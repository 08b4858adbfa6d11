#!/usr/bin/env bash
# This build against the previous release on one GPU, interleaved (A B, B A,
# ...), $ROUNDS rounds: the seven ops in one process, 8 B - 1 GiB, checked.
# Issue 25's "behaviour unchanged" bar: #wrong 0 and the busbw median ratio
# (algbw with one rank, where busbw is 0) at >= 64 MiB within 0.99-1.01,
# with the previous release against itself as the noise.
#
#   NEW=dist/collbench PREV=dist/collbench-prev bench/release_ab.sh
#
# Out-of-place rows only: with one rank NCCL's in-place collectives are
# no-ops of a few hundred nanoseconds (bench/ab_text.py --oop).
# Results under $OUT/release/, tarred to $OUT/release.tgz.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
NEW=$(realpath "${NEW:-dist/collbench}"); PREV=$(realpath "${PREV:-dist/collbench-prev}")
ROUNDS=${ROUNDS:-2}
ROOT=${OUT:-bench-out}; O=$ROOT/release; mkdir -p "$O"
OPS="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
SWEEP="-b 8 -e 1G -f 4 -w 5 -n 20 -c 1"

one() { # one NAME BIN
  local s; s=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=0 "$2" run $OPS $SWEEP > "$O/$1.txt" 2> "$O/$1.err"
  echo "$1 rc=$? $(python3 -c "print(f'{$(date +%s.%N) - $s:.1f}')") s" | tee -a "$O/log.txt"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then one "new$r" "$NEW"; one "prev$r" "$PREV"
  else one "prev$r" "$PREV"; one "new$r" "$NEW"; fi
done
list() { ls "$O"/"$1"[0-9]*.txt | paste -sd, -; }
{
  echo "## new / prev"; python3 bench/ab_text.py --oop "$(list new)" "$(list prev)"
  echo "## noise: prev1 / prev2"; python3 bench/ab_text.py --oop "$O/prev1.txt" "$O/prev2.txt"
  echo "## noise: new1 / new2"; python3 bench/ab_text.py --oop "$O/new1.txt" "$O/new2.txt"
} | tee "$O/release.md"
tar -C "$ROOT" -czf "$ROOT/release.tgz" release
