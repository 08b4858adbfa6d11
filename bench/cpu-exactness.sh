#!/usr/bin/env bash
# Issue #2's exactness sweep on the CPU backend, one R at a time:
#   collbench run all --backend cpu --ranks R -b 8 -e 64M -f 2 -d all -o all
# with -w 0 -n 2 (the check pass runs once per case after timing, so the
# iteration count does not change what is checked). Writes the JSON record to
# $WORK/rR.json and a summary (rows, rows with #wrong > 0, exit code, wall
# time, rows per op) to bench/results/cpu_exact/rR.txt.
#
# Usage: [MAXSIZE=64M] bench/cpu-exactness.sh [BIN] R [R ...]
# (BIN defaults to target/release/collbench)
set -u
cd "$(dirname "$0")/.."
BIN=target/release/collbench
if [ -x "${1:-}" ]; then BIN=$1; shift; fi
WORK=${WORK:-/tmp/collbench-exact}
mkdir -p "$WORK" bench/results/cpu_exact
for R in "$@"; do
    start=$(date +%s)
    "$BIN" run all --backend cpu --ranks "$R" -b 8 -e ${MAXSIZE:-64M} -f 2 -d all -o all -w 0 -n 2 \
        --quiet --output "$WORK/r$R.json" 2>"$WORK/r$R.err"
    rc=$?
    secs=$(( $(date +%s) - start ))
    python3 - "$WORK/r$R.json" "$R" "$rc" "$secs" "${MAXSIZE:-64M}" "$("$BIN" --version)" \
        >"bench/results/cpu_exact/r$R.txt" <<'PY'
import collections, json, sys
path, r, rc, secs, maxsize, version = sys.argv[1:]
rows = json.load(open(path))["results"]
per_op = collections.Counter(x["op"] for x in rows)
bad = [x for x in rows
       if any((x.get(p) or {}).get("wrong", 0) for p in ("out_of_place", "in_place"))]
unchecked = sum(1 for x in rows for p in ("out_of_place", "in_place")
                if x.get(p) and x[p].get("wrong") is None)
print(f"command: collbench run all --backend cpu --ranks {r} -b 8 -e {maxsize} -f 2 -d all -o all -w 0 -n 2")
print(f"binary: {version}")
print(f"exit: {rc}  wall: {secs} s  rows: {len(rows)}  rows with #wrong > 0: {len(bad)}  unchecked placements: {unchecked}")
print(f"largest size: {max(x['size_bytes'] for x in rows)} B")
for op, n in per_op.items():
    print(f"  {op:<15} {n} rows")
for x in bad[:20]:
    print("WRONG", json.dumps(x)[:300])
PY
    cat "bench/results/cpu_exact/r$R.txt"
done
