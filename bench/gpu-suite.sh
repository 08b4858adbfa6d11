#!/usr/bin/env bash
# GPU tests and benchmarks in one go, on a machine with NVIDIA GPUs and NCCL.
#
#   bench/gpu-suite.sh [STAGE ...]      (default: every stage)
#
# Stages: probe ptx smoke sweep dtypes graph corrupt mproc doctor check.
# Writes logs and a summary table under $OUT (default bench-out/). The
# binary is $COLLBENCH (default dist/collbench, built on the dev machine with
# `cargo build --release` and copied there). NVLink multicast stays off:
# on shared hosts NVLS can take the GPUs down.
set -u
cd "$(dirname "$0")/.."
B=${COLLBENCH:-dist/collbench}
OUT=${OUT:-bench-out}
KERNELS=${KERNELS:-crates/nccl/kernels}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
stages=${*:-probe ptx smoke sweep dtypes graph corrupt mproc doctor check}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
log() { echo "== $*" | tee -a "$OUT/suite.log"; }
timed() { # name timeout cmd...: run, keep output, record wall time and exit code
  local name=$1 t=$2; shift 2
  local s=$(date +%s.%N)
  timeout "$t" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"
  local rc=$? e=$(date +%s.%N)
  printf '%-14s rc=%-3s %7.1f s  %s\n' "$name" "$rc" "$(awk "BEGIN{print $e - $s}")" "$*" | tee -a "$OUT/suite.log"
}
for st in $stages; do
  case $st in
  probe)
    log probe
    { nvidia-smi; nvidia-smi topo -m; nvidia-smi nvlink -s; nvcc --version; ls -l /usr/lib/x86_64-linux-gnu/libnccl*; } > "$OUT/probe.txt" 2>&1 ;;
  ptx)
    log "ptx (verification kernels)"
    if "$KERNELS/regen-ptx.sh" "$OUT/verify.ptx" >> "$OUT/suite.log" 2>&1; then
      export COLLBENCH_PTX=$OUT/verify.ptx
    fi ;;
  ref)
    # Same-day reference: a minimal nccl-tests-style all_reduce timer built
    # here against the machine's NCCL (nccl-tests itself is not installed).
    nvcc -O2 -o "$OUT/nccl_ref" ${REF:-bench/ref/nccl_ref.cu} -lnccl -lcuda >> "$OUT/suite.log" 2>&1 &&
      timed ref 120 "$OUT/nccl_ref" rt 20 8 8589934592 ;;
  smoke)
    timed smoke 40 "$B" run all_reduce -b 8 -e 64M -f 8 -w 1 -n 5 ;;
  sweep)
    # The anchor's command shape: seven ops, 8 B - 8 GiB, one process, all GPUs.
    timed sweep 120 "$B" run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv \
      -b 8 -e 8G -f 2 -w 5 -n 20 --output "$OUT/sweep.json" ;;
  extra)
    timed extra 60 "$B" run gather scatter hypercube -b 8 -e 1G -f 4 -w 2 -n 10 ;;
  dtypes)
    timed dtypes 60 "$B" run all -b 1K -e 4M -f 64 -d all -o all -w 1 -n 2 ;;
  graph)
    timed graph 30 env COLLBENCH_DEBUG=1 NCCL_DEBUG=WARN "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10
    timed nograph 30 "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 ;;
  events)
    # Does recording per-iteration events in the timed loop cost small sizes?
    timed ev_separate 30 env COLLBENCH_ITER_EVENTS=separate "$B" run all_reduce -b 8 -e 64K -f 2 -w 5 -n 20
    timed ev_inline 30 env COLLBENCH_ITER_EVENTS=inline "$B" run all_reduce -b 8 -e 64K -f 2 -w 5 -n 20 ;;
  corrupt)
    timed corrupt 40 "$B" run all_reduce reduce_scatter -b 1M -e 1M --test-corrupt ;;
  mproc)
    # One process per GPU, no MPI: torchrun-style variables on loopback.
    log mproc
    s=$(date +%s.%N)
    for r in $(seq 0 $((NGPU - 1))); do
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
        timeout 120 "$B" run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv \
        -b 8 -e 8G -f 2 -w 5 -n 20 --output "$OUT/mproc$r.json" > "$OUT/mproc$r.txt" 2> "$OUT/mproc$r.err" &
    done
    wait
    echo "mproc done in $(awk "BEGIN{print $(date +%s.%N) - $s}") s" | tee -a "$OUT/suite.log" ;;
  mcheck)
    # check and preflight with one process per GPU.
    for r in $(seq 0 $((NGPU - 1))); do
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29613 \
        timeout 60 "$B" preflight > "$OUT/mpreflight$r.txt" 2>&1 &
    done
    wait
    for r in $(seq 0 $((NGPU - 1))); do
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29614 \
        timeout 120 "$B" check --baseline h200x2 > "$OUT/mcheck$r.txt" 2>&1 &
    done
    wait ;;
  mgraph)
    for r in $(seq 0 $((NGPU - 1))); do
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29612 \
        timeout 30 "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10 > "$OUT/mgraph$r.txt" 2> "$OUT/mgraph$r.err" &
    done
    wait ;;
  doctor)
    timed doctor 60 "$B" doctor
    timed preflight 60 "$B" preflight ;;
  check)
    timed check 60 "$B" check --baseline h200x2 ;;
  esac
done
log done
