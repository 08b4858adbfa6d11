#!/usr/bin/env bash
# GPU tests and benchmarks in one go, on a machine with NVIDIA GPUs and NCCL.
#
#   bench/gpu-suite.sh [STAGE ...]      (default: every stage)
#
# Stages: probe ptx smoke sweep dtypes graph corrupt mproc doctor check
# (default); extra events mcheck mgraph register2; and, after `ref` has built
# bench/ref/nccl_ref.cu there, the same-lease comparisons paired mpaired
# mgraphs abtest a2aab and the -G hang diagnosis gdiag (ROUNDS=N repeats).
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
    # Same-day reference: a minimal nccl-tests-style timer built here against
    # the machine's NCCL (nccl-tests itself is not installed).
    nvcc -O2 -o "$OUT/nccl_ref" bench/ref/nccl_ref.cu -lnccl >> "$OUT/suite.log" 2>&1 ||
      log "nccl_ref did not build" ;;
  gdiag)
    # -G with every GPU in one process (NCCL group over two devices captured
    # in one thread): collbench, with a stack dump if it hangs, and the C
    # reference doing the same.
    timed gref 60 "$OUT/nccl_ref" all_reduce 50 8 1048576 10
    COLLBENCH_DEBUG=1 "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10 \
      > "$OUT/g2graph.txt" 2> "$OUT/g2graph.err" &
    pid=$!
    for _ in $(seq 40); do kill -0 $pid 2>/dev/null || break; sleep 1; done
    if kill -0 $pid 2>/dev/null; then
      log "g2graph still running after 40 s: stacks in g2graph.stacks"
      timeout 90 cuda-gdb -p $pid -batch -ex "info threads" -ex "thread apply all bt 20" > "$OUT/g2graph.stacks" 2>&1
      kill -9 $pid
    fi
    wait $pid; log "g2graph rc=$?" ;;
  paired)
    # collbench and the reference alternate, ROUNDS times, on the anchors'
    # command shape, so each ratio compares two programs on the same lease.
    for round in $(seq ${ROUNDS:-2}); do
      mkdir -p "$OUT/ref$round"
      for op in all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv; do
        timed "ref$round/$op" 90 "$OUT/nccl_ref" $op 20 8 8589934592
      done
      timed "sweep$round" 120 "$B" run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv \
        -b 8 -e 8G -f 2 -w 5 -n 20 --output "$OUT/sweep$round.json"
    done ;;
  abtest)
    # Large sizes, interleaved ROUNDS times: the reference, collbench as it
    # is, collbench with per-iteration events in a separate pass only, and
    # collbench without the check pass; to tell tool effects from drift.
    for round in $(seq ${ROUNDS:-3}); do
      for op in ${AB_OPS:-all_reduce all_gather}; do
        mkdir -p "$OUT/ab_ref$round" "$OUT/ab_cb$round" "$OUT/ab_sep$round" "$OUT/ab_c0_$round"
        timed "ab_ref$round/$op" 60 "$OUT/nccl_ref" $op 20 67108864 8589934592
        timed "ab_cb$round/$op" 60 "$B" run $op -b 64M -e 8G -f 2 -w 5 -n 20
        timed "ab_sep$round/$op" 60 env COLLBENCH_ITER_EVENTS=separate "$B" run $op -b 64M -e 8G -f 2 -w 5 -n 20
        timed "ab_c0_$round/$op" 60 "$B" run $op -b 64M -e 8G -f 2 -w 5 -n 20 -c 0
      done
    done ;;
  a2aab)
    # alltoall alone, 8 B - 8 GiB, ROUNDS times: the reference on buffers as
    # allocated and on random data, collbench, and collbench without checks
    # (whose buffers then hold no data either).
    for round in $(seq ${ROUNDS:-3}); do
      for v in ref reff cb c0; do mkdir -p "$OUT/aa_$v$round"; done
      timed "aa_ref$round/alltoall" 60 "$OUT/nccl_ref" alltoall 20 8 8589934592
      timed "aa_reff$round/alltoall" 60 env REF_FILL=1 "$OUT/nccl_ref" alltoall 20 8 8589934592
      timed "aa_cb$round/alltoall" 60 "$B" run alltoall -b 8 -e 8G -f 2 -w 5 -n 20
      timed "aa_c0$round/alltoall" 60 "$B" run alltoall -b 8 -e 8G -f 2 -w 5 -n 20 -c 0
    done ;;
  register2)
    # -R 2: buffers from ncclMemAlloc registered as symmetric windows.
    timed r2_all 90 "$B" run all -b 8 -e 256M -f 4 -R 2
    timed r2_small 60 "$B" run all_reduce all_gather -b 8 -e 1M -f 2 -R 2
    timed r0_small 60 "$B" run all_reduce all_gather -b 8 -e 1M -f 2 -R 0
    for r in $(seq 0 $((NGPU - 1))); do
      RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29681 \
        timeout 60 "$B" run all_reduce all_gather reduce_scatter alltoall -b 8 -e 64M -f 4 -R 2 > "$OUT/mr2_$r.txt" 2>&1 &
    done
    wait ;;
  mpaired)
    # One process per GPU, ROUNDS times: the reference under mpirun
    # --bind-to core (as the anchors' nccl-tests ran), collbench under the
    # same mpirun (as a plain launcher, no MPI), and collbench started with
    # torchrun-style variables (no launcher at all).
    MPI="mpirun --allow-run-as-root -np $NGPU --bind-to core -x NCCL_NVLS_ENABLE"
    for round in $(seq ${ROUNDS:-2}); do
      mkdir -p "$OUT/mref$round"
      for op in all_reduce alltoall; do
        rm -f /tmp/ref.id
        timed "mref$round/$op" 90 $MPI -x REF_ID_FILE=/tmp/ref.id \
          sh -c "exec $OUT/nccl_ref $op 20 8 8589934592 > $OUT/mref$round/$op.\$OMPI_COMM_WORLD_RANK.txt"
        cp "$OUT/mref$round/$op.0.txt" "$OUT/mref$round/mpi2_$op.txt"
      done
      timed "mpirun_cb$round" 150 $MPI -x COLLBENCH_RENDEZVOUS=127.0.0.1:$((29640 + round)) \
        sh -c "exec $B run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 --output $OUT/mpirun_cb$round.json"
      s=$(date +%s.%N)
      for r in $(seq 0 $((NGPU - 1))); do
        RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29650 + round)) \
          timeout 150 "$B" run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv \
          -b 8 -e 8G -f 2 -w 5 -n 20 --output "$OUT/mproc_r$round.$r.json" > "$OUT/mproc_r$round.$r.txt" 2>&1 &
      done
      wait
      echo "mproc round $round: $(awk "BEGIN{print $(date +%s.%N) - $s}") s" | tee -a "$OUT/suite.log"
    done
    ;;
  mgraphs)
    # CUDA graphs, one process per GPU, ROUNDS times: the reference under
    # mpirun, collbench under mpirun and with torchrun-style variables.
    MPI="mpirun --allow-run-as-root -np $NGPU --bind-to core -x NCCL_NVLS_ENABLE"
    for round in $(seq ${ROUNDS:-2}); do
      rm -f /tmp/ref.id
      timed mgref$round 60 $MPI -x REF_ID_FILE=/tmp/ref.id \
        sh -c "exec $OUT/nccl_ref all_reduce 50 8 1048576 10 > $OUT/mgref$round.\$OMPI_COMM_WORLD_RANK.txt"
      timed mgraph_mpirun$round 60 $MPI -x COLLBENCH_RENDEZVOUS=127.0.0.1:$((29660 + round)) \
        sh -c "exec $B run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10"
      for r in $(seq 0 $((NGPU - 1))); do
        RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29670 + round)) \
          timeout 30 "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10 > "$OUT/mgraph$round.$r.txt" 2>&1 &
      done
      wait
      timed g2graph$round 60 "$B" run all_reduce -b 8 -e 1M -f 2 -n 50 -G 10
      timed g2ref$round 60 "$OUT/nccl_ref" all_reduce 50 8 1048576 10
    done ;;
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
