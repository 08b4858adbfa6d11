#!/usr/bin/env bash
# compare as a gate, judged as docs/verification.md asks: A against A must
# not alarm, a real slowdown must. Per round: two back-to-back identical
# runs (A, B) and one with the rank threads confined to one core (T,
# `taskset -c 0`: a real cause, not a scaled file); `compare A B` and
# `compare A T`, for collbench's JSON and for its text output alike.
#
#   bash bench/gate.sh [ROUNDS] [OUTDIR]     (default 20 rounds)
#
# Prints one line per comparison (round, pair, form, exit code, verdict
# line) into OUTDIR/verdicts.tsv and a summary at the end. Needs a quiet
# machine: it measures the machine's own noise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-20}
OUT=${2:-target/gate}
B=${COLLBENCH:-target/release/collbench}
SWEEP=(run all -b 8 -e 16M -f 4)
[ -x "$B" ] || cargo build --release -q -p collbench-cli
mkdir -p "$OUT"
: > "$OUT/verdicts.tsv"
for i in $(seq 1 "$ROUNDS"); do
  "$B" "${SWEEP[@]}" --output "$OUT/a$i.json" --force > "$OUT/a$i.txt" 2>/dev/null
  "$B" "${SWEEP[@]}" --output "$OUT/b$i.json" --force > "$OUT/b$i.txt" 2>/dev/null
  taskset -c 0 "$B" "${SWEEP[@]}" --output "$OUT/t$i.json" --force > "$OUT/t$i.txt" 2>/dev/null
  for form in json txt; do
    for new in b t; do
      rc=0
      "$B" compare "$OUT/a$i.$form" "$OUT/$new$i.$form" > "$OUT/cmp-$new$i.$form.out" 2>/dev/null || rc=$?
      printf '%s\t%s\t%s\t%s\t%s\n' "$i" "A-$new" "$form" "$rc" \
        "$(tail -1 "$OUT/cmp-$new$i.$form.out" | cut -c1-160)" >> "$OUT/verdicts.tsv"
    done
  done
  echo "round $i done" >&2
done
python3 - "$OUT/verdicts.tsv" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
count = collections.Counter((r[1], r[2], r[3]) for r in rows)
rounds = len({r[0] for r in rows})
for pair, meaning in (("A-b", "A against A"), ("A-t", "A against taskset -c 0")):
    for form in ("json", "txt"):
        codes = {c: n for (p, f, c), n in count.items() if p == pair and f == form}
        print(f"{meaning:24s} {form:4s}: " + ", ".join(
            f"exit {c}: {n}" for c, n in sorted(codes.items())) + f" (of {rounds})")
PY
