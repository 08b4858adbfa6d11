#!/usr/bin/env python3
"""Ratios of a collbench run (JSON) to nccl-tests text logs, per op.

usage: anchor_ratio.py RUN.json ANCHOR_DIR PREFIX [OPS...]
  PREFIX is '' for <op>.txt (one process, -g 2) or 'mpi2_' for mpi2_<op>.txt.
Prints, per op: the lowest busbw ratio at sizes >= 64 MiB, and the highest
and median time ratio at sizes <= 64 KiB (out-of-place and in-place rows).
"""
import json
import statistics
import sys

# One reader of nccl-tests' text rows for both scripts (same folder).
from pair_ratio import text_rows as anchor_rows


def main():
    run, anchors, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    rec = json.load(open(run))
    ops = sys.argv[4:] or sorted({r["op"] for r in rec["results"]})
    print("| op | min busbw ratio >= 64 MiB (at size) | busbw @ 8 GiB: collbench / anchor | max time ratio <= 64 KiB | median time ratio <= 64 KiB |")
    print("|---|---|---|---|---|")
    for op in ops:
        try:
            a = anchor_rows(f"{anchors}/{prefix}{op}.txt")
        except FileNotFoundError:
            continue
        bw, tm, big = [], [], None
        for r in rec["results"]:
            if r["op"] != op or r["size_bytes"] not in a or r["size_bytes"] == 0:
                continue
            s = r["size_bytes"]
            for key, name in (("oop", "out_of_place"), ("ip", "in_place")):
                p = r.get(name)
                t_a, bw_a = a[s][key]
                if not p:
                    continue
                if s >= 64 << 20 and bw_a > 0:
                    bw.append((p["busbw_gbps"] / bw_a, s, name))
                if s <= 64 << 10 and t_a > 0:
                    tm.append(p["time_us"] / t_a)
                if s == 8 << 30 and key == "oop":
                    big = (p["busbw_gbps"], bw_a)
        lo = min(bw) if bw else None
        print(f"| {op} | {lo[0]:.3f} ({lo[1]} B, {lo[2]}) | "
              + (f"{big[0]:.1f} / {big[1]:.1f}" if big else "-")
              + f" | {max(tm):.2f} | {statistics.median(tm):.2f} |" if lo and tm else f"| {op} | - | - | - | - |")


main()
