#!/usr/bin/env bash
# The GPU bars left after session 22's merges, in one device call:
#  1. #52: the release build against the one before (bench/release_ab.sh,
#     A B A B, 2 rounds, each build against itself as the noise);
#  2. #52: -B on two emulated hosts with a fixed algorithm (NCCL_ALGO=Ring):
#     0 mismatches; and the flip hook named exactly on the NCCL backend;
#  3. #50: check on two emulated hosts: the path line, the gate
#     (--require-transport ib must FAIL naming NET/Socket and the cause,
#     socket must pass) and the fabric variants;
#  4. #53: --arrival's cost on one rank, A B A B x2, 1 MiB - 1 GiB.
#   CB=dist/collbench PREV=dist/collbench-prev OUT=$OUT bash bench/gpu-session22.sh
set -u
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/nvidia/bin NCCL_NVLS_ENABLE=0
CB=$(realpath "${CB:-dist/collbench}"); PREV=$(realpath "${PREV:-dist/collbench-prev}")
ROOT=${OUT:-bench-out}; O=$ROOT/s22; mkdir -p "$O"
{ "$CB" --version; nvidia-smi -L; } > "$O/versions.txt" 2>&1
echo "== 1. release A/B"
NEW=$CB PREV=$PREV ROUNDS=2 OUT=$ROOT timeout 200 bash bench/release_ab.sh > "$O/release.log" 2>&1
tail -30 "$O/release.log"
echo "== 4. --arrival cost, one rank"
for r in 1 2; do
  for v in plain arrival; do
    extra=(); [ $v = arrival ] && extra=(--arrival)
    CUDA_VISIBLE_DEVICES=0 timeout 60 "$CB" run all_reduce -b 1M -e 1G -f 4 -w 5 -n 40 "${extra[@]}" > "$O/cost.$v.$r.txt" 2>&1
  done
done
python3 - "$O" <<'PY'
import sys, re
o = sys.argv[1]
def rows(f):
    out = {}
    for l in open(f):
        w = l.split()
        if len(w) > 8 and w[0].isdigit() and not l.startswith('#'):
            out[int(w[0])] = float(w[5])
    return out
for r in (1, 2):
    a, b = rows(f"{o}/cost.plain.{r}.txt"), rows(f"{o}/cost.arrival.{r}.txt")
    print(f"round {r}: time with --arrival / without, per size:",
          " ".join(f"{s>>20}M:{b[s]/a[s]:.3f}" for s in sorted(a) if s in b))
a1, a2 = rows(f"{o}/cost.plain.1.txt"), rows(f"{o}/cost.plain.2.txt")
print("noise plain2/plain1:", " ".join(f"{s>>20}M:{a2[s]/a1[s]:.3f}" for s in sorted(a1) if s in a2))
PY
EMU_PORT=29900 EMU_TIMEOUT=150
. bench/emu2-lib.sh
echo "== 2. -B on two emulated hosts"
emu bitwise NCCL_ALGO=Ring -- run all_reduce reduce_scatter all_gather -b 1K -e 16M -f 8 -B 20 --backend nccl
emu bitflip NCCL_ALGO=Ring -- run all_reduce -b 1M -e 1M -B 5 --test-bitwise-flip 2:1:5:30 --backend nccl
grep -h -i "bitwise" "$O"/bitwise.r0.out "$O"/bitflip.r0.out | head -12
echo "== 3. check: path, gate, variants"
emu check -- check --backend nccl --size 64M --json "$O/check.json"
emu gate_ib -- check --backend nccl --size 16M --require-transport ib
emu gate_socket -- check --backend nccl --size 16M --require-transport socket
echo quit | "$MPSCTL"
for n in check gate_ib gate_socket; do
  echo "-- $n"; grep -h -E "path|transport|network only|within hosts|all paths|^collbench check" "$O/$n.r0.out" | head -12
done
tar czf "$ROOT/s22.tgz" -C "$ROOT" s22
