#!/usr/bin/env bash
# Issue #50 on one GPU: two emulated hosts (../shared/recipes/emulated-hosts.md,
# NCCL's socket transport over loopback) must be recorded as NET/Socket for
# every pair of ranks; --require-transport ib must exit 7 naming NET/Socket
# and the cause (NCCL_IB_DISABLE=1, as the recipe sets); --require-transport
# socket must pass; the user's NCCL_DEBUG=WARN must stay theirs (path
# unknown, said so); their own NCCL_DEBUG_FILE must be read. Also doctor's
# PCIe line beside nvidia-smi -q.
#   CB=dist/collbench bash bench/gpu-transport.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-dist/collbench}")
O=${OUT:-bench-out}/transport; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
port=29700
emu() { # emu W NAME [VAR=VALUE ...] -- ARGS...: W processes as W hosts; rc of each in NAME.rc
  local w=$1 name=$2; shift 2; local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done; shift
  port=$((port + 1)); local pids=() r
  for r in $(seq 0 $((w - 1))); do
    env NCCL_HOSTID=emu-$name-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r \
      LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 "${vars[@]}" \
      timeout 240 "$CB" run "$@" --backend nccl > "$O/$name.r$r.txt" 2> "$O/$name.r$r.err" &
    pids+=($!)
  done
  local rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
  echo "$rcs" > "$O/$name.rc"; echo "$name rc=$rcs"
}
for w in 2 4; do
  emu $w "plain$w" -- all_reduce -b 8 -e 8M -f 8 --output "$O/plain$w.json"
  emu $w "all$w" -- all -b 1M -e 1M --output "$O/all$w.json"
done
emu 2 ib -- all_reduce -b 8 -e 1M -f 8 --require-transport ib
emu 2 socket -- all_reduce -b 8 -e 1M -f 8 --require-transport socket
emu 2 userwarn NCCL_DEBUG=WARN -- all_reduce -b 8 -e 1M -f 8 --require-transport socket --output "$O/userwarn.json"
emu 2 userfile NCCL_DEBUG=INFO "NCCL_DEBUG_FILE=$O/userfile.%h.%p.nccl" -- all_reduce -b 8 -e 1M -f 8 --output "$O/userfile.json"
echo quit | "$MPSCTL"
"$CB" doctor > "$O/doctor.txt" 2>&1
nvidia-smi -q > "$O/nvidia-smi-q.txt" 2>&1
"$CB" --version > "$O/versions.txt" 2>&1; nvidia-smi -L >> "$O/versions.txt"
tar czf "${OUT:-bench-out}/transport.tgz" -C "${OUT:-bench-out}" transport
for f in "$O"/*.rc; do echo "$(basename "$f" .rc): $(cat "$f")"; done
grep -h "NCCL path" "$O"/*.r0.txt | sort | uniq -c
grep -h "transport" "$O"/ib.r0.err "$O"/userwarn.r0.err
python3 - "$O" <<'PY'
import json, sys, glob, collections
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    r = json.load(open(f)); p = r.get("nccl_path")
    if not p: print(f, "no nccl_path"); continue
    vias = collections.Counter(x["via"].split("/")[0] + "/" + x["via"].split("/")[1] for x in p.get("pairs", []))
    ranks = len(r.get("devices", []))
    pairs = {(x["from"], x["to"]) for x in p.get("pairs", [])}
    env = {k: v for k, v in r.get("env", {}).items() if k.startswith("NCCL_DEBUG")}
    print(f.split("/")[-1], "net", p.get("net"), "gdr", p.get("gdr"), "ranks", ranks, "pairs", len(pairs), dict(vias), "env NCCL_DEBUG*", env)
PY
grep -i "pcie" "$O/doctor.txt"; grep -A12 "PCI$" "$O/nvidia-smi-q.txt" | grep -i -A3 "Link Gen\|Link Width" | head -20
