#!/usr/bin/env python3
"""Ratios between two runs in nccl-tests' text layout (or collbench JSON), per op.

usage: pair_ratio.py A B [OPS...]
  A, B: a collbench JSON record, a directory of <op>.txt logs (nccl-tests
  or bench/ref/nccl_ref output), or a path prefix such as
  anchors/h200x2/mpi2_ for anchors/h200x2/mpi2_<op>.txt. Prints A/B per op: the lowest busbw ratio at
  sizes >= 64 MiB, and the highest and median time ratio at sizes <= 64 KiB,
  over out-of-place and in-place rows. Run it on two runs of one program to
  see the noise floor that any comparison on that machine sits on.
"""
import json
import os
import statistics
import sys


def text_rows(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if not f or line.startswith("#") or not f[0].isdigit() or len(f) < 13:
            continue
        rows[int(f[0])] = {"oop": (float(f[5]), float(f[7])), "ip": (float(f[9]), float(f[11]))}
    return rows


def load(src, op):
    """size -> {placement: (time_us, busbw)} for one op, or None."""
    if os.path.isdir(src) or not os.path.isfile(src):
        path = os.path.join(src, f"{op}.txt") if os.path.isdir(src) else f"{src}{op}.txt"
        return text_rows(path) if os.path.exists(path) else None
    rows = {}
    for r in json.load(open(src))["results"]:
        if r["op"] != op:
            continue
        rows[r["size_bytes"]] = {
            k: (r[n]["time_us"], r[n]["busbw_gbps"])
            for k, n in (("oop", "out_of_place"), ("ip", "in_place"))
            if r.get(n)
        }
    return rows or None


def ratios(a, b):
    bw, tm = [], []
    for size in sorted(set(a) & set(b)):
        for key in ("oop", "ip"):
            if key not in a[size] or key not in b[size]:
                continue
            (ta, ba), (tb, bb) = a[size][key], b[size][key]
            if size >= 64 << 20 and bb > 0:
                bw.append((ba / bb, size, key))
            if 0 < size <= 64 << 10 and tb > 0:
                tm.append(ta / tb)
    return bw, tm


def main():
    a_src, b_src = sys.argv[1], sys.argv[2]
    ops = sys.argv[3:] or ["all_reduce", "all_gather", "reduce_scatter", "alltoall",
                           "broadcast", "reduce", "sendrecv"]
    print("| op | min busbw ratio >= 64 MiB (at size) | median busbw ratio >= 64 MiB | max time ratio <= 64 KiB | median time ratio <= 64 KiB |")
    print("|---|---|---|---|---|")
    for op in ops:
        a, b = load(a_src, op), load(b_src, op)
        if not a or not b:
            continue
        bw, tm = ratios(a, b)
        if not bw or not tm:
            continue
        lo = min(bw)
        print(f"| {op} | {lo[0]:.3f} ({lo[1] >> 20} MiB, {lo[2]}) | "
              f"{statistics.median(x[0] for x in bw):.3f} | {max(tm):.2f} | {statistics.median(tm):.2f} |")


if __name__ == "__main__":
    main()
