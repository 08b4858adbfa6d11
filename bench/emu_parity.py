#!/usr/bin/env python3
"""collbench against the real nccl-tests on the emulated hosts, with the
noise of nccl-tests against itself beside it.

usage: emu_parity.py DIR [PREFIX]
  DIR holds PREFIX<r>.txt (collbench's rank-0 stdout of round r, every op in
  one file; PREFIX defaults to "cb") and nt<r>/<op>.txt (nccl-tests, one
  file per op, the same round r).

Rows are (op, size, placement). Two figures, each over all rows of the run:
  bw:   median ratio of busbw (algbw where busbw is 0) at >= 64 MiB
  time: median ratio of time at <= 64 KiB
cb/nt compares the mean of collbench's rounds with the mean of nccl-tests'.
The noise is nccl-tests against itself: the same two figures between every
two of its rounds (round i over round j, both ways), whose range is the
band a same-tool difference moves in. "inside" says whether cb/nt lies in
that band (with fewer than three rounds it says the band is too narrow to
mean much). Exit 0 always: the numbers are the result.
"""
import glob
import itertools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_text import merged as load  # noqa: E402


def figures(a, b):
    """(median bw ratio >= 64 MiB, median time ratio <= 64 KiB) of a over b."""
    bw, tm = [], []
    for k in a.keys() & b.keys():
        ta = statistics.mean(x[0] for x in a[k]); tb = statistics.mean(x[0] for x in b[k])
        ba = statistics.mean(x[2] or x[1] for x in a[k]); bb = statistics.mean(x[2] or x[1] for x in b[k])
        if k[1] >= 64 << 20 and bb > 0:
            bw.append(ba / bb)
        if 0 < k[1] <= 64 << 10 and tb > 0:
            tm.append(ta / tb)
    med = lambda v: statistics.median(v) if v else None
    return med(bw), med(tm)


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 0
    d = argv[1]
    prefix = argv[2] if len(argv) > 2 else "cb"
    cb_files = sorted(glob.glob(os.path.join(d, f"{prefix}[0-9]*.txt")))
    cb_files = [f for f in cb_files if ".r" not in os.path.basename(f)]
    nt_rounds = sorted(glob.glob(os.path.join(d, "nt[0-9]*")))
    nt_by_round = [load(glob.glob(os.path.join(r, "*.txt"))) for r in nt_rounds]
    nt_by_round = [r for r in nt_by_round if r]
    cb = load(cb_files)
    nt = {}
    for r in nt_by_round:
        for k, v in r.items():
            nt.setdefault(k, []).extend(v)
    wrong = sum(int(x[3]) for v in cb.values() for x in v if x[3].isdigit())
    print(f"## {d} ({prefix}: {len(cb_files)} rounds, nccl-tests: {len(nt_by_round)} rounds)")
    if not cb or not nt:
        print("no rows to compare (a side is missing)")
        return 0
    bw, tm = figures(cb, nt)
    noise = [figures(a, b) for a, b in itertools.permutations(nt_by_round, 2)]
    band = lambda i: [x[i] for x in noise if x[i] is not None]
    print("| figure | cb/nt | nt/nt range (noise) | inside |")
    print("| --- | --- | --- | --- |")
    for name, val, i in (("busbw >= 64 MiB", bw, 0), ("time <= 64 KiB", tm, 1)):
        b = band(i)
        if val is None or not b:
            print(f"| {name} | {fmt(val)} | - | - |")
            continue
        lo, hi = min(b), max(b)
        inside = "yes" if lo <= val <= hi else "no"
        # Two rounds give one pair, seen both ways: a band of x and 1/x
        # that says little about the spread (call 9's 0.993 - 1.007).
        if len(nt_by_round) < 3:
            inside += " (2 rounds: too few for a spread)"
        print(f"| {name} | {val:.3f} | {lo:.3f} - {hi:.3f} | {inside} |")
    print(f"collbench #wrong over all rows and rounds: {wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
