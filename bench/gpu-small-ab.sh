#!/usr/bin/env bash
# Small sizes only, this binary (NEW) against the previous release (PREV),
# alternating for ROUNDS rounds (default 6): the seven ops, 8 B - 64 KiB,
# many iterations, so that launch-path differences of a microsecond show.
# Prints bench/ab_text.py's table (A = NEW, B = PREV); logs under $OUT/small.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
NEW=${NEW:-dist/collbench}; PREV=${PREV:-dist/collbench-prev}
O=${OUT:-bench-out}/small; mkdir -p "$O"
G=$(nvidia-smi -L 2>/dev/null | wc -l)
OPS="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
ARGS="-b 8 -e 64K -f 2 -w 50 -n 500 -g $G"
for r in $(seq ${ROUNDS:-6}); do
  if [ $((r % 2)) = 1 ]; then order="prev new"; else order="new prev"; fi
  for w in $order; do
    bin=$NEW; [ $w = prev ] && bin=$PREV
    timeout 120 $bin run $OPS $ARGS > "$O/$w$r.txt" 2> "$O/$w$r.err"
  done
done
python3 bench/ab_text.py "$(ls $O/new[0-9]*.txt | paste -sd,)" "$(ls $O/prev[0-9]*.txt | paste -sd,)" | tee "$O/table.md"
cd "${OUT:-bench-out}" && tar czf small.tgz small && rm -rf small
