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
"""
import re
import sys

TUNING = re.compile(
    r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
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
    covered = agree = 0
    seen = set()
    for line in open(argv[2], errors="replace"):
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
        if rule["channels"] > 0 and channels != rule["channels"]:
            problems.append(f"{channels} channels where rule {rule['line']} asks {rule['channels']}")
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
    return 0 if agree == covered else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
