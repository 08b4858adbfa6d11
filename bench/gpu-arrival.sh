#!/usr/bin/env bash
# Issue #53's GPU bars on one GPU: 2 and 4 emulated hosts
# (../shared/recipes/emulated-hosts.md: NCCL_HOSTID per process, MPS,
# NCCL's socket transport over loopback).
#  1. named: --test-late-entry K:D holds rank K's stream D us before every
#     timed collective (a spin kernel on the GPU's timer); every row must
#     name rank K, as a late rank, with its lead within 10% of D or the
#     stated clock error; D = 1000 and 100, RUNS runs each.
#  2. quiet: the same rows without the hook name nobody.
#  3. overhead, A B A B: the table's time without and with --arrival
#     (the stamps take a pass of their own: the table should not move),
#     ROUNDS rounds, 1 MiB .. 64 MiB; and the device-time busbw beside
#     the host-time one, in the JSON.
# Results in $OUT/arrival (tarred to $OUT/arrival.tgz); the summary on
# stdout goes to bench/results/gpu-arrival.md.
#   CB=target/debug/collbench RUNS=5 ROUNDS=2 bash bench/gpu-arrival.sh
set -u
export PATH=$PATH:/usr/local/nvidia/bin
CB=$(realpath "${CB:-dist/collbench}")
RUNS=${RUNS:-5} ROUNDS=${ROUNDS:-2}
O=${OUT:-bench-out}/arrival; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mkdir -p /tmp/mps /tmp/mpslog && "$MPSCTL" -d
port=29800
emu() { # emu W NAME -- ARGS...: W processes as W hosts; rc of each in NAME.rc
  local w=$1 name=$2; shift 3
  port=$((port + 1)); local pids=() r
  for r in $(seq 0 $((w - 1))); do
    env NCCL_HOSTID=emu-$name-$r CUDA_VISIBLE_DEVICES=0 RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r \
      LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COLLBENCH_BIND=127.0.0.1 \
      timeout 240 "$CB" run "$@" --backend nccl > "$O/$name.r$r.txt" 2> "$O/$name.r$r.err" &
    pids+=($!)
  done
  local rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
  echo "$rcs" > "$O/$name.rc"
}
ROWS="all_reduce -b 64K -e 4M -f 4 -w 5 -n 40 -c 0"
for w in 2 4; do
  k=$((w - 1))
  for run in $(seq 1 "$RUNS"); do
    for d in 1000 100; do
      emu $w "late$w-$d-$run" -- $ROWS --arrival --test-late-entry "$k:$d" --output "$O/late$w-$d-$run.json"
    done
    emu $w "quiet$w-$run" -- $ROWS --arrival --output "$O/quiet$w-$run.json"
  done
  for round in $(seq 1 "$ROUNDS"); do
    emu $w "off$w-$round" -- all_reduce -b 1M -e 64M -f 4 -w 5 -n 50 -c 0 --output "$O/off$w-$round.json"
    emu $w "on$w-$round" -- all_reduce -b 1M -e 64M -f 4 -w 5 -n 50 -c 0 --arrival --output "$O/on$w-$round.json"
  done
done
echo quit | "$MPSCTL"
"$CB" --version > "$O/versions.txt" 2>&1; nvidia-smi -L >> "$O/versions.txt"
tar czf "${OUT:-bench-out}/arrival.tgz" -C "${OUT:-bench-out}" arrival
grep -L "^0 0 *$\|^0 0 0 0 *$" "$O"/*.rc | sed 's/^/failed: /'
python3 - "$O" <<'PY'
import json, sys, glob, re, statistics as st
o = sys.argv[1]
def rows(f):
    for row in json.load(open(f))["results"]:
        for p in ("out_of_place", "in_place"):
            if row.get(p):
                yield row["size_bytes"], p, row[p]
print("## named (late rank's lead vs the hook's delay)")
for f in sorted(glob.glob(o + "/late*.json")):
    w, d, run = re.search(r"late(\d)-(\d+)-(\d+)", f).groups()
    w, d = int(w), float(d)
    for size, p, pl in rows(f):
        a = pl.get("arrival") or {}
        s = a.get("straggler") or {}
        tol = max(0.1 * d, a.get("clock_error_us", 0))
        ok = s.get("rank") == w - 1 and abs(s.get("before_us", 0) - d) <= tol
        print(f"W={w} d={d:.0f} run={run} {size:>8} {p[:3]} named={s.get('rank')} "
              f"{s.get('kind')} before={s.get('before_us', 0):.1f} skew={a.get('skew_us', 0):.1f} "
              f"clock_err={a.get('clock_error_us', 0):.2f} {'OK' if ok else 'MISS'}")
print("## quiet")
for f in sorted(glob.glob(o + "/quiet*.json")):
    for size, p, pl in rows(f):
        a = pl.get("arrival") or {}
        print(f"{f.split('/')[-1]} {size:>8} {p[:3]} skew={a.get('skew_us', 0):.1f} "
              f"named={(a.get('straggler') or {}).get('rank')} clock_err={a.get('clock_error_us', 0):.2f}")
print("## A B A B: table time off/on, and device-time busbw beside host-time busbw")
for w in (2, 4):
    off, on, dev = {}, {}, {}
    for mode, acc in (("off", off), ("on", on)):
        for f in sorted(glob.glob(f"{o}/{mode}{w}-*.json")):
            for size, p, pl in rows(f):
                acc.setdefault((size, p), []).append(pl["time_us"])
                if mode == "on" and pl.get("arrival"):
                    a = pl["arrival"]
                    dev.setdefault((size, p), []).append(
                        (pl["busbw_gbps"], a["device_busbw_gbps"], a["inside_min_us"], a["inside_max_us"], a["skew_us"]))
    for key in sorted(off):
        a, b = st.median(off[key]), st.median(on.get(key, [float("nan")]))
        line = f"W={w} {key[0]:>9} {key[1][:3]} off {a:9.1f} us on {b:9.1f} us ({100 * (b - a) / a:+5.1f}%)"
        if dev.get(key):
            host, devbw, imin, imax, skew = (st.median(x) for x in zip(*dev[key]))
            line += f"  busbw host {host:6.2f} device {devbw:6.2f} GB/s  inside {imin:.1f}..{imax:.1f} us skew {skew:.1f} us"
        print(line)
PY
