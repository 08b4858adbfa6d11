#!/bin/sh
# Issue #49 item 3: `collbench report` reads text in linear time and
# bounded memory. Writes the two logs of bench/parse_linear_logs.py and
# reports each with the given binary under /usr/bin/time -v (wall clock
# and peak memory). Results: bench/results/parse-linear.md.
#
# Usage: bench/parse-linear.sh [REPORT_COMMAND] [WORK_DIR]
#   REPORT_COMMAND: "target/release/collbench report" (the default), or
#   target/release/examples/report_log (the same library call without the
#   CLI: cargo build --release -p collbench-report --example report_log)
set -eu
cmd=${1:-target/release/collbench report}
work=${2:-/tmp/parse-linear}
here=$(dirname "$0")
python3 "$here/parse_linear_logs.py" "$work" > /dev/null
for log in rows65k.txt big60m.txt plain60m.txt; do
  printf '%s (%s bytes): ' "$log" "$(wc -c < "$work/$log")"
  # shellcheck disable=SC2086 # the command is words on purpose
  /usr/bin/time -v $cmd "$work/$log" > "$work/$log.md" 2> "$work/$log.time" || true
  awk -F': ' '/Elapsed \(wall clock\)/ {w=$2} /Maximum resident set size/ {m=$2}
    /Exit status/ {e=$2} END {printf "wall %s, peak RSS %.1f MB, exit %s\n", w, m/1024, e}' "$work/$log.time"
  grep -v '^\s' "$work/$log.time" | grep -v 'Command exited' | head -3 || true
done
