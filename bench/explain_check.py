#!/usr/bin/env python3
"""Does `collbench run --explain` say what NCCL's own TUNING log says?

usage: explain_check.py RUN LOG
  RUN: collbench's JSON record (--format json / -o run.json) or its
       --explain text output.
  LOG: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING output of the same run
       (stdout+stderr), with lines such as
       `NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}`.

NCCL logs one TUNING line per collective task on rank 0, keyed by its
operation and count x type size. For every row of RUN whose explanation
names a collective kernel, the (algorithm, protocol) pairs collbench
reports (over both placements) must equal the pairs the log has for that
operation and byte count. Rows that ran only send/recv kernels have no
TUNING line and are listed as not comparable. Rows of 0 elements, where
collbench says NCCL launched nothing, agree when the log has no line for 0
bytes of that operation. Rows that could not be
explained count as disagreeing. Prints the agreement percentage; exits 0
at 100%, 1 below, 2 on unusable input.
"""
import json
import re
import sys
from collections import defaultdict

TUNING = re.compile(
    r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)

# A row whose every placement moved no data: NCCL launched nothing.
NOTHING = "nothing launched"

DTYPE_BYTES = {
    "int8": 1, "uint8": 1, "f8e4m3": 1, "f8e5m2": 1,
    "half": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float": 4,
    "int64": 8, "uint64": 8, "double": 8,
}

# Collectives NCCL logs under their own names (text input has no kernel
# names, only the op).
OP_FUNC = {
    "all_reduce": "AllReduce",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
}


def read_log(path):
    """(func, bytes) -> {(algo, proto)} from the TUNING lines."""
    seen = defaultdict(set)
    with open(path, errors="replace") as f:
        for line in f:
            m = TUNING.search(line)
            if m:
                seen[(m.group(1), int(m.group(2)))].add((m.group(3).upper(), m.group(4).upper()))
    return seen


def rows_from_json(doc):
    """One entry per row: (label, {(func, bytes): {(algo, proto)}} or None when unexplained)."""
    out = []
    for r in doc.get("results", []):
        elt = DTYPE_BYTES.get(r.get("dtype", ""), 0)
        nbytes = r.get("count", 0) * elt
        label = f'{r.get("op")} {r.get("size_bytes")} B {r.get("dtype")}'
        pairs = defaultdict(set)
        explained = False
        places = [(r.get(p) or {}).get("explain") or {} for p in ("out_of_place", "in_place")]
        if all(ex.get("nothing_launched") for ex in places):
            out.append((label, NOTHING))
            continue
        for ex in places:
            if not ex.get("kernels"):
                continue
            explained = True
            for k in ex["kernels"]:
                if k.get("algo"):
                    pairs[(k["func"], nbytes)].add((k["algo"].upper(), k.get("proto", "").upper()))
        out.append((label, dict(pairs) if explained else None))
    return out


def rows_from_text(lines):
    """The same from --explain text: the last six fields of a row are
    algo, proto, nch for out-of-place and in-place."""
    out = []
    op = None
    for line in lines:
        m = re.match(r"# Collective test starting: (\w+)_perf", line)
        if m:
            op = m.group(1)
            continue
        f = line.split()
        if line.startswith("#") or len(f) < 19 or not f[0].isdigit():
            continue
        size, count, dtype = int(f[0]), int(f[1]), f[2]
        label = f"{op} {size} B {dtype}"
        cells = f[-6:]
        algos = set()
        protos = set()
        explained = False
        if cells[0] == "none" and cells[3] == "none":
            out.append((label, NOTHING))
            continue
        for algo, proto in ((cells[0], cells[1]), (cells[3], cells[4])):
            if algo in ("n/a", "N/A"):
                continue
            explained = True
            algos.update(a.rstrip("*").upper() for a in algo.split("+"))
            protos.update(p.upper() for p in proto.split("+") if p != "-")
        func = OP_FUNC.get(op)
        if not explained:
            out.append((label, None))
        elif func is None or not protos:
            out.append((label, {}))
        else:
            nbytes = count * DTYPE_BYTES.get(dtype, 0)
            out.append((label, {(func, nbytes): {(a, p) for a in algos for p in protos}}))
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run_path, log_path = argv[1], argv[2]
    text = open(run_path, errors="replace").read()
    try:
        rows = rows_from_json(json.loads(text))
    except json.JSONDecodeError:
        rows = rows_from_text(text.splitlines())
    log = read_log(log_path)
    if not rows:
        print(f"{run_path}: no result rows", file=sys.stderr)
        return 2
    if not log:
        print(f"{log_path}: no TUNING lines (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)", file=sys.stderr)
        return 2
    agree = compared = 0
    not_comparable = []
    for label, pairs in rows:
        if pairs is NOTHING:
            # 0 elements: collbench says NCCL launched nothing; NCCL logs
            # no TUNING line for 0 bytes of that operation.
            compared += 1
            op, size = label.split()[0], label.split()[1]
            func = OP_FUNC.get(op)
            if func and any(k[0] == func and k[1] == 0 for k in log):
                print(f"DIFFER  {label}: collbench says nothing ran, NCCL logged {func} 0 Bytes")
            else:
                agree += 1
            continue
        if pairs is None:
            compared += 1
            print(f"DIFFER  {label}: collbench could not explain this row")
            continue
        if not pairs:
            not_comparable.append(label)
            continue
        compared += 1
        problems = []
        for key, ours in sorted(pairs.items()):
            theirs = log.get(key)
            fmt = lambda s: ", ".join(f"{a}/{p}" for a, p in sorted(s))
            if theirs is None:
                problems.append(f"no TUNING line for {key[0]} {key[1]} Bytes (collbench: {fmt(ours)})")
            elif theirs != ours:
                problems.append(f"{key[0]} {key[1]} Bytes: collbench {fmt(ours)}, NCCL log {fmt(theirs)}")
        if problems:
            print(f"DIFFER  {label}: " + "; ".join(problems))
        else:
            agree += 1
    if not_comparable:
        print(f"# {len(not_comparable)} rows ran only send/recv kernels (no TUNING line): "
              + ", ".join(not_comparable[:5]) + (" ..." if len(not_comparable) > 5 else ""))
    if compared == 0:
        print("no comparable rows", file=sys.stderr)
        return 2
    pct = 100.0 * agree / compared
    print(f"agreement: {agree}/{compared} rows ({pct:.1f}%)")
    return 0 if agree == compared else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
