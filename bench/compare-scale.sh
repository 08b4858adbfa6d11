#!/usr/bin/env bash
# compare and report at the largest sizes (issue #49 item 3): a 65,536-row
# collbench-made log compared with itself, and a ~250 MB collbench JSON
# record read by `report`, each timed with /usr/bin/time -v (elapsed and
# peak memory). Release build.
#
#   bash bench/compare-scale.sh [OUTDIR]      (default target/compare-scale)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/compare-scale}
B=${COLLBENCH:-target/release/collbench}
[ -x "$B" ] || cargo build --release -q -p collbench-cli
mkdir -p "$OUT"
measure() { # NAME CMD...: elapsed s and peak RSS MB of CMD
  local name=$1; shift
  /usr/bin/time -v "$@" > "$OUT/$name.out" 2> "$OUT/$name.time" || true
  awk -v n="$name" -F': ' '/Elapsed \(wall clock\)/{t=$2} /Maximum resident/{m=$2/1024}
    /Exit status/{e=$2} END{printf "%-28s elapsed %s  peak %.0f MB  exit %s\n", n, t, m, e}' "$OUT/$name.time"
}
# 65,536 sizes (the most `run` allows): 32 B to 2 MiB in 32 B steps.
if [ ! -s "$OUT/rows65536.txt" ]; then
  "$B" run all_reduce --backend cpu -b 32 -i 32 -e 2M -n 1 -w 0 -c 0 > "$OUT/rows65536.txt" 2>/dev/null
fi
echo "log: $(grep -c '^ *[0-9]' "$OUT/rows65536.txt") rows, $(du -m "$OUT/rows65536.txt" | cut -f1) MB"
measure compare-65536-self "$B" compare "$OUT/rows65536.txt" "$OUT/rows65536.txt"
# A ~250 MB record: a real CPU record's rows repeated at new sizes.
if [ ! -s "$OUT/big.json" ]; then
  "$B" run all --backend cpu -b 8 -e 1M -f 2 --output "$OUT/seed.json" --force -q > /dev/null 2>&1
  python3 - "$OUT/seed.json" "$OUT/big.json" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
rows, out, k = seed["results"], [], 0
target = 250e6
per_row = len(json.dumps(rows[0], indent=2)) + 4
while len(out) * per_row < target:
    for r in rows:
        r = dict(r); r["size_bytes"] = r["size_bytes"] + 8 * (k + 1); out.append(r)
    k += 1
seed["results"] = out
json.dump(seed, open(sys.argv[2], "w"), indent=2)
PY
fi
echo "record: $(du -m "$OUT/big.json" | cut -f1) MB"
measure report-big-json "$B" report "$OUT/big.json"
measure compare-big-json-self "$B" compare "$OUT/big.json" "$OUT/big.json"
