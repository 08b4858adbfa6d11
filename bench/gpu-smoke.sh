#!/usr/bin/env bash
# One short device call: the current binary's new paths on whatever GPUs
# the machine has (flags -x -M -I -J -D -V, --explain, tune, --tuner-config,
# graphs and registration), plus the A/B against the previous binary.
# Logs under $OUT/s (tarred).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${NEW:-dist/collbench}; O=${OUT:-bench-out}/s; mkdir -p "$O"
G=$(nvidia-smi -L 2>/dev/null | wc -l)
t() { local n=$1; shift; timeout 150 "$@" > "$O/$n.txt" 2> "$O/$n.err"; echo "$n rc=$? $(grep -c '^ *[0-9]' $O/$n.txt) rows; wrong>0 rows: $(awk '$1 ~ /^[0-9]+$/ && ($9+0>0 || $13+0>0)' $O/$n.txt | wc -l); err: $(head -c 200 $O/$n.err | tr '\n' ' ')" | tee -a "$O/log.txt"; }
t sweep $B run all -b 8 -e 1G -f 4 -g $G
t periter $B run all_reduce -b 8 -e 64M -f 8 -g $G -I 1 -K 1 -J "$O/periter.json"
python3 dist/nccl-tests/tools/analyze_perf_json.py "$O/periter.json" > "$O/analyze.txt" 2>&1; echo "analyze_perf_json rc=$?" | tee -a "$O/log.txt"
t cta1 $B run all_reduce -b 8 -e 64M -f 8 -g $G -x 1
t mem $B run all_reduce all_gather -b 8 -e 256M -f 8 -g $G -M 1
grep -h "GPU memory usage" "$O/mem.txt" | tee -a "$O/log.txt"
t dev0 $B run all_reduce -b 8 -e 1M -f 8 -g $G -D 0 -V 16
t dev1 $B run all_reduce -b 8 -e 1M -f 8 -g $G -D 1 -R 2
t dev1noR $B run all_reduce -b 8 -e 1M -f 8 -g $G -D 1
t explain $B run all_reduce -b 8 -e 64M -f 8 -g $G --explain
t graph $B run all_reduce -b 8 -e 1M -f 4 -g $G -G 10 -n 50
t reg2 $B run all_reduce all_gather -b 8 -e 64M -f 8 -g $G -R 2
t tune $B tune all_reduce -b 64M -e 64M --budget 1m --format md --csv "$O/tuner.csv"
printf 'allreduce,0,4294967295,ring,simple,-1,-1,-1,-1,-1\n' > "$O/rules.csv"
t tunercfg $B run all_reduce -b 8 -e 64M -f 8 -g $G --tuner-config "$O/rules.csv"
for r in 1 2; do
  if [ $r = 1 ]; then t prev$r dist/collbench-prev run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 -g $G; t new$r $B run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 -g $G
  else t new$r $B run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 -g $G; t prev$r dist/collbench-prev run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 -g $G; fi
done
python3 bench/ab_text.py --oop "$O/new1.txt,$O/new2.txt" "$O/prev1.txt,$O/prev2.txt" | tee "$O/ab.md"
cd "${OUT:-bench-out}" && tar czf s.tgz s && rm -rf s
