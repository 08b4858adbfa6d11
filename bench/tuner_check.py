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

A rule's channel count is the most NCCL may use: the tuner's nChannels
replaces NCCL's own count (enqueue.cc, v2.28.3-1 line 1956), then
scheduleCollTasksToPlan splits the work over channels in cells of at
least 16 KiB of traffic each (lines 512-618), so a small message runs on
fewer channels than the rule names (a 2048-byte-per-rank reduce_scatter on
2 ranks with LL is one cell: 1 channel of 2). `split_channels` is that
split; a line counts as the rule asks when its channel count is the split
of the rule's count. Lines the split made narrower are counted apart.

collbench's exported plugin also logs each rule it applies (`collbench
tuner: reducescatter 4096 bytes -> rule 5 (ring/ll, channels 2)`); the
count of calls it answered is printed.
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


# NCCL 2.28's scheduler (src/enqueue.cc, v2.28.3-1): a channel carries at
# least this much traffic.
MIN_TRAFFIC_PER_CHANNEL = 16 << 10


def ceil_div(a, b):
    return -(-a // b)


def split_channels(func, nbytes, nranks, proto, channels, comm_channels):
    """Channels NCCL 2.28 runs one collective on when a tuner allows
    `channels`: `nbytes` is the TUNING line's count (bytes per rank for
    AllGather and ReduceScatter), `comm_channels` the communicator's
    (None when the log does not say: taken as at least `channels`)."""
    traffic = {"allreduce": 2, "allgather": nranks, "reducescatter": nranks}.get(func, 1)
    k = traffic * (4 if proto == "LL" else 1)
    c = min(channels, comm_channels) if comm_channels else channels
    if comm_channels == 1 or c <= 1:
        return 1
    cell = 16 * ceil_div(ceil_div(MIN_TRAFFIC_PER_CHANNEL, k), 16)
    cells = ceil_div(nbytes, cell)
    per_channel = max(MIN_TRAFFIC_PER_CHANNEL, max(MIN_TRAFFIC_PER_CHANNEL, nbytes * k) // c)
    cells_per_channel = min(cells, ceil_div(per_channel, cell * k))
    return min(c, ceil_div(cells, cells_per_channel))


# `Channel 00/02 :` lines (NCCL_DEBUG_SUBSYS=INIT) give the communicator's
# channel count.
COMM_CHANNELS = re.compile(r"NCCL INFO Channel \d+/(\d+) :")


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
    covered = agree = split = 0
    seen = set()
    log = open(argv[2], errors="replace").read().splitlines()
    comm = next((int(c.group(1)) for c in map(COMM_CHANNELS.search, log) if c), None)
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
        if rule["channels"] > 0:
            want = split_channels(func, int(m.group(2)), nranks, proto, rule["channels"], comm)
            if channels != want:
                problems.append(
                    f"{channels} channels where rule {rule['line']} asks {rule['channels']}"
                    f" (NCCL's split of it: {want})"
                    + (" (the plugin logged the rule for this call)" if (func, nbytes) in answered else ""))
            elif want < rule["channels"]:
                split += 1
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
    if split:
        print(f"{split} of them ran on fewer channels than their rule names, as NCCL's "
              f"16 KiB-per-channel split of a small message predicts")
    if answered:
        print(f"plugin's log: {len(answered)} calls answered by a rule")
    return 0 if agree == covered else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
