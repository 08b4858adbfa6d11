#!/usr/bin/env bash
# `collbench check --backend mpi` on 4 MPI processes as 4 emulated hosts
# (NCCL_HOSTID=emu<rank>), quiet or with rank 2's process starved of CPU,
# N times; one line per run (exit code, hosts named, confirmed), then the
# count. Results: bench/results/check-mpi.md.
#
#   bench/check_mpi.sh quiet 10
#   bench/check_mpi.sh starved 10
#
# Starved: rank 2 runs under `taskset -c 0 nice -n 19` while two busy
# loops (started here, killed at the end) hold core 0; the other ranks are
# pinned to core 1, so that rank 2 is the only starved host (unpinned, the
# scheduler puts one of them beside the loops now and then: a second slow
# host). Needs a build with `--features collbench-cli/mpi` and Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?quiet|starved}
runs=${2:-10}
bin=${COLLBENCH:-target/debug/collbench}
# Each run ends within this many seconds (a starved run takes ~6 min on a
# 2-core VM: every MPI call of rank 2 waits ~1 s for the CPU).
limit=${LIMIT_S:-540}
# Where each run's stdout and stderr are kept (run<i>.out, run<i>.err).
logs=${LOGS:-}
case $mode in
  quiet) args=(check --backend mpi --size 16M) ;;
  starved) args=(check --backend mpi --size 256K --quick -n 1) ;;
  *) echo "mode: quiet or starved" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
loops=()
cleanup() {
  for p in "${loops[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cat > "$tmp/wrap.sh" <<'WRAP'
#!/bin/sh
export NCCL_HOSTID=emu$OMPI_COMM_WORLD_RANK
if [ -n "${SLOW_RANK:-}" ]; then
  if [ "$OMPI_COMM_WORLD_RANK" = "$SLOW_RANK" ]; then exec taskset -c 0 nice -n 19 "$@"; fi
  exec taskset -c 1 "$@"
fi
exec "$@"
WRAP
chmod +x "$tmp/wrap.sh"
slow=()
if [ "$mode" = starved ]; then
  for _ in 1 2; do
    taskset -c 0 sh -c 'while :; do :; done' &
    loops+=($!)
  done
  slow=(-x SLOW_RANK)
  export SLOW_RANK=2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hits=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  code=0
  timeout -k 10 "$limit" mpirun --oversubscribe -np 4 "${slow[@]}" "$tmp/wrap.sh" \
    "$bin" "${args[@]}" >"$tmp/out" 2>"$tmp/err" || code=$?
  if [ -n "$logs" ]; then
    mkdir -p "$logs"
    cp "$tmp/out" "$logs/run$i.out"
    cp "$tmp/err" "$logs/run$i.err"
  fi
  named=$(grep '^# host emu' "$tmp/out" | sed 's/^# host \(emu[0-9]*\).*/\1/' | sort -u | tr '\n' ' ' || true)
  confirmed=$(grep -c '^# host emu2 .*confirmed with' "$tmp/out" || true)
  echo "run $i: exit $code, $(( $(date +%s) - start )) s, named: ${named:-none}, emu2 confirmed: $confirmed"
  if [ "$mode" = quiet ] && [ -z "$named" ]; then hits=$((hits + 1)); fi
  if [ "$mode" = starved ] && [ "$named" = "emu2 " ] && [ "$confirmed" -ge 1 ] && [ "$code" = 2 ]; then
    hits=$((hits + 1))
  fi
done
case $mode in
  quiet) echo "quiet: no host named in $hits of $runs" ;;
  starved) echo "starved: emu2 alone named, confirmed, exit 2 in $hits of $runs" ;;
esac
