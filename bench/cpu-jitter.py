#!/usr/bin/env python3
"""bench/cpu-jitter.py BINARY N [extra run flags]: two batches of N runs of a collbench binary; per row: median of each
batch, their ratio, and how many single runs were >20% off the overall median."""
import json, subprocess, sys, statistics, os
binary, runs = sys.argv[1], int(sys.argv[2])
extra = sys.argv[3:]
cmd = [binary, "run", "all_reduce", "all_gather", "broadcast", "sendrecv",
       "-b", "8", "-e", "64K", "-f", "8", "--format", "json"] + extra
batches = [{}, {}]
loads = []
for b in range(2):
    for i in range(runs):
        loads.append(os.getloadavg()[0])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        for r in json.loads(out)["results"]:
            batches[b].setdefault((r["op"], r["size_bytes"]), []).append(r["out_of_place"]["time_us"])
print("cmd: collbench", " ".join(cmd[1:]))
print(f"2 batches x {runs} runs; 1-minute load average during: {min(loads):.1f} .. {max(loads):.1f}")
print()
print("| op | bytes | median A (us) | median B (us) | B/A | min..max of all runs (us) | runs >20% off median |")
print("|---|---:|---:|---:|---:|---:|---:|")
agree = 0
rows = list(batches[0])
for key in rows:
    a, b = batches[0][key], batches[1][key]
    ma, mb = statistics.median(a), statistics.median(b)
    allr = a + b
    m = statistics.median(allr)
    off = sum(1 for t in allr if abs(t - m) > 0.2 * m)
    ok = abs(mb / ma - 1) <= 0.2
    agree += ok
    print(f"| {key[0]} | {key[1]} | {ma:.2f} | {mb:.2f} | {mb/ma:.2f} | {min(allr):.2f}..{max(allr):.2f} | {off}/{len(allr)} |")
print()
print(f"rows whose batch medians agree within 20%: {agree} of {len(rows)}")
