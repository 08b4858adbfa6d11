#!/usr/bin/env python3
"""A/B ratios between runs printed in nccl-tests' text layout.

usage: ab_text.py [--oop] A1.txt[,A2.txt...] B1.txt[,B2.txt...]

--oop: out-of-place rows only (with one rank NCCL's in-place collectives
are no-ops of a few hundred nanoseconds: noise, not a measurement).

Each file is the stdout of one run (collbench or nccl-tests; several ops per
file are fine: "# Collective test starting: <op>_perf" starts a block, and a
file of one nccl-tests binary is named after its op). Rows of the same
(op, size, placement) from the A files and from the B files are each
averaged (rounds of an interleaved A B A B run), then A/B is taken. Prints,
per op: rows, #wrong in A and B, median and lowest busbw ratio at >= 64 MiB
(algbw where busbw is 0, as with one rank), median time ratio at <= 64 KiB;
a last row "all" over every op's rows.
Exit 0 always: the numbers are the result.
"""
import os
import re
import statistics
import sys


def rows(path):
    out = {}
    m = re.match(r"(?:.*/)?(?:[a-z0-9]+_)?([a-z_]+?)(?:_perf)?\d*\.txt$", path)
    op = None
    for line in open(path, errors="replace"):
        s = re.match(r"# Collective test starting: (\w+)_perf", line)
        if s:
            op = s.group(1)
            continue
        f = line.split()
        if not f or not f[0].isdigit() or len(f) < 13:
            continue
        try:
            oop = (float(f[5]), float(f[6]), float(f[7]), f[8])
            ip = (float(f[9]), float(f[10]), float(f[11]), f[12])
        except ValueError:
            continue
        key_op = op or os.path.basename(path).split(".")[0]
        out[(key_op, int(f[0]), "oop")] = oop
        out[(key_op, int(f[0]), "ip")] = ip
    return out


def merged(paths):
    acc = {}
    for p in paths:
        for k, v in rows(p).items():
            acc.setdefault(k, []).append(v)
    return acc


def main():
    args = sys.argv[1:]
    oop_only = "--oop" in args
    args = [x for x in args if x != "--oop"]
    a, b = merged(args[0].split(",")), merged(args[1].split(","))
    if oop_only:
        a = {k: v for k, v in a.items() if k[2] == "oop"}
        b = {k: v for k, v in b.items() if k[2] == "oop"}
    ops = sorted({k[0] for k in a} & {k[0] for k in b})
    # The last row, "all", takes every op's rows together.
    ops.append(None)
    print("| op | rows | #wrong A | #wrong B | median bw ratio >= 64 MiB | lowest (size) | median time ratio <= 64 KiB |")
    print("|---|---|---|---|---|---|---|")
    for op in ops:
        keys = sorted(k for k in a if (op is None or k[0] == op) and k in b)
        wa = sum(int(x[3]) for k in keys for x in a[k] if x[3].isdigit())
        wb = sum(int(x[3]) for k in keys for x in b[k] if x[3].isdigit())
        bw, tm = [], []
        for k in keys:
            ta = statistics.mean(x[0] for x in a[k]); tb = statistics.mean(x[0] for x in b[k])
            ba = statistics.mean(x[2] or x[1] for x in a[k]); bb = statistics.mean(x[2] or x[1] for x in b[k])
            if k[1] >= 64 << 20 and bb > 0:
                bw.append((ba / bb, k[1], k[2]))
            if 0 < k[1] <= 64 << 10 and tb > 0:
                tm.append(ta / tb)
        med_bw = f"{statistics.median(x[0] for x in bw):.3f}" if bw else "-"
        lo = min(bw) if bw else None
        lo_s = f"{lo[0]:.3f} ({lo[1] >> 20} MiB {lo[2]})" if lo else "-"
        med_t = f"{statistics.median(tm):.3f}" if tm else "-"
        print(f"| {op or 'all'} | {len(keys)} | {wa} | {wb} | {med_bw} | {lo_s} | {med_t} |")


if __name__ == "__main__":
    main()
