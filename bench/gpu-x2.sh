#!/usr/bin/env bash
# The two-GPU bars of issues 12, 16 and 17 in one device call on
# nvidia-h200-x2 (issue 13's tune bars need a call of their own):
#
#   bench/gpu-x2.sh [STAGE ...]   stages: stuck ab ntbuild a2av dev json
#                                 (default: all, in that order)
#
# ntbuild: nccl-tests 2.19.6 from dist/nccl-tests (gpu-validate.sh's).
# stuck:   issue 16, bench/gpu-stuck.sh hook sigstop sigstop0 speed.
# ab:      issue 17, the seven-op sweep, this binary against the previous
#          release, interleaved (gpu-validate.sh ab).
# a2av:    issue 12, alltoallv_perf -b 8 -e 8G -f 2 -g 2, nccl-tests and
#          collbench alternately, two rounds, and the same with a matrix
#          file.
# dev:     issue 12, -D 1 all_reduce and alltoall (-R 2), both tools
#          alternately, two rounds.
# json:    issue 12, -I 1 -J from both tools, read by nccl-tests'
#          tools/analyze_perf_json.py.
# auto:    issue 13, `-n auto` against `-n 20` (gpu-validate.sh auto); not
#          in the default list.
#
# NEW=dist/collbench, PREV=dist/collbench-prev; ROUNDS (default 2; stuck's
# speed stage uses STUCK_ROUNDS, default 3; STUCK_STAGES picks
# gpu-stuck.sh's stages). Everything under $OUT/x2,
# tarred. NVLink multicast off.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NEW=${NEW:-dist/collbench}; NT=/tmp/nt/build
O=${OUT:-bench-out}/x2; mkdir -p "$O"
G=$(nvidia-smi -L 2>/dev/null | wc -l)
log() { echo "== $*" | tee -a "$O/log.txt"; }
t() { # name cmd...: stdout to $O/name.txt, stderr to .err, rc and wall time logged
  local n=$1; shift; local s=$(date +%s.%N)
  env ${ENVS:-} timeout 120 "$@" > "$O/$n.txt" 2> "$O/$n.err"; local rc=$?
  printf '%-24s rc=%-3s %6.1f s\n' "$n" "$rc" "$(python3 -c "print($(date +%s.%N) - $s)")" | tee -a "$O/log.txt"
}
ab() { # label A-files B-files: bench/ab_text.py's table, logged
  log "$1"; python3 bench/ab_text.py "$2" "$3" | tee -a "$O/log.txt"
}
files() { ls "$O"/$1 | paste -sd,; }
log "GPUs: $G; $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' ')"
for st in ${*:-stuck ab ntbuild a2av dev json}; do case $st in
ntbuild) mkdir -p $O/ntbuild; OUT=$O/ntbuild bash bench/gpu-validate.sh ntbuild > /dev/null 2>&1; ls $NT/alltoallv_perf > /dev/null && log "nccl-tests built" ;;
stuck) OUT=$O ROUNDS=${STUCK_ROUNDS:-3} timeout 300 bash bench/gpu-stuck.sh ${STUCK_STAGES:-hook sigstop sigstop0 speed} 2>&1 | tail -n 40 >> "$O/log.txt" ;;
auto) # issue 13: -n auto against -n 20 on the seven-op sweep, same binary
  mkdir -p $O/auto; OUT=$O/auto ROUNDS=${ROUNDS:-2} timeout 300 bash bench/gpu-validate.sh auto >> "$O/log.txt" 2>&1 ;;
ab) mkdir -p $O/ab; OUT=$O/ab ROUNDS=${ROUNDS:-2} timeout 150 bash bench/gpu-validate.sh ab >> "$O/log.txt" 2>&1 ;;
a2av)
  python3 -c "
for i in range($G): print(' '.join(str(1000000*(1+i)+4096*(j+1)+7) for j in range($G)))" > "$O/matrix.txt"
  need=$(python3 -c "
rows=[[int(v)//16*16 for v in l.split()] for l in open('$O/matrix.txt')]
g=len(rows); print(max(max(map(sum, rows)), max(sum(r[j] for r in rows) for j in range(g))))")
  for r in $(seq ${ROUNDS:-2}); do
    t nt_a2av$r $NT/alltoallv_perf -b 8 -e 8G -f 2 -g $G
    t cb_a2av$r $NEW run alltoallv -b 8 -e 8G -f 2 -g $G
    ENVS="NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/matrix.txt" t nt_a2avm$r $NT/alltoallv_perf -b $need -e $need -g $G -n 50
    ENVS="NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/matrix.txt" t cb_a2avm$r $NEW run alltoallv -b $need -e $need -g $G -n 50
  done
  ab "alltoallv: collbench / nccl-tests" "$(files 'cb_a2av[0-9].txt')" "$(files 'nt_a2av[0-9].txt')"
  ab "alltoallv, matrix file: collbench / nccl-tests" "$(files 'cb_a2avm[0-9].txt')" "$(files 'nt_a2avm[0-9].txt')" ;;
dev)
  for r in $(seq ${ROUNDS:-2}); do for op in all_reduce alltoall; do
    t nt_${op}_D1_$r $NT/${op}_perf -b 8 -e 1G -f 4 -g $G -D 1 -R 2
    t cb_${op}_D1_$r $NEW run $op -b 8 -e 1G -f 4 -g $G -D 1 -R 2
  done; done
  for op in all_reduce alltoall; do
    ab "-D 1 $op: collbench / nccl-tests" "$(files "cb_${op}_D1_[0-9].txt")" "$(files "nt_${op}_D1_[0-9].txt")"
    log "-D 1 $op stderr: nccl-tests $(tail -c 200 $O/nt_${op}_D1_1.err | tr '\n' ' ') | collbench $(tail -c 200 $O/cb_${op}_D1_1.err | tr '\n' ' ')"
  done ;;
json)
  t nt_json $NT/all_reduce_perf -b 8 -e 64M -f 8 -g $G -I 1 -J "$O/nt_iter.json"
  t cb_json $NEW run all_reduce -b 8 -e 64M -f 8 -g $G -I 1 -J "$O/cb_iter.json"
  for w in nt cb; do
    python3 dist/nccl-tests/tools/analyze_perf_json.py "$O/${w}_iter.json" --all > "$O/${w}_analyze.txt" 2>&1
    log "analyze_perf_json.py on $w: rc=$? $(wc -l < "$O/${w}_analyze.txt") lines: $(head -3 "$O/${w}_analyze.txt" | tr '\n' ' ')"
  done ;;
esac
  # After every stage: what a call cut short still brings back.
  (cd "${OUT:-bench-out}" && tar czf x2.tgz x2)
done
rm -rf "$O"
