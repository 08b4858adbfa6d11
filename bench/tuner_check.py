#!/usr/bin/env python3
"""Did NCCL run what a tuner CSV asks for? Checks NCCL's TUNING log against
the rules.

usage: tuner_check.py RULES.csv LOG NRANKS
  RULES.csv: NCCL's example tuner format, collective_type,min_bytes,
             max_bytes,algorithm,protocol,channels,nNodes,nRanks[,...]
             ('#' starts a comment; -1 is "any").
  LOG:       NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING output (rank 0), lines
             `NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}`.

NRANKS: ranks of the communicator. NCCL's TUNING line gives AllGather's
and ReduceScatter's bytes per rank, but the tuner is asked with the whole
buffer (nRanks times that, nccl-tests' `size` column): a ReduceScatter
rule up to 4 MiB did not apply to the line `ReduceScatter: 4194304 Bytes`
of an 8 MiB reduce_scatter on 2 ranks. Rules are matched on the tuner's
bytes.

Every TUNING line whose operation and byte count a rule covers (the first
rule in file order, as the plugin takes them; nNodes/nRanks are not in the
log and are taken as matching) must show the rule's algorithm and protocol,
and its channel count (Hi - Lo + 1) when the rule names one. Prints each
disagreement and the share of covered lines that agree; exits 0 at 100%,
1 below, 2 when no line is covered.

collbench's exported plugin also logs each rule it applies (`collbench
tuner: reducescatter 4096 bytes -> rule 5 (ring/ll, channels 2)`). A line
that disagrees only by running fewer channels than its rule asks, where
the plugin logged that rule for that call, is counted apart: the plugin
answered as the rule says, and NCCL spread a small message over fewer
channels (seen once: a 4 KiB reduce_scatter on 2 ranks, 1 channel of 2).
It still counts as a disagreement in the exit code.
"""
import re
import sys

TUNING = re.compile(
    r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)


PLUGIN = re.compile(
    r"collbench tuner: (\w+) (\d+) bytes -> rule (\d+) \((\w+)/(\w+), channels (-?\d+)\)"
)


# Operations whose TUNING line counts bytes per rank.
PER_RANK = ("allgather", "reducescatter")


def rules(path):
    out = []
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        f = [x.strip() for x in line.split(",")]
        out.append({
            "line": n, "coll": f[0].lower(), "lo": int(f[1]), "hi": int(f[2]),
            "algo": f[3].upper(), "proto": f[4].upper(), "channels": int(f[5]),
        })
    return out


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rs = rules(argv[1])
    nranks = int(argv[3])
    covered = agree = capped = 0
    seen = set()
    log = open(argv[2], errors="replace").read().splitlines()
    # (collective, tuner bytes) the plugin logged a rule for.
    answered = {(p.group(1), int(p.group(2))) for p in map(PLUGIN.search, log) if p}
    for line in log:
        m = TUNING.search(line)
        if not m:
            continue
        func, nbytes = m.group(1).lower(), int(m.group(2))
        if func in PER_RANK:
            nbytes *= nranks
        algo, proto = m.group(3).upper(), m.group(4).upper()
        channels = int(m.group(6)) - int(m.group(5)) + 1
        rule = next((r for r in rs if r["coll"] == func and r["lo"] <= nbytes <= r["hi"]), None)
        if rule is None:
            continue
        covered += 1
        problems = []
        if algo != rule["algo"] or proto != rule["proto"]:
            problems.append(f"{algo}/{proto} where rule {rule['line']} asks {rule['algo']}/{rule['proto']}")
        fewer = rule["channels"] > 0 and channels < rule["channels"]
        if rule["channels"] > 0 and channels != rule["channels"]:
            problems.append(f"{channels} channels where rule {rule['line']} asks {rule['channels']}")
        if problems and len(problems) == 1 and fewer and (func, nbytes) in answered:
            capped += 1
            problems[0] += " (the plugin logged the rule for this call)"
        if problems:
            key = (func, nbytes, tuple(problems))
            if key not in seen:
                seen.add(key)
                print(f"DIFFER  {m.group(1)} {nbytes} B: " + "; ".join(problems))
        else:
            agree += 1
    if covered == 0:
        print("no TUNING line is covered by a rule")
        return 2
    print(f"{agree}/{covered} covered TUNING lines as the rules ask ({100.0 * agree / covered:.1f}%)")
    if answered:
        print(f"plugin's log: {len(answered)} calls answered by a rule; "
              f"{capped} covered lines ran fewer channels than their rule asked")
    return 0 if agree == covered else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
