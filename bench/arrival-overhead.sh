#!/bin/sh
# What --arrival costs the timed loop (issue #53: at most 1% of the time
# per iteration at 1 MiB and up). Two measures, A B A B interleaved:
#  1. the cost itself: one CPU rank, 8 B all_reduce (an operation of a
#     few ns), 4000 iterations: the time per iteration with and without
#     --arrival differs by the two clock reads and stores it adds;
#  2. the rows that matter: all_reduce 1 MiB .. 64 MiB on 2 rank threads,
#     time per iteration with and without --arrival.
# Usage: bench/arrival-overhead.sh [REPEATS]  (BIN=path/to/collbench)
set -eu
BIN=${BIN:-target/debug/collbench}
REPEATS=${1:-5}
OUT=${OUT:-$(mktemp -d)}
for r in $(seq 1 "$REPEATS"); do
  for mode in off on; do
    flag=""; [ "$mode" = on ] && flag="--arrival"
    "$BIN" run all_reduce --backend cpu --ranks 1 -b 8 -e 8 -w 100 -n 4000 -N 5 -c 0 -q $flag \
      --output "$OUT/tiny-$mode-$r.json" >/dev/null
    "$BIN" run all_reduce --backend cpu --ranks 2 -b 1M -e 64M -f 4 -w 3 -n 40 -c 0 -q $flag \
      --output "$OUT/big-$mode-$r.json" >/dev/null
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st
out = sys.argv[1]
def times(kind, mode):
    per = {}
    for f in sorted(glob.glob(f"{out}/{kind}-{mode}-*.json")):
        for row in json.load(open(f))["results"]:
            for p in ("out_of_place", "in_place"):
                per.setdefault(row["size_bytes"], []).append(row[p]["time_us"])
    return per
for kind in ("tiny", "big"):
    off, on = times(kind, "off"), times(kind, "on")
    for size in sorted(off):
        a, b = st.median(off[size]), st.median(on[size])
        print(f"{kind:4} {size:>9} B  off {a:10.4f} us  on {b:10.4f} us  "
              f"diff {b - a:+9.4f} us ({100 * (b - a) / a:+6.2f}%)  n={len(off[size])}")
PY
