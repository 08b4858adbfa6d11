#!/usr/bin/env bash
# Issue #40's GPU bars on the one-GPU machine (not yet run: no GPU was lent
# in session 17). 1) `doctor`'s topology lines beside `nvidia-smi -q` (model,
# PCIe generation/width, NVLink state). 2) Two emulated hosts
# (../shared/recipes/emulated-hosts.md: NCCL_HOSTID per process, CUDA MPS,
# socket transport over loopback): every row must be at or below its
# network ceiling from the loopback probe; the last line prints the rows
# with no ceiling or above it ([] when the bar holds).
#   CB=target/dist/collbench bash bench/gpu-ceiling.sh   (results under $OUT)
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-target/dist/collbench}"); O=${OUT:-bench-out}/ceiling; mkdir -p "$O"
"$CB" doctor > "$O/doctor.txt" 2>&1
nvidia-smi -q > "$O/smi-q.txt" 2>&1; nvidia-smi -q -x > "$O/smi-q.xml" 2>&1; nvidia-smi nvlink -s > "$O/nvlink.txt" 2>&1
nvidia-smi topo -m > "$O/topo.txt" 2>&1
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
for r in 0 1; do
  NCCL_HOSTID=emu-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 COLLBENCH_BIND=127.0.0.1 \
    "$CB" run all_reduce all_gather reduce_scatter alltoall sendrecv broadcast -b 1M -e 512M -f 4 \
    --backend nccl --format json -q --output "$O/emu2.r$r.json" > "$O/emu2.r$r.log" 2>&1 &
done
wait
echo quit | "$MPSCTL"
python3 - "$O/emu2.r0.json" > "$O/verdict.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("nics:", d.get("topology", {}).get("nics"))
bad = [(r["op"], r["size_bytes"], k, p["busbw_gbps"], (p.get("ceiling") or {}).get("busbw_gbps"))
       for r in d["results"] for k in ("out_of_place", "in_place")
       if (p := r.get(k)) and (not p.get("ceiling") or p["busbw_gbps"] > p["ceiling"]["busbw_gbps"])]
print("rows with no ceiling or above it:", bad)
PY
cat "$O/verdict.txt"; grep -i topology "$O/doctor.txt"
tar czf "${OUT:-bench-out}/ceiling.tgz" -C "${OUT:-bench-out}" ceiling
