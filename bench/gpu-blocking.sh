#!/usr/bin/env bash
# -z as an enum (session 20): the binary before the change (A) and after
# (B), alternately, A B A B, on two emulated hosts
# (../shared/recipes/emulated-hosts.md), all_reduce 8 B-64 MiB with -z 0, 1
# and 3. Every row must check out, and B's busbw must sit within A's own
# round-to-round noise. Also -z 3 with -G 1 prints nccl-tests' line and
# runs unblocked.
#   A=target/gpu/collbench-old B=target/gpu/collbench bash bench/gpu-blocking.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
A=$(realpath "${A:-target/gpu/collbench-old}"); B=$(realpath "${B:-target/gpu/collbench}")
O=${OUT:-bench-out}/blocking; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
port=29600
emu2() { # emu2 BIN NAME ARGS...
  local bin=$1 name=$2; shift 2; port=$((port + 1))
  for r in 0 1; do
    NCCL_HOSTID=emu-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 \
      timeout 300 "$bin" run "$@" --backend nccl > "$O/$name.r$r.txt" 2>&1 &
  done
  wait
}
for round in 1 2; do
  for z in 0 1 3; do
    emu2 "$A" "A.z$z.$round" all_reduce -b 8 -e 64M -f 8 -n 20 -z "$z"
    emu2 "$B" "B.z$z.$round" all_reduce -b 8 -e 64M -f 8 -n 20 -z "$z"
  done
done
CUDA_VISIBLE_DEVICES=0 timeout 120 "$B" run all_reduce -b 1M -e 1M -z 3 -G 1 --backend nccl > "$O/B.z3G1.txt" 2>&1
echo quit | "$MPSCTL"
"$A" --version > "$O/versions.txt" 2>&1; "$B" --version >> "$O/versions.txt" 2>&1; nvidia-smi -L >> "$O/versions.txt"
tar czf "${OUT:-bench-out}/blocking.tgz" -C "${OUT:-bench-out}" blocking
grep -h "Out of bounds\|Avg bus" "$O"/*.r0.txt | sort | uniq -c
head -3 "$O/B.z3G1.txt"; grep -c "incompatible" "$O/B.z3G1.txt"
