#!/usr/bin/env bash
# Issue #51's GPU bar: `check` on 4 emulated hosts (NCCL_HOSTID per
# process + MPS, NCCL's socket transport over lo) in two fabric groups.
# With every test between the groups slowed to 0.2x by the test hook
# (COLLBENCH_TEST_GROUP_LINK), the link between the groups must be named
# and no host; a quiet job must name nothing. Exit codes, text and JSON
# under $OUT/nodestate/.
#   CB=dist/collbench OUT=$OUT bash bench/gpu-node-state.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-dist/collbench}"); O=${OUT:-bench-out}/nodestate; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
printf 'n0 leaf0\nn1 leaf0\nn2 leaf1\nn3 leaf1\n' > "$O/groups.txt"
port=29800
job() { # job NAME [VAR=VALUE ...]: four processes as four hosts n0..n3
  local name=$1; shift; port=$((port + 1)); local pids=() r rcs=""
  for r in 0 1 2 3; do
    env NCCL_HOSTID=n$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 "$@" \
      timeout 280 "$CB" check --backend nccl --size 64M --groups "$O/groups.txt" \
      --json "$O/$name.r$r.json" > "$O/$name.r$r.out" 2> "$O/$name.r$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
  echo "$name exit codes: $rcs" | tee -a "$O/exits.txt"
}
job link COLLBENCH_TEST_GROUP_LINK=0.2
job quiet
echo quit | "$MPSCTL"
for n in link quiet; do
  echo "== $n"; grep -h -E "^# (fabric groups|link between|host )|FAIL|WARN|PASS|INCOMPLETE|SLOW" "$O/$n.r0.out" | head -20
done
tar czf "${OUT:-bench-out}/nodestate.tgz" -C "${OUT:-bench-out}" nodestate
