#!/usr/bin/env python3
"""The faults stage's trials (bench/emu.sh), judged against issue 26's bar.

usage: emu_faults.py TRIALS.tsv T

One row per trial: name, processes, who was stopped (a rank, or k9: rank 1
killed with SIGKILL), the survivors' exit codes, seconds from the signal to
the last survivor's exit, the stopped process's exit code and seconds from
its SIGCONT to its exit, and the first "collbench: " line on any stderr.
A SIGSTOP trial passes when every survivor exits 5 within T + 5 s and the
continued process ends within 5 s; a SIGKILL trial when every survivor
exits 3 within T + 5 s. Prints one table row per (processes, stopped).
"""
import csv
import sys
from collections import defaultdict


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    t = float(argv[2])
    groups = defaultdict(list)
    with open(argv[1]) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            kind = "check" if r["trial"].startswith("check") else "run"
            groups[(kind, r["processes"], r["stopped"])].append(r)
    print("| command | processes | stopped | trials passed | survivors' exit | survivors' s (max) | continued: exit, s (max) | line (first trial) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (kind, w, who), trials in sorted(groups.items()):
        want = "3" if who == "k9" else "5"
        ok = 0
        for r in trials:
            rcs = r["survivors_rc"].split()
            fast = float(r["survivors_s"]) <= t + 5
            cont_ok = who == "k9" or (r["continued_s"] != "-" and float(r["continued_s"]) <= 5)
            ok += all(c == want for c in rcs) and fast and cont_ok
        surv = max(float(r["survivors_s"]) for r in trials)
        codes = sorted({c for r in trials for c in r["survivors_rc"].split()})
        cont = [r for r in trials if r["continued_s"] != "-"]
        cont_s = f'{",".join(sorted({r["stopped_rc"] for r in cont}))}, {max(float(r["continued_s"]) for r in cont):.1f}' if cont else "-"
        line = trials[0]["line"][:150]
        print(f"| {kind} | {w} | {who} | {ok}/{len(trials)} | {','.join(codes)} | {surv:.1f} | {cont_s} | {line} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
