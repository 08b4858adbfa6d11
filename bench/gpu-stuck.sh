#!/usr/bin/env bash
# Issue 16's GPU checks of the stuck-collective watchdog, two processes on
# two GPUs of one host (torchrun-style variables, no launcher needed):
#
#   bench/gpu-stuck.sh [STAGE ...]   stages: hook sigstop sigstop0 speed (default: all)
#
# hook:    rank 1 stops calling NCCL at iteration 7 (its heartbeat alive):
#          both ranks must print the one line naming rank 1 and its host
#          within -T + 5 s and exit 5.
# sigstop: rank 1 is stopped with SIGSTOP mid-run: rank 0 must name rank 1
#          as silent within -T + 5 s and exit 5 (--timeout-s stays at its
#          60 s default: the watchdog, not the control plane, names it).
# sigstop0: the same with rank 0 stopped: rank 1 names rank 0, exit 5.
# speed:   the same run without a fault, this binary (NEW) against the
#          previous one (PREV), interleaved; median busbw ratio >= 0.99.
#
# NEW=dist/collbench, PREV=dist/collbench-prev, T (default 10), ROUNDS
# (default 5). Logs under $OUT/stuck. NVLink multicast off. EXTRA adds
# flags to every run: a dry run of the script without GPUs is
#   EXTRA="--backend cpu --ranks 1" COLLBENCH_TEST_CPU_PER_PROCESS=1 \
#     NEW=target/debug/collbench bench/gpu-stuck.sh hook sigstop sigstop0
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NEW=${NEW:-dist/collbench}; PREV=${PREV:-dist/collbench-prev}; T=${T:-10}
O=${OUT:-bench-out}/stuck; mkdir -p "$O"
log() { echo "== $*" | tee -a "$O/log.txt"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

# start NAME BIN ARGS...: ranks 0 and 1 in the background (pids in P0 P1:
# the collbench processes themselves, so that SIGSTOP reaches them),
# stdout/stderr to $O/NAME.rK.{txt,err}.
start() {
  local name=$1 bin=$2; shift 2
  local port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 \
      "$bin" run all_reduce ${EXTRA:-} "$@" > "$O/$name.r$r.txt" 2> "$O/$name.r$r.err" &
    eval "P$r=$!"
  done
}

# report NAME PID START: waits for PID, logs its exit code, seconds since
# START and its stderr's last line.
report() {
  # A process that never ends is killed after 90 s (rc 137), so the call
  # goes on.
  ( sleep 90; kill -9 "$2" 2>/dev/null ) & local guard=$!
  wait "$2"; local rc=$?
  kill "$guard" 2>/dev/null
  log "$1 rc=$rc after $(secs "$3" "$(now)") s: $(tail -n 1 "$O/$1.err")"
}

for st in ${*:-hook sigstop sigstop0 speed}; do case $st in
hook)
  s=$(now)
  start hook "$NEW" -b 64M -e 64M -w 2 -n 50 -T "$T" --test-stop-calling 1:0:7
  report hook.r0 "$P0" "$s"; report hook.r1 "$P1" "$s"
  log "want: rc=5 on both within $T + 5 s (plus start-up), the line naming rank 1 at iteration 7" ;;
sigstop|sigstop0)
  start "$st" "$NEW" -b 64M -e 64M -w 2 -n 100000 -T "$T"
  sleep 15
  if [ "$st" = sigstop ]; then stopped=1 P=$P1 W=$P0 other=0; else stopped=0 P=$P0 W=$P1 other=1; fi
  kill -STOP "$P"; s=$(now); log "rank $stopped (pid $P) stopped"
  report "$st.r$other" "$W" "$s"
  kill -KILL "$P" 2>/dev/null; wait "$P" 2>/dev/null
  log "want: rank $other rc=5 within $T + 5 s, naming rank $stopped silent" ;;
speed)
  for r in $(seq "${ROUNDS:-5}"); do
    for which in $( [ $((r % 2)) = 1 ] && echo "prev new" || echo "new prev"); do
      bin=$NEW; [ "$which" = prev ] && bin=$PREV
      start "speed.$which$r" "$bin" -b 8 -e 8G -f 2 -w 5 -n 20
      wait "$P0" "$P1"
    done
  done
  python3 - "$O" <<'EOF' | tee -a "$O/log.txt"
import glob, statistics, sys
def busbw(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if f and not line.startswith('#') and len(f) >= 13:
            rows[int(f[0])] = float(f[7])
    return rows
o = sys.argv[1]
new = [busbw(p) for p in sorted(glob.glob(f'{o}/speed.new*.r0.txt'))]
prev = [busbw(p) for p in sorted(glob.glob(f'{o}/speed.prev*.r0.txt'))]
ratios = []
for size in sorted(new[0]):
    n = statistics.median(r[size] for r in new)
    p = statistics.median(r[size] for r in prev)
    if p > 0:
        ratios.append(n / p)
        print(f'{size:>12} new {n:8.2f} prev {p:8.2f} ratio {n / p:.3f}')
print(f'median busbw ratio new/prev: {statistics.median(ratios):.3f} (want >= 0.99)')
EOF
  ;;
esac; done
