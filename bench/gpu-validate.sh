#!/usr/bin/env bash
# One device call: the current binary against the previous release and the
# real nccl-tests, interleaved (A B A B), plus the --explain checks.
#
#   bench/gpu-validate.sh [STAGE ...]   stages: probe ntbuild ab nt explain extra
#                                       auto watchdog1 tune1 f8avg f8skip
#
# NEW=dist/collbench (this tree), PREV=dist/collbench-prev (the last
# release), nccl-tests 2.19.6 source in dist/nccl-tests. ROUNDS (default 2).
# Logs under $OUT/v (tar them: only 8 files come back). NVLink multicast off.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NEW=${NEW:-dist/collbench}; PREV=${PREV:-dist/collbench-prev}; NT=/tmp/nt/build
O=${OUT:-bench-out}/v; mkdir -p "$O"
G=$(nvidia-smi -L 2>/dev/null | wc -l)
OPS="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
SWEEP="-b 8 -e 8G -f 2 -w 5 -n 20 -g $G"
log() { echo "== $*" | tee -a "$O/log.txt"; }
t() { # name cmd...: stdout to $O/name.txt, stderr to .err, wall time logged
  local n=$1; shift; local s=$(date +%s.%N)
  timeout 300 "$@" > "$O/$n.txt" 2> "$O/$n.err"; local rc=$?
  printf '%-22s rc=%-3s %6.1f s\n' "$n" "$rc" "$(python3 -c "print($(date +%s.%N) - $s)")" | tee -a "$O/log.txt"
}
for st in ${*:-probe ntbuild ab explain}; do case $st in
probe) { nvidia-smi -L; nvidia-smi topo -m; ls -l /usr/lib/x86_64-linux-gnu/libnccl.so*; } > "$O/probe.txt" 2>&1; log "GPUs: $G" ;;
ntbuild) cp -r dist/nccl-tests /tmp/nt && (cd /tmp/nt && make -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$O/ntbuild.log" 2>&1); log "nccl-tests build rc=$?" ;;
ab) # issue 17: the same sweep, previous release vs this tree, text output
  # Odd rounds run the previous binary first, even rounds this tree first,
  # so neither always inherits the other's warm GPU.
  for r in $(seq ${ROUNDS:-2}); do
    if [ $((r % 2)) = 1 ]; then t prev$r $PREV run $OPS $SWEEP; t new$r $NEW run $OPS $SWEEP
    else t new$r $NEW run $OPS $SWEEP; t prev$r $PREV run $OPS $SWEEP; fi
  done
  n=$(ls $O/new[0-9]*.txt | paste -sd,); p=$(ls $O/prev[0-9]*.txt | paste -sd,)
  python3 bench/ab_text.py "$n" "$p" | tee "$O/ab_new_over_prev.md" ;;
nt) # the real nccl-tests (after ntbuild) against this tree, interleaved,
  # same flags, one file per op for nccl-tests and one sweep for collbench
  for r in $(seq ${ROUNDS:-2}); do
    mkdir -p "$O/nt$r"
    for op in $OPS alltoallv; do t nt$r/$op $NT/${op}_perf $SWEEP; done
    t cb$r $NEW run $OPS alltoallv $SWEEP
  done
  for op in $OPS; do
    n=$(ls $O/nt[0-9]*/$op.txt | paste -sd,)
    python3 bench/ab_text.py "$(ls $O/cb[0-9]*.txt | paste -sd,)" "$n" | grep "| $op |"
  done | tee "$O/cb_over_nccl_tests.md" ;;
explain) # issue 14
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING t explain_ar $NEW run all_reduce -b 8 -e 8G -f 2 -g $G --explain --output "$O/explain_ar.json"
  cat "$O/explain_ar.txt" "$O/explain_ar.err" > "$O/explain_ar.log" # NCCL logs to stdout
  python3 bench/explain_check.py "$O/explain_ar.json" "$O/explain_ar.log" > "$O/explain_check.txt" 2>&1; log "explain_check rc=$? $(tail -1 $O/explain_check.txt)"
  t explain_all $NEW run $OPS -b 8 -e 1G -f 4 -g $G --explain
  for r in $(seq ${ROUNDS:-2}); do
    t ex_off_small$r $NEW run all_reduce all_gather -b 8 -e 64K -f 2 -w 20 -n 100 -g $G
    t ex_on_small$r $NEW run all_reduce all_gather -b 8 -e 64K -f 2 -w 20 -n 100 -g $G --explain
    t ex_off_large$r $NEW run all_reduce all_gather -b 64M -e 4G -f 2 -g $G
    t ex_on_large$r $NEW run all_reduce all_gather -b 64M -e 4G -f 2 -g $G --explain
  done
  python3 bench/ab_text.py "$O/ex_on_small1.txt,$O/ex_on_small2.txt,$O/ex_on_large1.txt,$O/ex_on_large2.txt" \
    "$O/ex_off_small1.txt,$O/ex_off_small2.txt,$O/ex_off_large1.txt,$O/ex_off_large2.txt" | tee "$O/explain_on_over_off.md"
  t proto_default $NEW run all_reduce -b 8 -e 16M -f 4 -g $G --output "$O/proto_default.json"
  NCCL_PROTO=LL128 t proto_ll128 $NEW run all_reduce -b 8 -e 16M -f 4 -g $G --output "$O/proto_ll128.json"
  t compare_proto $NEW compare "$O/proto_default.json" "$O/proto_ll128.json"
  NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler.so t user_plugin $NEW run all_reduce -b 8 -e 1M -f 4 -g $G --explain
  log "user_plugin stderr: $(head -3 $O/user_plugin.err)" ;;
extra) # the refactored backend's other paths: graphs, registration, all types
  t graph $NEW run all_reduce -b 8 -e 1M -f 4 -g $G -G 10 -n 50
  t reg1 $NEW run all_gather all_reduce -b 8 -e 256M -f 4 -g $G -R 1
  t dall $NEW run all_reduce reduce_scatter -b 8 -e 1M -f 32 -g $G -d all -o all
  t dall_prev $PREV run all_reduce reduce_scatter -b 8 -e 1M -f 32 -g $G -d all -o all
  log "dall rc: new $(tail -c 300 $O/dall.err | tr '\n' ' ') | prev $(tail -c 300 $O/dall_prev.err | tr '\n' ' ')"
  grep -h "Out of bounds" $O/graph.txt $O/reg1.txt $O/dall.txt | sort | uniq -c | tee -a "$O/log.txt" ;;
auto) # issue 13: run -n auto against -n 20, the same binary, interleaved
  for r in $(seq ${ROUNDS:-2}); do
    if [ $((r % 2)) = 1 ]; then t n20_$r $NEW run $OPS $SWEEP; t auto$r $NEW run $OPS ${SWEEP/-n 20/-n auto}
    else t auto$r $NEW run $OPS ${SWEEP/-n 20/-n auto}; t n20_$r $NEW run $OPS $SWEEP; fi
  done
  python3 bench/ab_text.py "$(ls $O/auto[0-9]*.txt | paste -sd,)" "$(ls $O/n20_[0-9]*.txt | paste -sd,)" | tee "$O/auto_over_n20.md"
  grep -h "s$" $O/log.txt | grep -E "^(auto|n20_)" | tee "$O/auto_wall.txt" ;;
watchdog1) # issue 16 on one GPU: a rank that sleeps inside a call; the
  # watchdog must name it, abort the communicator and exit 5 within ~deadline
  t wd_sleep $NEW run all_reduce -b 1M -e 1M -g $G -n 50 --watchdog 8 --test-sleep-in-call 0:0:7:60
  log "wd_sleep: $(tail -2 $O/wd_sleep.err | tr '\n' ' ')"
  t wd_stop $NEW run all_reduce -b 1M -e 1M -g $G -n 50 --watchdog 8 --test-stop-calling 0:0:7
  log "wd_stop: $(tail -2 $O/wd_stop.err | tr '\n' ' ')" ;;
f8avg) # noticed in session 4: `-d all -o all` stopped at f8e4m3 avg on one
  # rank; the real nccl-tests beside it, each type and op alone
  for d in f8e4m3 f8e5m2 bfloat16; do for o in avg sum mulsum; do
    NCCL_DEBUG=WARN t nt_${d}_$o $NT/all_reduce_perf -b 1K -e 1M -f 32 -g $G -d $d -o $o
    NCCL_DEBUG=WARN t cb_${d}_$o $NEW run all_reduce -b 1K -e 1M -f 32 -g $G -d $d -o $o
  done; done
  for f in "$O"/nt_f8*.txt "$O"/cb_f8*.txt "$O"/*_bfloat16_*.txt; do
    echo "$(basename "$f"): $(grep -c '^ *[0-9]' "$f") rows, last: $(grep -v '^$' "${f%.txt}.err" | tail -1)"
  done | tee -a "$O/log.txt" ;;
f8skip) # fp8 avg/mulsum on one rank: NCCL refuses them for reduce and
  # reduce_scatter too (nccl-tests), and collbench's -d all -o all over the
  # reducing collectives skips them with a note and finishes
  for op in reduce reduce_scatter; do for o in avg mulsum; do
    t nt_${op}_f8_$o $NT/${op}_perf -b 1K -e 1M -f 32 -g $G -d f8e4m3 -o $o
  done; done
  t dall_reducing $NEW run all_reduce reduce reduce_scatter -b 1K -e 1M -f 32 -g $G -d all -o all
  log "dall_reducing: $(grep -c '^ *[0-9]' $O/dall_reducing.txt) rows, $(grep -c skipping $O/dall_reducing.err) skipped, wrong: $(awk '!/^#/ && NF>=13 && ($9!="0" || ($13!="0" && $13!="N/A"))' $O/dall_reducing.txt | wc -l)"
  grep skipping $O/dall_reducing.err | head -4 | tee -a "$O/log.txt"
  t sweep $NEW run $OPS $SWEEP
  log "sweep: $(grep -c '^ *[0-9]' $O/sweep.txt) rows, wrong: $(awk '!/^#/ && NF>=13 && ($9!="0" || ($13!="0" && $13!="N/A"))' $O/sweep.txt | wc -l)" ;;
tune1) # issue 13 on one GPU: the search runs end to end on NCCL, the child
  # processes of the NCCL_BUFFSIZE candidates included (one rank: NCCL runs
  # no algorithm, so gains mean nothing here)
  t tune1 $NEW tune all_reduce all_gather -b 1M -e 16M -f 16 --budget 60s --csv "$O/tune1.csv" --shell
  log "tune1: $(tail -3 $O/tune1.err | tr '\n' ' ')" ;;
esac; done
cd "${OUT:-bench-out}" && tar czf v.tgz v && rm -rf v
