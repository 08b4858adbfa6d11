#!/bin/bash
# One tune of two emulated hosts (the bar's sweep, budget $1, e.g. 60s),
# rank 0's stderr lines timestamped, and each process's wall time: how far
# past the last repeat ("wrote ..." is after the children ended; the exit
# after the communicators were destroyed) the command ends. Needs
# dist/collbench; results under $OUT. Written in session 14, which had no
# device time left to run it (bench/results/tune.md, call 16).
set -u
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p /tmp/mps /tmp/mpslog; /usr/local/nvidia/bin/nvidia-cuda-mps-control -d
S=$(date +%s.%N)
for r in 0 1; do
  NCCL_HOSTID=emu$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 COLLBENCH_BIND=127.0.0.1 \
  dist/collbench tune all_reduce all_gather -b 1M -e 512M -f 8 --budget "$1" --format json > $OUT/t$r.json 2> $OUT/t$r.err &
  P[$r]=$!
done
tail -F $OUT/t0.err 2>/dev/null | while IFS= read -r l; do echo "$(date +%s.%N) $l"; done > $OUT/t0.ts &
T=$!
wait ${P[0]}; E0=$(date +%s.%N); wait ${P[1]}; E1=$(date +%s.%N)
sleep 1; kill $T; pkill -f "tail -F" 
echo "start $S end0 $E0 end1 $E1" | tee $OUT/wall.txt
python3 -c "s,e0,e1=$S,$E0,$E1; print(f'wall rank0 {e0-s:.1f} s, rank1 {e1-s:.1f} s')" | tee -a $OUT/wall.txt
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
tail -4 $OUT/t0.ts | cut -c1-160
python3 -c "import json; r=json.load(open('$OUT/t0.json')); print('budget', r['budget_us']/1e6, 'spent', r['spent_us']/1e6)"
