#!/usr/bin/env bash
# Why an emulated-host broadcast can sit above the loopback ceiling (#40):
# the loopback rate by stream count (bench/loopback_probe.py, aggregate
# over wall time), then broadcast on two emulated hosts with nccl-tests'
# -a 1 (time averaged over ranks, the default) and -a 3 (the slowest
# rank's time), alternately, with collbench's own probe in the record.
#   CB=target/dist/collbench bash bench/emu-broadcast-average.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-target/dist/collbench}"); O=${OUT:-bench-out}/bcast; mkdir -p "$O"
python3 bench/loopback_probe.py $((256<<20)) > "$O/loopback.txt" 2>&1
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
port=29540
for round in 1 2; do
  for avg in 1 3; do
    port=$((port + 1))
    for r in 0 1; do
      NCCL_HOSTID=emu-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 \
        "$CB" run broadcast sendrecv -b 256K -e 64M -f 4 -a $avg --backend nccl --format json -q \
        --output "$O/a$avg.round$round.r$r.json" > "$O/a$avg.round$round.r$r.log" 2>&1 &
    done
    wait
  done
done
echo quit | "$MPSCTL"
python3 - "$O" > "$O/summary.txt" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "a*.r0.json"))):
    d = json.load(open(f))
    nic = (d.get("topology", {}).get("nics") or [{}])[0]
    print(os.path.basename(f), "probe GB/s", round(nic.get("rate_gbit", 0) / 8, 2))
    for r in d["results"]:
        o = r["out_of_place"]; c = (o.get("ceiling") or {}).get("busbw_gbps")
        print(f"  {r['op']:<10} {r['size_bytes']:>9} busbw {o['busbw_gbps']:6.2f} ceiling {c}")
PY
cat "$O/loopback.txt" "$O/summary.txt"
tar czf "${OUT:-bench-out}/bcast.tgz" -C "${OUT:-bench-out}" bcast
