#!/usr/bin/env bash
# `check` without a baseline on two emulated hosts (NCCL_HOSTID, MPS,
# socket transport over lo), $TRIALS times: a healthy emulated cluster
# must not WARN against its ceiling (#40: its network is loopback, ten
# times what NCCL's socket transport moves). Each trial's exit codes and
# verdict lines under $OUT/checkemu/.
#   CB=target/gpu/collbench TRIALS=2 bash bench/gpu-check-emu.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-target/gpu/collbench}"); O=${OUT:-bench-out}/checkemu; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
for t in $(seq "${TRIALS:-2}"); do
  for r in 0 1; do
    NCCL_HOSTID=emu-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29600 + t)) COLLBENCH_BIND=127.0.0.1 \
      timeout 300 "$CB" check --backend nccl --size 256M --json "$O/t$t.r$r.json" \
      > "$O/t$t.r$r.out" 2> "$O/t$t.r$r.err" &
    pids[$r]=$!
  done
  for r in 0 1; do wait "${pids[$r]}"; echo "trial $t rank $r exit $?" | tee -a "$O/exits.txt"; done
done
echo quit | "$MPSCTL"
grep -h -E "WARN|FAIL|PASS|ceiling" "$O"/t*.r0.out | sort | uniq -c | tee "$O/lines.txt"
tar czf "${OUT:-bench-out}/checkemu.tgz" -C "${OUT:-bench-out}" checkemu
