# Sourced by the session GPU scripts: MPS and NCCL's socket transport over
# loopback for two emulated hosts on one GPU (../shared/recipes/
# emulated-hosts.md), and `emu`, which runs collbench as both.
# Needs CB (the binary) and O (the output folder); EMU_PORT (first port
# minus one) and EMU_TIMEOUT (seconds a process may run) are optional.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
port=${EMU_PORT:-29900}
emu() { # emu NAME [VAR=VALUE ...] -- ARGS...: two processes as two hosts
  local name=$1; shift; local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done; shift
  port=$((port + 1)); local pids=() r rcs=""
  for r in 0 1; do
    env NCCL_HOSTID=emu-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 "${vars[@]}" \
      timeout "${EMU_TIMEOUT:-150}" "$CB" "$@" > "$O/$name.r$r.out" 2> "$O/$name.r$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
  echo "$name exit codes: $rcs" | tee -a "$O/exits.txt"
}
