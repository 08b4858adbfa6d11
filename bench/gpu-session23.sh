#!/usr/bin/env bash
# Session 23's GPU checks after the merges (NcclBackend split into owned
# parts, the placement-extension seam for -B, the arrival rule's second
# candidate, every rank exiting with rank 0's code), in one device call:
#  1. the release build against session 22's (bench/release_ab.sh, A B A B,
#     2 rounds, each build against itself as the noise);
#  2. -B on two emulated hosts, fixed algorithm: 0 mismatches; the flip hook
#     named exactly, and now exit 1 on BOTH processes;
#  3. run --require-transport ib on two emulated hosts: exit 7 on both;
#     socket: 0 on both.
#   CB=dist/collbench PREV=dist/collbench-prev OUT=$OUT bash bench/gpu-session23.sh
# (SKIP_AB=1 skips section 1)
# #53's rows then run with: CB=dist/collbench RUNS=2 ROUNDS=0 bash bench/gpu-arrival.sh
set -u
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/nvidia/bin NCCL_NVLS_ENABLE=0
CB=$(realpath "${CB:-dist/collbench}"); PREV=$(realpath "${PREV:-dist/collbench-prev}")
ROOT=${OUT:-bench-out}; O=$ROOT/s23; mkdir -p "$O"
{ "$CB" --version; "$PREV" --version; nvidia-smi -L; } > "$O/versions.txt" 2>&1
if [ "${SKIP_AB:-0}" != 1 ]; then
  echo "== 1. release A/B"
  NEW=$CB PREV=$PREV ROUNDS=2 OUT=$ROOT timeout 300 bash bench/release_ab.sh > "$O/release.log" 2>&1
  tail -30 "$O/release.log"
fi
EMU_PORT=29950 EMU_TIMEOUT=120
. bench/emu2-lib.sh
echo "== 2. -B on two emulated hosts"
emu bitwise NCCL_ALGO=Ring -- run all_reduce reduce_scatter all_gather -b 1K -e 16M -f 8 -B 20 --backend nccl
emu bitflip NCCL_ALGO=Ring -- run all_reduce -b 1M -e 1M -B 5 --test-bitwise-flip 2:1:5:30 --backend nccl
grep -h -i "bitwise" "$O"/bitwise.r0.out "$O"/bitflip.r0.out | head -12
echo "== 3. the transport gate: every process exits with rank 0's code"
emu gate_ib -- run all_reduce -b 1M -e 4M --require-transport ib --backend nccl
emu gate_socket -- run all_reduce -b 1M -e 4M --require-transport socket --backend nccl
grep -h -i "transport\|path" "$O"/gate_ib.r0.out "$O"/gate_ib.r0.err | head -6
echo quit | "$MPSCTL"
tar czf "$ROOT/s23.tgz" -C "$ROOT" s23
