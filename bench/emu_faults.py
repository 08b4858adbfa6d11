#!/usr/bin/env python3
"""The faults stage's trials (bench/emu.sh), judged against issue 26's bar.

usage: emu_faults.py TRIALS.tsv T

One row per trial: name, processes, who was stopped (a rank, or k9: rank 1
killed with SIGKILL), the survivors' exit codes, seconds from the signal to
the first survivor's line on stderr (line_s, polled every 0.1 s) and to the
last survivor's exit, the stopped process's exit code and seconds from its
SIGCONT to its exit, and the first "collbench: " line on any stderr.
A SIGSTOP trial passes when the line came within T + 5 s, every survivor
exits 5, and the continued process ends within 5 s; a SIGKILL trial, and a
SIGSTOP during NCCL's setup (trials named setup*), when the line came within
T + 5 s and every survivor exits 3 (and a stopped one ends within 5 s). Older files
without line_s are judged on the exit time. Prints one table row per
(command, processes, stopped).
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
            kind = "check" if r["trial"].startswith("check") else "setup" if r["trial"].startswith("setup") else "run"
            groups[(kind, r["processes"], r["stopped"])].append(r)
    print("| command | processes | stopped | trials passed | line after, s (max) | survivors' exit | exited after, s (max) | continued: exit, s (max) | line (first trial) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (kind, w, who), trials in sorted(groups.items()):
        # A rank lost (killed, or stopped before any case, while NCCL sets
        # up: the setup guard) ends the job with exit 3; a rank stuck in a
        # collective with exit 5.
        want = "3" if who == "k9" or kind == "setup" else "5"
        ok = 0
        for r in trials:
            rcs = r["survivors_rc"].split()
            said = r.get("line_s") or r["survivors_s"]
            fast = said != "-" and float(said) <= t + 5
            cont_ok = who == "k9" or (r["continued_s"] != "-" and float(r["continued_s"]) <= 5)
            ok += all(c == want for c in rcs) and fast and cont_ok
        surv = max(float(r["survivors_s"]) for r in trials)
        lines = [float(r["line_s"]) for r in trials if r.get("line_s") not in (None, "-")]
        line_s = f"{max(lines):.1f}" if lines else "-"
        codes = sorted({c for r in trials for c in r["survivors_rc"].split()})
        cont = [r for r in trials if r["continued_s"] != "-"]
        cont_s = f'{",".join(sorted({r["stopped_rc"] for r in cont}))}, {max(float(r["continued_s"]) for r in cont):.1f}' if cont else "-"
        line = trials[0]["line"][:150]
        print(f"| {kind} | {w} | {who} | {ok}/{len(trials)} | {line_s} | {','.join(codes)} | {surv:.1f} | {cont_s} | {line} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
