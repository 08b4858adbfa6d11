#!/usr/bin/env bash
# Two processes on ONE GPU, each its own NCCL_TESTS_SPLIT_MASK=1 group (a
# communicator of one rank each: NCCL refuses two ranks of one
# communicator on one GPU, not two communicators): the multi-process
# setup exchanges (split colours, then every group's NCCL id) run on real
# NCCL, for this binary and the previous release. Prints rows, #wrong and
# the last stderr lines of each process; logs tarred under $OUT/s.tgz.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
O=$OUT/s; mkdir -p $O
port=$((20000 + RANDOM % 20000))
for bin in dist/collbench dist/collbench-prev; do
  n=$(basename $bin)
  for r in 0 1; do
    NCCL_TESTS_SPLIT_MASK=1 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 \
      timeout 120 $bin run all_reduce all_gather -b 8 -e 64M -f 8 > $O/$n.r$r.txt 2> $O/$n.r$r.err &
  done
  wait
  for r in 0 1; do echo "$n rank $r: rows $(grep -c '^ *[0-9]' $O/$n.r$r.txt) wrong $(awk '!/^#/ && NF>=13 && ($9!="0" || ($13!="0" && $13!="N/A"))' $O/$n.r$r.txt | wc -l) err: $(tail -2 $O/$n.r$r.err | tr '\n' ' ')"; done
  grep -h "Rank\|Group" $O/$n.r0.txt | head -3
  port=$((port + 1))
done
cd $OUT && tar czf s.tgz s && rm -rf s
