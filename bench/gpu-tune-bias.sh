#!/usr/bin/env bash
# One GPU is enough: does tune still call NCCL's default buffer size, spelled
# out as NCCL_BUFFSIZE=4194304 (a child process), a gain? Three runs as
# shipped (repeats rotate through 256 MiB by default since this check), then
# two with COLLBENCH_TUNE_SPAN=0 (no rotation: L2-resident repeats, the way
# that showed false gains; docs/tune.md section 3).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
B=${NEW:-dist/collbench}; O=${OUT:-bench-out}/bias; mkdir -p "$O"
for r in 1 2 3; do
  $B tune all_reduce all_gather -b 1M -e 16M -f 16 --budget 60s --format json > "$O/plain$r.json" 2> "$O/plain$r.err"
  echo "plain$r rc=$?"
done
for r in 1 2; do
  COLLBENCH_TUNE_SPAN=0 $B tune all_reduce all_gather -b 1M -e 16M -f 16 --budget 60s --format json > "$O/nospan$r.json" 2> "$O/nospan$r.err"
  echo "nospan$r rc=$?"
done
$B tune all_reduce all_gather -b 1M -e 16M -f 16 --budget 60s > "$O/plain_text.txt" 2>&1
cat "$O/plain_text.txt"
