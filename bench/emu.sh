#!/usr/bin/env bash
# An emulated multi-host cluster on ONE GPU: collbench's test bed for every
# path that needs more than one rank (../shared/recipes/emulated-hosts.md).
# W processes on GPU 0, each its own host to NCCL (NCCL_HOSTID), joined by
# NCCL's socket transport over loopback, kernels side by side under CUDA
# MPS; the real nccl-tests (MPI build) runs the same way in the same call.
#
#   bench/emu.sh [STAGE ...]
#     stages: ntbuild pinning explain tuner faults check zmodes parity2
#     parity4 (default: all of them, in that order); issue 23's tune
#     stages, each named to run: tune tunerepro tunecsv buffsize nauto
#     commprobe falls cpuvar
#     (bench/emu_tune.py judges them; see their comments below)
#
# ntbuild  builds nccl-tests 2.19.6 with MPI=1 from $NTSRC into $NT (skipped
#          when $NT/all_reduce_perf exists).
# parity2, parity4  the seven ops and alltoallv, collbench and nccl-tests
#          interleaved (A B, B A, ...), $PARITY_ROUNDS rounds (default
#          3: with two, nccl-tests' noise is one pair of rounds, a band of
#          x and 1/x, and a 4% difference read as outside), 2 or 4 hosts.
#          bench/emu_parity.py gives cb/nt and nt/nt (the noise).
# zmodes   all_reduce -z 3 beside nccl-tests' (2 hosts); ZMODES="3 1" adds
#          -z 1.
# explain  --explain against NCCL's TUNING log (bench/explain_check.py),
#          5 ops, 8 B - 64 MiB, 2 and 4 hosts.
# tuner    CSV rules through --tuner-config, and collbench's exported
#          plugin under the real nccl-tests, checked against the TUNING log
#          (bench/tuner_check.py).
# faults   kill -9 and SIGSTOP of a peer inside NCCL calls (rank 1 and
#          rank 0, 2 and 4 processes, $TRIALS trials; run and check): the
#          survivors' line and exit code and when, and the stopped
#          process's exit once continued (bench/emu_faults.py).
# pinning  every process at LOCAL_RANK=0 (one-GPU pods) against
#          nccl-tests, small sizes.
# check    `check` on 4 hosts, quiet and with one host's process starved
#          of CPU (one CPU shared with two busy loops), $CHECK_TRIALS runs
#          each: the host-pair tests must name host 2 (ranks 2) and exit
#          non-zero when it is starved, and name nobody when it is not.
#
# CB=dist/collbench, NTSRC=dist/nccl-tests (source), NT=/tmp/nt/build.
# One call ran every stage in 487 s (bench/results/emu/, call 9, with
# PARITY_ROUNDS=2 and CHECK_TRIALS=3); with these defaults (PARITY_ROUNDS=3,
# measured in call 11, and CHECK_TRIALS=2) the same calls' stage times add
# up to about 535 s. Issue 24's 5 quiet + 5 starved check trials are a call
# of their own: CHECK_TRIALS=5 bash bench/emu.sh check (174 s, call 10).
# A stage is skipped, and said so, once EMU_BUDGET seconds (default 540)
# have passed: a device call ends at 600 s and what a killed stage had done
# is lost, what the earlier stages packed is not.
# Results under $OUT/emu/<stage>/, all tarred to $OUT/emu.tgz after each
# stage (only 8 files come back from a device call). A dry run without a GPU
# (collbench on its CPU backend, one process per rank, no MPS, no
# nccl-tests): EMU_DRY=1 CB=target/release/collbench bench/emu.sh faults
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
CB=$(realpath "${CB:-dist/collbench}"); NTSRC=${NTSRC:-dist/nccl-tests}; NT=${NT:-/tmp/nt/build}
ROUNDS=${ROUNDS:-2}; TRIALS=${TRIALS:-5}; T=${T:-5}; CHECK_TRIALS=${CHECK_TRIALS:-2}
PARITY_ROUNDS=${PARITY_ROUNDS:-3}
EMU_BUDGET=${EMU_BUDGET:-540}; START=$(date +%s.%N)
ROOT=${OUT:-bench-out}; O=$ROOT/emu; mkdir -p "$O"
DRY=${EMU_DRY:-0}
OPS="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv alltoallv"
SWEEP="-b 64 -e 64M -f 16 -w 5 -n 20"
CHECK="--quick --size 4M"
DRYFLAGS=""
[ "$DRY" = 1 ] && { DRYFLAGS="--backend cpu --ranks 1"; export COLLBENCH_TEST_CPU_PER_PROCESS=1; }

log() { echo "== $*" | tee -a "$O/log.txt"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
# guard SECONDS PID...: kills the PIDs after SECONDS unless unguard runs
# first (GUARD holds it). Its output goes nowhere, so a guard left sleeping
# never holds a pipe open.
guard() { local n=$1; shift; ( sleep "$n"; kill -9 "$@" ) > /dev/null 2>&1 & GUARD=$!; }
unguard() { pkill -P "$GUARD" sleep 2>/dev/null; kill "$GUARD" 2>/dev/null; wait "$GUARD" 2>/dev/null; }

# MPS: the processes' kernels run side by side (without it every step
# time-slices the GPU: 4.5 ms for an 8 B all_reduce). Stopped whatever
# happens.
MPSCTL=/usr/local/nvidia/bin/nvidia-cuda-mps-control
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
if [ "$DRY" != 1 ]; then
  mkdir -p /tmp/mps /tmp/mpslog
  $MPSCTL -d && log "MPS started"
  trap 'echo quit | $MPSCTL; echo "== MPS stopped" >> "$O/log.txt"' EXIT
fi

# cb_start DIR NAME W [VAR=VALUE ...] -- ARGS...: W collbench processes as W
# hosts (ranks 0..W-1, host ids emu<job>-<r>), in the background. Their pids
# (the collbench processes themselves, so that a signal reaches them) in
# PIDS; rank r's stdout and stderr in DIR/NAME.r<r>.{txt,err}. Every
# process has LOCAL_RANK=r unless the VAR list says otherwise.
JOB=0
# EMU_HOSTCPUS=1: each emulated host runs on CPUs of its own, as hosts do:
# the machine's physical cores (with their hyperthreads) split into W runs
# of cores, host r on run r (taskset; NCCL's threads, collbench's pinning
# and tune's children all stay inside it). Without it every host's
# threads share every CPU. HOSTCPUS is read at each start, so a stage may
# switch it between runs.
HOSTCPUS=${EMU_HOSTCPUS:-0}
# host_cpus W: the W hosts' CPU lists, separated by ';'.
host_cpus() {
  lscpu -p=CPU,CORE | python3 -c '
import os, sys
w, allowed, cores = int(sys.argv[1]), os.sched_getaffinity(0), {}
for ln in sys.stdin:
    if ln.startswith("#"): continue
    cpu, core = map(int, ln.split(",")[:2])
    if cpu in allowed: cores.setdefault(core, []).append(cpu)
order = sorted(cores.values(), key=min)
n = len(order)
runs = [order[r % n] for r in range(w)] if n < w else [sum(order[r * n // w:(r + 1) * n // w], []) for r in range(w)]
print(";".join(",".join(map(str, sorted(c))) for c in runs))' "$1"
}
cb_start() {
  local dir=$1 name=$2 w=$3; shift 3
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  JOB=$((JOB + 1))
  # From this shell's own pid: jobs started side by side from forked
  # subshells share $RANDOM's state (two took one port on the device).
  # Below Linux's ephemeral range (32768-60999), where NCCL's and the
  # other jobs' own sockets take theirs: a port at 37134 was in use once.
  local port=$((20000 + (BASHPID * 131 + JOB * 7919) % 12000)) r
  PIDS=()
  local lists=() pre=()
  [ "$HOSTCPUS" = 1 ] && IFS=';' read -ra lists <<< "$(host_cpus "$w")"
  for r in $(seq 0 $((w - 1))); do
    pre=(); [ "$HOSTCPUS" = 1 ] && pre=(taskset -c "${lists[r]}")
    "${pre[@]}" env NCCL_HOSTID="emu$JOB-$r" CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=$w \
      LOCAL_RANK=$r LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      COLLBENCH_BIND=127.0.0.1 "${vars[@]}" \
      "$CB" "$@" $DRYFLAGS > "$dir/$name.r$r.txt" 2> "$dir/$name.r$r.err" &
    PIDS+=($!)
  done
}

# cb_wait DIR NAME [LIMIT]: waits for PIDS (killing what is left after LIMIT
# seconds, default 240), logs each rank's exit code, copies rank 0's stdout
# to DIR/NAME.txt.
cb_wait() {
  local dir=$1 name=$2 limit=${3:-240} s; s=$(now)
  guard "$limit" "${PIDS[@]}"
  local rcs=""
  for p in "${PIDS[@]}"; do wait "$p"; rcs+="$? "; done
  unguard
  cp "$dir/$name.r0.txt" "$dir/$name.txt"
  printf '%-34s rc=%-12s %6.1f s\n' "$name" "$rcs" "$(secs "$s" "$(now)")" | tee -a "$O/log.txt"
}

# cb DIR NAME W [VAR=VALUE ...] -- ARGS...: start and wait.
cb() { local dir=$1 name=$2; cb_start "$@"; cb_wait "$dir" "$name"; }

# nt DIR NAME W BIN ARGS...: the real nccl-tests binary on W emulated hosts
# through mpirun, stdout to DIR/NAME.txt (NCCL logs there too). NT_X: more
# `-x NAME` options, for variables a stage sets for nccl-tests.
nt() {
  local dir=$1 name=$2 w=$3 bin=$4; shift 4
  [ "$DRY" = 1 ] && return 0
  JOB=$((JOB + 1))
  local s cpus=(); s=$(now)
  [ "$HOSTCPUS" = 1 ] && cpus=(-x "EMU_CPULISTS=$(host_cpus "$w")")
  timeout 240 mpirun --allow-run-as-root -np "$w" --bind-to none --oversubscribe \
    -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME -x NCCL_IB_DISABLE -x CUDA_MPS_PIPE_DIRECTORY \
    -x NCCL_TESTS_DEVICE=0 -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_TUNER_PLUGIN \
    -x NCCL_TUNER_CONFIG_FILE -x EMU_JOB=$JOB "${cpus[@]}" ${NT_X:-} \
    bash -c 'export NCCL_HOSTID=emu$EMU_JOB-$OMPI_COMM_WORLD_RANK
      [ -n "${EMU_CPULISTS:-}" ] || exec "$@"
      IFS=";" read -ra L <<< "$EMU_CPULISTS"; exec taskset -c "${L[$OMPI_COMM_WORLD_RANK]}" "$@"' _ \
    "$NT/$bin" "$@" -g 1 > "$dir/$name.txt" 2> "$dir/$name.err"
  printf '%-34s rc=%-12s %6.1f s\n' "$name" "$?" "$(secs "$s" "$(now)")" | tee -a "$O/log.txt"
}

# pack: every stage's folder so far and the log, as $ROOT/emu.tgz (one
# file, remade after each stage, so a call cut short keeps what was done).
pack() { tar czf "$ROOT/emu.tgz.part" -C "$ROOT" emu 2>/dev/null && mv "$ROOT/emu.tgz.part" "$ROOT/emu.tgz"; }

stage_ntbuild() {
  if [ -x "$NT/all_reduce_perf" ]; then log "nccl-tests already built in $NT"; return; fi
  [ "$DRY" = 1 ] && return
  mkdir -p "$(dirname "$NT")" && cp -r "$NTSRC/." "$(dirname "$NT")"
  # An MPI_HOME with include/ and lib/libmpi.so, wherever the image keeps
  # them (a runtime-only install has libmpi.so.40 and no dev link).
  local mh=/tmp/mpihome inc lib
  inc=$(dirname "$(find /usr/lib/x86_64-linux-gnu/openmpi /usr/include /usr/lib -name mpi.h 2>/dev/null | head -n 1)")
  lib=$(find /usr/lib/x86_64-linux-gnu /usr/lib -maxdepth 3 -name 'libmpi.so*' 2>/dev/null | head -n 1)
  mkdir -p $mh/lib && ln -sfn "$inc" $mh/include && ln -sf "$lib" $mh/lib/libmpi.so
  log "MPI: include $inc, library $lib"
  (cd "$(dirname "$NT")" && make -j16 MPI=1 MPI_HOME=$mh \
    CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    > "$O/ntbuild/build.log" 2>&1)
  log "nccl-tests build rc=$? ($(ls "$NT" | grep -c _perf) binaries)"
}

# parity_world W: the seven ops and alltoallv on W hosts, $PARITY_ROUNDS rounds.
parity_world() {
  local w=$1 d=$O/parity$1 r side op
  for r in $(seq "$PARITY_ROUNDS"); do
    mkdir -p "$d/nt$r"
    local order="cb nt"; [ $((r % 2)) = 0 ] && order="nt cb"
    for side in $order; do
      if [ "$side" = cb ]; then
        cb "$d" "cb$r" "$w" -- run $OPS $SWEEP
      else
        for op in $OPS; do nt "$d/nt$r" "$op" "$w" "${op}_perf" $SWEEP; done
      fi
    done
  done
  python3 bench/emu_parity.py "$d" | tee "$d/parity.md" | tee -a "$O/log.txt"
}
stage_parity2() { parity_world 2; }
stage_parity4() { parity_world 4; }

# -z 3 (barrier after each iteration, left out of the time) and -z 1,
# all_reduce on 2 hosts beside nccl-tests', interleaved, $ZROUNDS rounds
# (default 4, about 7 s each: with two rounds one 64 MiB row is the whole
# busbw figure, and one slow round put it outside the noise).
stage_zmodes() {
  local z r
  for z in ${ZMODES:-3}; do
    local d=$O/zmodes/z$z
    for r in $(seq "${ZROUNDS:-4}"); do
      mkdir -p "$d/nt$r"
      if [ $((r % 2)) = 1 ]; then
        cb "$d" "cb$r" 2 -- run all_reduce $SWEEP -z $z
        nt "$d/nt$r" all_reduce 2 all_reduce_perf $SWEEP -z $z
      else
        nt "$d/nt$r" all_reduce 2 all_reduce_perf $SWEEP -z $z
        cb "$d" "cb$r" 2 -- run all_reduce $SWEEP -z $z
      fi
    done
    python3 bench/emu_parity.py "$d" | tee "$d/parity.md" | tee -a "$O/log.txt"
  done
}

stage_explain() {
  local d=$O/explain w
  for w in 2 4; do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING cb "$d" "ex$w" "$w" -- \
      run all_reduce all_gather reduce_scatter broadcast reduce -b 8 -e 64M -f 4 -w 1 -n 2 -c 0 \
      --explain --output "$d/ex$w.json"
    python3 bench/explain_check.py "$d/ex$w.json" "$d/ex$w.r0.txt" > "$d/check$w.txt" 2>&1
    log "explain $w hosts: rc=$? $(tail -n 1 "$d/check$w.txt")"
  done
}

stage_tuner() {
  local d=$O/tuner w op
  # One file of rules, several ops, algorithms, protocols and channels.
  cat > "$d/rules.csv" <<'EOF'
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
allreduce,1024,65536,tree,ll,1,-1,-1,-1,-1
allreduce,1048576,16777216,ring,ll,1,-1,-1,-1,-1
allreduce,33554432,67108864,ring,simple,2,-1,-1,-1,-1
allgather,1048576,67108864,ring,simple,1,-1,-1,-1,-1
reducescatter,4096,4194304,ring,ll,2,-1,-1,-1,-1
broadcast,1048576,67108864,ring,simple,1,-1,-1,-1,-1
EOF
  for w in 2 4; do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING cb "$d" "cb$w" "$w" -- \
      run all_reduce all_gather reduce_scatter broadcast -b 8 -e 64M -f 4 -w 1 -n 2 -c 0 \
      --tuner-config "$d/rules.csv"
    python3 bench/tuner_check.py "$d/rules.csv" "$d/cb$w.r0.txt" "$w" > "$d/check_cb$w.txt" 2>&1
    log "tuner collbench $w hosts: rc=$? $(tail -n 1 "$d/check_cb$w.txt")"
  done
  # collbench's plugin, exported, under the real nccl-tests.
  "$CB" tuner-plugin "$d/plugin" > "$d/plugin.txt" 2>&1; log "tuner-plugin rc=$?"
  for op in all_reduce all_gather reduce_scatter broadcast; do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_TUNER_PLUGIN="$d/plugin/libnccl-tuner-collbench.so" \
      NCCL_TUNER_CONFIG_FILE="$d/rules.csv" nt "$d" "nt_$op" 2 "${op}_perf" -b 8 -e 64M -f 4 -w 1 -n 2
  done
  cat "$d"/nt_*.txt > "$d/nt_all.log" 2>/dev/null
  python3 bench/tuner_check.py "$d/rules.csv" "$d/nt_all.log" 2 > "$d/check_nt.txt" 2>&1
  log "tuner nccl-tests + exported plugin: rc=$? $(tail -n 1 "$d/check_nt.txt")"
}

# fault_trial DIR NAME W STOPPED CMD...: W processes of a long run; once
# rank 0 has started its first case (its table header, or check's first
# progress line) and $STOP_AFTER s more (default 3) have passed, so the
# stop lands inside NCCL calls (a fixed 4 s after the start, on a machine
# just started, stopped one trial in five still in NCCL's setup, where only
# --timeout-s names it), rank STOPPED gets SIGSTOP; the others' exit codes
# and times are logged; 8 s after they are done the stopped one gets
# SIGCONT, and the time until it ends is logged too. STOPPED=k9 kills rank 1
# instead. One line per trial in DIR/trials.tsv.
fault_trial() {
  local dir=$1 name=$2 w=$3 who=$4; shift 4
  cb_start "$dir" "$name" "$w" -- "$@"
  local until=$(( $(date +%s) + 60 ))
  [ -n "${STOP_AT_START:-}" ] && { sleep "$STOP_AT_START"; until=0; }
  while [ "$(date +%s)" -lt $until ] \
    && ! grep -q '(elements)' "$dir/$name.r0.txt" 2>/dev/null \
    && ! grep -q '^collbench check: ' "$dir/$name.r0.err" 2>/dev/null; do
    sleep 0.1
  done
  [ -z "${STOP_AT_START:-}" ] && sleep "${STOP_AFTER:-3}"
  local victim=${who#k9}; [ "$who" = k9 ] && victim=1
  local vp=${PIDS[$victim]} s; s=$(now)
  if [ "$who" = k9 ]; then kill -9 "$vp" 2>/dev/null; else kill -STOP "$vp"; fi
  local line="" rcs="" last=0 r said="-"
  # When the first survivor's line appears (polled every 0.1 s).
  local errs=() deadline=$(( $(date +%s) + 60 ))
  for r in $(seq 0 $((w - 1))); do [ "$r" != "$victim" ] && errs+=("$dir/$name.r$r.err"); done
  while [ "$(date +%s)" -lt $deadline ]; do
    if grep -q -h '^collbench: ' "${errs[@]}" 2>/dev/null; then said=$(secs "$s" "$(now)"); break; fi
    sleep 0.1
  done
  for r in $(seq 0 $((w - 1))); do
    [ "$r" = "$victim" ] && continue
    local p=${PIDS[$r]}
    guard 60 "$p"
    wait "$p"; rcs+="$? "; unguard
    last=$(secs "$s" "$(now)")
  done
  local cont="-" crc="-"
  if [ "$who" != k9 ]; then
    sleep 2
    local c; c=$(now); kill -CONT "$vp"
    guard 30 "$vp"
    wait "$vp"; crc=$?; unguard
    cont=$(secs "$c" "$(now)")
  else
    wait "$vp" 2>/dev/null
  fi
  line=$(grep -h '^collbench: ' "${errs[@]}" | grep -v warning | head -n 1)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$w" "$who" "$rcs" "$said" "$last" "$crc" "$cont" "$line" \
    | tee -a "$dir/trials.tsv" >> "$O/log.txt"
}

stage_faults() {
  local d=$O/faults t w
  printf 'trial\tprocesses\tstopped\tsurvivors_rc\tline_s\tsurvivors_s\tstopped_rc\tcontinued_s\tline\n' > "$d/trials.tsv"
  local long="run all_reduce -b 8 -e 8 -w 1 -n 100000000 -T $T"
  local chk="check --quick --size 1M --watchdog $T"
  # Two trials of each of the four configurations at a time (24
  # processes on the machine's 16 cores and one GPU).
  for t in $(seq "$TRIALS"); do
    for w in 2 4; do
      fault_trial "$d" "stop1_w${w}_$t" "$w" 1 $long &
      fault_trial "$d" "stop0_w${w}_$t" "$w" 0 $long &
    done
    [ $((t % 2)) = 0 ] || [ "$t" = "$TRIALS" ] && wait
  done
  # A rank stopped while NCCL creates the communicators (0.5 s after the
  # start, before any case): named by the setup guard within the
  # watchdog's deadline, exit 3.
  STOP_AT_START=0.5 fault_trial "$d" "setup_stop1_w2" 2 1 $long &
  STOP_AT_START=0.5 fault_trial "$d" "setup_stop1_w4" 4 1 $long &
  wait
  fault_trial "$d" "k9_w2" 2 k9 $long & fault_trial "$d" "k9_w4" 4 k9 $long &
  wait
  # check: a stopped rank in its first test (long enough at 1M on sockets).
  fault_trial "$d" "check_stop1_w2" 2 1 $chk -n 100000 & fault_trial "$d" "check_stop0_w4" 4 0 $chk -n 100000 &
  wait
  # The fault hook (a rank that stops calling, heartbeat alive).
  cb "$d" hook 2 -- run all_reduce -b 1M -e 1M -w 2 -n 50 -T "$T" --test-stop-calling 1:0:7
  python3 bench/emu_faults.py "$d/trials.tsv" "$T" | tee "$d/faults.md" | tee -a "$O/log.txt"
}

stage_pinning() {
  local d=$O/pinning r
  local small="-b 8 -e 64K -f 4 -w 20 -n 200"
  for r in $(seq "$ROUNDS"); do
    mkdir -p "$d/nt$r"
    cb "$d" "same$r" 2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 -- run all_reduce $small
    nt "$d/nt$r" all_reduce 2 all_reduce_perf $small
    cb "$d" "own$r" 2 -- run all_reduce $small
  done
  python3 bench/emu_parity.py "$d" same | tee "$d/pinning.md" | tee -a "$O/log.txt"
  python3 bench/emu_parity.py "$d" own | tee -a "$d/pinning.md" | tee -a "$O/log.txt"
}

stage_check() {
  local d=$O/check t f h=${CHECK_HOSTS:-4}
  for t in $(seq "$CHECK_TRIALS"); do
    cb "$d" "quiet$t" "$h" -- check $CHECK --json "$d/quiet$t.json"
  done
  [ "${CHECK_SLOW:-1}" = 1 ] || return 0
  # Host 2's process: one CPU, shared with two busy loops.
  local cpu=$(($(nproc) - 1))
  taskset -c $cpu sh -c 'while :; do :; done' & local b1=$!
  taskset -c $cpu sh -c 'while :; do :; done' & local b2=$!
  for t in $(seq "$CHECK_TRIALS"); do
    cb_start "$d" "slow$t" "$h" -- check $CHECK --json "$d/slow$t.json"
    taskset -a -p -c $cpu "${PIDS[2]}" > /dev/null 2>&1
    cb_wait "$d" "slow$t" 180
  done
  kill "$b1" "$b2" 2>/dev/null
  for f in "$d"/quiet[0-9]*.txt "$d"/slow[0-9]*.txt; do
    case $f in *.r[0-9]*.txt) continue ;; esac
    echo "$(basename "$f"): $(grep -h '^collbench check:' "$f" | tail -n 1)"
  done | tee "$d/verdicts.txt" >> "$O/log.txt"
}

# ---- issue 23: tune across two hosts (not in the default list: the
# search alone takes its budget, $TUNE_BUDGET, default 10m, more than a
# device call's 600 s: run it under bench/detach.sh, which outlives the
# call, and collect it in the next; its comment has the two calls) ----

# The search: table, shell lines, JSON and tuner CSV; then its bars.
stage_tune() {
  local d=$O/tune fake=""
  [ "$DRY" = 1 ] && fake="--test-fake ok"
  # TUNE_SWEEP: the ops and sizes (default: the bars' search).
  cb_start "$d" tune 2 -- tune ${TUNE_SWEEP:-all_reduce all_gather -b 1M -e 512M -f 8} \
    --budget "${TUNE_BUDGET:-10m}" --shell --json "$d/tune.json" --csv "$d/tuner.csv" $fake
  cb_wait "$d" tune 900
  grep '^export ' "$d/tune.txt" > "$d/winner.sh"
  log "tune winner: $(tr '\n' ' ' < "$d/winner.sh")"
  python3 bench/emu_tune.py gains "$d/tune.json" | tee "$d/gains.md" | tail -n 5 | tee -a "$O/log.txt"
}

# The --shell lines against the defaults, 3 rounds A B A B, collbench and
# nccl-tests alike, at the sizes the bars name (REPRO_SWEEP; needs
# stage_tune's winner.sh, or WINNER=path: a file of `export NAME=VALUE`
# lines; REPRO_OPS, REPRO_NAME: the ops, and the folder under emu/).
stage_tunerepro() {
  local d=$O/${REPRO_NAME:-tunerepro} w=${WINNER:-$O/tune/winner.sh} r op vars=() names=""
  local ops=${REPRO_OPS:-"all_reduce all_gather"}
  mkdir -p "$d"
  [ -s "$w" ] || { log "tunerepro: no winner in $w"; return; }
  while read -r _ kv; do vars+=("$kv"); names+=" -x ${kv%%=*}"; done < "$w"
  local sweep=${REPRO_SWEEP:-"-b 128M -e 512M -f 4 -w 2 -n 10"}
  for r in $(seq "${REPRO_ROUNDS:-3}"); do
    mkdir -p "$d/ntdef$r" "$d/ntenv$r"
    cb "$d" "cbdef$r" 2 -- run $ops $sweep
    cb "$d" "cbenv$r" 2 "${vars[@]}" -- run $ops $sweep
    for op in $ops; do
      nt "$d/ntdef$r" "$op" 2 "${op}_perf" $sweep
      ( export "${vars[@]}"; NT_X=$names; nt "$d/ntenv$r" "$op" 2 "${op}_perf" $sweep )
    done
  done
  python3 bench/emu_tune.py repro "$O/tune/tune.json" "$d" "$w" | tee "$d/repro.md" | tee -a "$O/log.txt"
}

# The search's own tuner CSV (tune/tuner.csv, nNodes/nRanks filled) with
# collbench's exported plugin under the real nccl-tests, the tuned ops and
# sizes: NCCL's TUNING log against the CSV's rules (bench/tuner_check.py;
# exit 2 there when the CSV holds no rule, as when every band's winner is
# an environment), and each run's exit code (nothing crashes).
stage_tunecsv() {
  local d=$O/tunecsv csv=${TUNE_CSV:-$O/tune/tuner.csv} op
  [ -s "$csv" ] || { log "tunecsv: no CSV in $csv"; return; }
  cp "$csv" "$d/tuner.csv"
  log "tunecsv: $(grep -vc '^#' "$d/tuner.csv") rules in $csv"
  "$CB" tuner-plugin "$d/plugin" > "$d/plugin.txt" 2>&1; log "tuner-plugin rc=$?"
  for op in all_reduce all_gather; do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_TUNER_PLUGIN="$d/plugin/libnccl-tuner-collbench.so" \
      NCCL_TUNER_CONFIG_FILE="$d/tuner.csv" nt "$d" "nt_$op" 2 "${op}_perf" -b 1M -e 512M -f 8 -w 1 -n 2
  done
  cat "$d"/nt_*.txt > "$d/nt_all.log" 2>/dev/null
  log "tunecsv: plugin lines $(grep -ci 'collbench' "$d/nt_all.log"); $(grep -h 'Out of bounds' "$d"/nt_*.txt | tr '\n' ' ')"
  python3 bench/tuner_check.py "$d/tuner.csv" "$d/nt_all.log" 2 > "$d/check_nt.txt" 2>&1
  log "tunecsv nccl-tests + exported plugin: rc=$? $(tail -n 1 "$d/check_nt.txt")"
}

# NCCL's default buffer size spelled out as a user's --env candidate:
# "no gain" in each of $TRIALS searches. The search screens all 28
# candidates of the 64 MiB band: at 15 s (call 12) it measured none of
# them; the 10-minute search spent 30 s on its 64 MiB all_reduce band.
stage_buffsize() {
  local d=$O/buffsize t fake=""
  [ "$DRY" = 1 ] && fake="--test-fake ok"
  for t in $(seq "$TRIALS"); do
    cb "$d" "s$t" 2 -- tune all_reduce -b 64M -e 64M --budget "${BUFFSIZE_BUDGET:-60s}" \
      --env NCCL_BUFFSIZE=4194304 --json "$d/s$t.json" $fake
  done
  python3 bench/emu_tune.py nogain NCCL_BUFFSIZE=4194304 "$d"/s[0-9]*.json | tee "$d/nogain.md" | tee -a "$O/log.txt"
}

# The in-process candidates' figures from tune against the same settings
# set for a whole process in `run` and nccl-tests: the 10-minute search put
# channels=8 at 2.7-3.1x the default's time at 64 MiB and -R 1 at 6.9-8.4x
# (each candidate on a communicator of its own beside the default's, in the
# same process), where nccl-tests with NCCL_MIN_NCHANNELS=8 took 1.2x
# (anchors/emu2). $PROBE_ROUNDS rounds (default 2), each: defaults, 8
# channels, -R 1, for collbench then nccl-tests.
stage_commprobe() {
  local d=$O/commprobe r op sweep="-b 64M -e 64M -w 2 -n 10"
  local ch=(NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8)
  for r in $(seq "${PROBE_ROUNDS:-2}"); do
    mkdir -p "$d/ntdef$r" "$d/ntch8$r" "$d/ntreg$r"
    cb "$d" "cbdef$r" 2 -- run all_reduce all_gather $sweep
    cb "$d" "cbch8$r" 2 "${ch[@]}" -- run all_reduce all_gather $sweep
    cb "$d" "cbreg$r" 2 -- run all_reduce all_gather $sweep -R 1
    for op in all_reduce all_gather; do
      nt "$d/ntdef$r" "$op" 2 "${op}_perf" $sweep
      ( export "${ch[@]}"; NT_X="-x NCCL_MIN_NCHANNELS -x NCCL_MAX_NCHANNELS"; nt "$d/ntch8$r" "$op" 2 "${op}_perf" $sweep )
      nt "$d/ntreg$r" "$op" 2 "${op}_perf" $sweep -R 1
    done
  done
  python3 bench/emu_tune.py probe "$O/tune/tune.json" "$d" | tee "$d/probe.md" | tee -a "$O/log.txt"
}

# Does a setting's fall (2x2's busbw halving in some runs, call 13) belong
# to a process or to a stretch of time? $FALLS_PROCS processes (default 6)
# one after the other, each all_gather 128M, $FALLS_ITERS timed iterations
# (default 300) with every iteration's time kept (-I 1 -J), the setting of
# FALLS_ENV (default 2x2); one default process first and last
# (bench/emu_tune.py falls).
stage_falls() {
  local d=$O/falls p vars=(${FALLS_ENV:-NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2})
  local one="all_gather -b 128M -e 128M -w 5 -n ${FALLS_ITERS:-300} -I 1 -c 0"
  cb "$d" "def0" 2 -- run $one -J "$d/def0.json"
  for p in $(seq "${FALLS_PROCS:-6}"); do
    cb "$d" "env$p" 2 "${vars[@]}" -- run $one -J "$d/env$p.json"
  done
  cb "$d" "def9" 2 -- run $one -J "$d/def9.json"
  python3 bench/emu_tune.py falls "$d" | tee "$d/falls.md" | tee -a "$O/log.txt"
}

# Where do the defaults' swings between processes come from? Run to run,
# NCCL's default busbw moved by up to +-27% (call 14) while each process
# held steady within itself. Every emulated host's threads (collbench's or
# nccl-tests' launch thread, NCCL's proxy and socket threads, all busy)
# share every CPU, so how they fall on cores and hyperthreads is each
# process's luck. $CPUVAR_ROUNDS rounds (default 6), each with the hosts
# on shared CPUs and on CPUs of their own (EMU_HOSTCPUS), order
# alternating: nccl-tests' defaults (all_reduce, all_gather); rounds 1-3
# also collbench's defaults and nccl-tests with 4 sockets per thread
# (call 14's winner). bench/emu_tune.py cpuvar: the spread per placement.
stage_cpuvar() {
  local d=$O/cpuvar r p op sweep="-b 128M -e 512M -f 4 -w 2 -n 10"
  local env=(NCCL_NSOCKS_PERTHREAD=4 NCCL_SOCKET_NTHREADS=1)
  { nproc; lscpu; lscpu -e; cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpuset.cpus.effective; } > "$d/cpus.txt" 2>&1
  log "cpuvar: host CPUs (2 hosts) $(host_cpus 2)"
  for r in $(seq "${CPUVAR_ROUNDS:-6}"); do
    local order="shared own"; [ $((r % 2)) = 0 ] && order="own shared"
    for p in $order; do
      HOSTCPUS=0; [ "$p" = own ] && HOSTCPUS=1
      mkdir -p "$d/ntdef$p$r" "$d/ntenv$p$r"
      # Where each thread runs, 3 s into the first all_reduce.
      [ "$r" -le 2 ] && ( sleep 3; ps -eLo pid,tid,psr,pcpu,comm > "$d/threads_$p$r.txt" ) &
      for op in all_reduce all_gather; do nt "$d/ntdef$p$r" "$op" 2 "${op}_perf" $sweep; done
      if [ "$r" -le 3 ]; then
        cb "$d" "cbdef$p$r" 2 -- run all_reduce all_gather $sweep
        ( export "${env[@]}"; NT_X="-x NCCL_NSOCKS_PERTHREAD -x NCCL_SOCKET_NTHREADS"
          nt "$d/ntenv$p$r" all_reduce 2 all_reduce_perf $sweep )
      fi
    done
    pack
  done
  HOSTCPUS=${EMU_HOSTCPUS:-0}
  python3 bench/emu_tune.py cpuvar "$d" | tee "$d/cpuvar.md" | tee -a "$O/log.txt"
}

# -n auto against -n 20: the seven ops, 8 B - 1 GiB, rounds interleaved
# ($NAUTO_ROUNDS, default 3; a -n 20 round is about 2.5 minutes on two
# emulated hosts).
stage_nauto() {
  local d=$O/nauto r m s
  local sweep="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e ${NAUTO_MAX:-1G} -f 8"
  for r in $(seq "${NAUTO_ROUNDS:-3}"); do
    local order="n20 auto"; [ $((r % 2)) = 0 ] && order="auto n20"
    for m in $order; do
      s=$(now)
      if [ "$m" = n20 ]; then cb "$d" "n20$r" 2 -- run $sweep -n 20; else cb "$d" "auto$r" 2 -- run $sweep -n auto; fi
      echo "$m $(secs "$s" "$(now)")" >> "$d/wall$r.txt"
    done
    pack  # a call cut short keeps the rounds done
  done
  python3 bench/emu_tune.py nauto "$d" | tee "$d/nauto.md" | tee -a "$O/log.txt"
}

for st in ${*:-ntbuild pinning explain tuner faults check zmodes parity2 parity4}; do
  if python3 -c "import sys; sys.exit(0 if $(now) - $START > $EMU_BUDGET else 1)"; then
    log "stage $st: skipped: the call's budget (EMU_BUDGET=$EMU_BUDGET s) is spent"
    continue
  fi
  mkdir -p "$O/$st"; s=$(now)
  "stage_$st"
  log "stage $st: $(secs "$s" "$(now)") s"
  pack
done
