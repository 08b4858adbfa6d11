#!/usr/bin/env bash
# One short device call (one GPU is enough; all GPUs of the machine are
# used): alltoallv on the NCCL backend with GPU verification (default
# generator, SPREAD, a matrix file, the alias, graphs, a planted error),
# and the device-API implementations -D 1 / -D 2 of all_reduce and
# alltoall, with the refusals around them. Prints every command, its exit
# code and its output; the same under $OUT/d (tarred).
#
#   bench/gpu-d-check.sh          (from anywhere; runs from the repo root)
#
# What to look for:
# - every table: the #wrong columns 0 (out of place; alltoallv and alltoall
#   in place print N/A, as nccl-tests), rc 0;
# - a2av_corrupt: #wrong 1 at every size (the check catches a planted error);
# - a2av_matrix_bad: rc 2, one line (matrix smaller than the job / -b != -e);
# - dev*_ar, dev*_a2a: rc 0, rows for float, #wrong 0, busbw plausible;
# - dev1_types: int8 .. double rows, bfloat16/f8 skipped with a note;
# - dev1_ops: sum rows, the other operators skipped with a note;
# - dev1_all: all_reduce and alltoall rows, the others skipped with a note;
# - dev3, dev1_noR: rc 2, one line each;
# - nt_* / cb_* (only where nccl-tests is built): the same rows, #wrong 0,
#   busbw and time close (bench/ab_text.py cb_...txt nt_...txt).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$(realpath "${NEW:-dist/collbench}"); O=${OUT:-bench-out}/d; mkdir -p "$O"
G=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$G" -ge 1 ] || G=1
t() { # name cmd...: run with a time limit, keep and print the output
  local n=$1; shift
  env ${ENVS:-} timeout 240 "$@" > "$O/$n.txt" 2> "$O/$n.err"; local rc=$?
  echo "=== $n rc=$rc: ${ENVS:-}${ENVS:+ }$*" | tee -a "$O/log.txt"
  cat "$O/$n.txt" "$O/$n.err"
}
echo "GPUs: $G, NCCL: $(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2* 2>/dev/null | tr '\n' ' ')" | tee "$O/log.txt"

# alltoallv on NCCL, verified on the GPU
t a2av_default $B run --backend nccl alltoallv -b 8 -e 256M -f 4 -g $G
ENVS="NCCL_TESTS_ALLTOALLV_SPREAD=0" t a2av_spread0 $B run --backend nccl alltoallv -b 8 -e 64M -f 8 -g $G
ENVS="NCCL_TESTS_ALLTOALLV_SPREAD=0.5" t a2av_spread05 $B run --backend nccl alltoallv -b 1K -e 64M -f 8 -g $G -d all
# A G x G matrix, every cell different (bytes, rounded down to 16 by the reader).
python3 -c "
g=$G
for i in range(g): print(' '.join(str(1000000*(1+i)+4096*(j+1)+7) for j in range(g)))" > "$O/matrix.txt"
# -b = -e = the largest total a rank sends or receives, after scaling.
need() { python3 -c "
rows=[[int(float(v)*$1)//16*16 for v in l.split()] for l in open('$O/matrix.txt')]
g=len(rows); print(max(max(sum(r) for r in rows), max(sum(rows[i][j] for i in range(g)) for j in range(g))))"; }
need=$(need 1); need3=$(need 3)
ENVS="NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/matrix.txt" t a2av_matrix $B run --backend nccl alltoallv -b $need -e $need -g $G
ENVS="NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/matrix.txt NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=3" t a2av_matrix_scaled $B run --backend nccl alltoallv -b $need3 -e $need3 -g $G -d double
ENVS="NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/matrix.txt" t a2av_matrix_bad $B run --backend nccl alltoallv -b 8 -e $need -g $G
ln -sf "$B" "$O/alltoallv_perf"
t a2av_alias "$O/alltoallv_perf" -b 8 -e 128M -f 2 -g $G
t a2av_graph $B run --backend nccl alltoallv -b 8 -e 64M -f 8 -g $G -G 5 -n 20
t a2av_corrupt $B run --backend nccl alltoallv -b 1K -e 1M -f 32 -g $G --test-corrupt
t a2av_r1 $B run --backend nccl alltoallv -b 8 -e 64M -f 8 -g $G -R 1
t run_all $B run --backend nccl all -b 8 -e 16M -f 16 -g $G

# Device-API implementations (NCCL 2.28, -R 2)
for d in 1 2; do
  t dev${d}_ar $B run --backend nccl all_reduce -b 8 -e 256M -f 4 -g $G -D $d -R 2
  t dev${d}_a2a $B run --backend nccl alltoall -b 8 -e 256M -f 4 -g $G -D $d -R 2
  t dev${d}_v4 $B run --backend nccl all_reduce alltoall -b 8 -e 16M -f 8 -g $G -D $d -R 2 -V 4
  t dev${d}_u1 $B run --backend nccl all_reduce alltoall -b 8 -e 1M -f 8 -g $G -D $d -R 2 -u 1
  t dev${d}_graph $B run --backend nccl all_reduce alltoall -b 8 -e 16M -f 8 -g $G -D $d -R 2 -G 5 -n 20
done
t dev1_types $B run --backend nccl all_reduce alltoall -b 1K -e 1M -f 32 -g $G -D 1 -R 2 -d all
t dev1_ops $B run --backend nccl all_reduce -b 1K -e 1M -f 32 -g $G -D 1 -R 2 -o all
t dev1_all $B run --backend nccl all -b 1K -e 1M -f 32 -g $G -D 1 -R 2
t dev1_corrupt $B run --backend nccl all_reduce alltoall -b 1K -e 1M -f 32 -g $G -D 1 -R 2 --test-corrupt
ln -sf "$B" "$O/alltoall_perf"
t dev1_alias "$O/alltoall_perf" -b 8 -e 1M -f 8 -g $G -D 1 -R 2
t dev3 $B run --backend nccl all_reduce -b 8 -e 1M -f 8 -g $G -D 3 -R 2
t dev1_noR $B run --backend nccl all_reduce -b 8 -e 1M -f 8 -g $G -D 1
# Side by side at sizes where launch cost shows: NCCL's own vs -D 1 / -D 2.
t dev0_ar_small $B run --backend nccl all_reduce alltoall -b 8 -e 1M -f 2 -g $G -R 2
t dev1_ar_small $B run --backend nccl all_reduce alltoall -b 8 -e 1M -f 2 -g $G -R 2 -D 1
t dev2_ar_small $B run --backend nccl all_reduce alltoall -b 8 -e 1M -f 2 -g $G -R 2 -D 2
# With nccl-tests built (bench/gpu-validate.sh ntbuild puts it in /tmp/nt/build),
# the same -D runs of nccl-tests, alternating with collbench's, for the ratios.
NT=${NT:-/tmp/nt/build}
if [ -x "$NT/all_reduce_perf" ]; then
  for r in 1 2; do for d in 1 2; do for op in all_reduce alltoall; do
    t nt_${op}_D${d}_$r "$NT/${op}_perf" -b 8 -e 1G -f 4 -g $G -D $d -R 2
    t cb_${op}_D${d}_$r $B run --backend nccl $op -b 8 -e 1G -f 4 -g $G -D $d -R 2
  done; done; done
  t nt_alltoallv "$NT/alltoallv_perf" -b 8 -e 256M -f 4 -g $G
  t cb_alltoallv $B run --backend nccl alltoallv -b 8 -e 256M -f 4 -g $G
fi
cd "${OUT:-bench-out}" && tar czf d.tgz d
