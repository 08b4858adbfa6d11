#!/usr/bin/env bash
# The steep rule and kept runs against the machine's own noise (issue #49
# item 4). Per round: two back-to-back identical CPU runs A and B, each
# saved twice as the README does (`--output X.json > X.txt`), then
#   compare A.json B.json, compare A.txt B.txt      (A against A)
#   compare DIR B.json, DIR = {A.json, A.txt}       (one run kept twice)
# and, every other round, T = the same run with both rank threads on one
# core (`taskset -c 0`, a real slowdown): compare A.json T.json.
# For each comparison: exit code, and how many cases regressed under the
# 5 us floor (the steep rule's own doing).
#
#   bash bench/compare-ratio.sh [ROUNDS] [OUTDIR]   (default 10 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-10}
OUT=${2:-target/compare-ratio}
B=${COLLBENCH:-target/release/collbench}
SWEEP=(run all -b 8 -e 16M -f 4)
[ -x "$B" ] || cargo build --release -q -p collbench-cli
mkdir -p "$OUT"
: > "$OUT/verdicts.tsv"
judge() { # ROUND PAIR BASE NEW
  local rc=0
  "$B" compare "$3" "$4" --format json > "$OUT/cmp-$1-$2.json" 2> "$OUT/cmp-$1-$2.err" || rc=$?
  python3 - "$OUT/cmp-$1-$2.json" "$1" "$2" "$rc" >> "$OUT/verdicts.tsv" <<'PY'
import json, sys
path, rnd, pair, rc = sys.argv[1:]
try:
    doc = json.load(open(path))
except ValueError:
    print(f"{rnd}\t{pair}\t{rc}\t-\t-\t-"); sys.exit()
steep = sum(1 for c in doc["cases"] if c["verdict"] == "regression"
            and c["judged_on"].startswith("time")
            and abs(c["new"]["time_us"] - c["base"]["time_us"]) <= 5.0)
print(f'{rnd}\t{pair}\t{rc}\t{doc["regressions"]}\t{steep}\t{doc["runs"]["base"]}+{doc["runs"]["new"]}')
PY
}
for i in $(seq 1 "$ROUNDS"); do
  for x in a b; do
    "$B" "${SWEEP[@]}" --output "$OUT/$x$i.json" --force > "$OUT/$x$i.txt" 2>/dev/null
  done
  judge "$i" A-B.json "$OUT/a$i.json" "$OUT/b$i.json"
  judge "$i" A-B.txt "$OUT/a$i.txt" "$OUT/b$i.txt"
  mkdir -p "$OUT/kept$i"
  cp "$OUT/a$i.json" "$OUT/a$i.txt" "$OUT/kept$i/"
  judge "$i" keptA-B "$OUT/kept$i" "$OUT/b$i.json"
  if [ $((i % 2)) = 1 ]; then
    taskset -c 0 "$B" "${SWEEP[@]}" --output "$OUT/t$i.json" --force > /dev/null 2>&1
    judge "$i" A-T.json "$OUT/a$i.json" "$OUT/t$i.json"
  fi
  echo "round $i done" >&2
done
echo -e "round\tpair\texit\tregressions\tunder-floor regressions\truns"
cat "$OUT/verdicts.tsv"
