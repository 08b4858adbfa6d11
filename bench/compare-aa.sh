#!/usr/bin/env bash
# compare's verdict judged as the guide asks: A against A must not alarm,
# a real slowdown must. A = the before-stop hook's CPU sweep; the real
# slowdown = the same sweep with both rank threads pinned to one core
# (taskset), a cause that slows every case, not a burst.
# Usage: bench/compare-aa.sh BINARY PAIRS  (prints one line per pair)
set -u
b=${1:-target/release/collbench}; pairs=${2:-10}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
run() { local name=$1; shift; rm -f "$d/$name.json"; timeout 60 "$@" run all -b 8 -e 16M -f 4 --output "$d/$name.json" >/dev/null 2>&1; }
aa=0; slow=0
for i in $(seq 1 "$pairs"); do
  run a "$b"; run b "$b"
  timeout 30 "$b" compare "$d/a.json" "$d/b.json" > "$d/aa.txt" 2>&1; rc=$?
  [ $rc -eq 0 ] && aa=$((aa+1))
  run s taskset -c 0 "$b"
  timeout 30 "$b" compare "$d/a.json" "$d/s.json" > "$d/as.txt" 2>&1; rs=$?
  [ $rs -eq 1 ] && slow=$((slow+1))
  echo "pair $i: A/A exit $rc ($(grep -o 'REGRESSION: [0-9]* of [0-9]* cases' "$d/aa.txt" || echo none)); A/slow exit $rs ($(grep -o 'REGRESSION: [0-9]* of [0-9]* cases' "$d/as.txt" || echo none)) load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "A against A quiet: $aa/$pairs; real slowdown (one core) found: $slow/$pairs"
