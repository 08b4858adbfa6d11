#!/usr/bin/env python3
"""Score `collbench report` on the held-out corpus (issue #49).

Usage: heldout_score.py COLLBENCH_BINARY DIR

For every log in DIR with a `.expect.toml` beside it, runs
`COLLBENCH report LOG`, reads the Markdown it writes (sections
`## <run> — <op>`, the Environment table's avg busbw) and compares every
value the expectation names, the way `tests/corpus.rs` does: the tables in
order, the figure of the largest size, `wrong` summed over all rows and
placements where the report prints a count. The report rounds figures to
two decimals, so a figure is right when it is within half a unit of the
last printed digit (or 0.05 %). A log expected to be refused counts one
value (refused or not). Prints one line per log and the totals.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size_bytes(cell):
    m = re.match(r"^([\d.]+) (B|KiB|MiB|GiB|TiB)$", cell.strip())
    return round(float(m.group(1)) * UNITS[m.group(2)]) if m else None


def number(cell):
    try:
        return float(cell.strip())
    except ValueError:
        return None


def sections(md):
    """[(run, op, [row dict])] in the order the report prints them."""
    out, cur, cols = [], None, None
    for line in md.splitlines():
        m = re.match(r"^## (.+) — (\S+)$", line)
        if m:
            cur = (m.group(1), m.group(2), [])
            out.append(cur)
            cols = None
            continue
        if line.startswith("## "):
            cur = None
            continue
        if cur is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols is None:
            cols = cells
        elif not set(line) <= set("|-: "):
            cur[2].append(dict(zip(cols, cells)))
    return out


def env_avg(md):
    avg = {}
    head = None
    in_env = False
    for line in md.splitlines():
        if line.startswith("## "):
            in_env = line.strip() == "## Environment"
            head = None
            continue
        if not in_env or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = cells
        elif not set(line) <= set("|-: "):
            row = dict(zip(head, cells))
            avg[row.get("run")] = number(row.get("avg busbw (GB/s)", ""))
    return avg


def figure(run, rows, key, avg):
    sizes = [size_bytes(r["size"]) for r in rows]
    if key == "rows":
        return len(rows)
    if key == "min_bytes":
        return min(sizes)
    if key == "max_bytes":
        return max(sizes)
    largest = rows[max(i for i, s in enumerate(sizes) if s == max(sizes))]
    if key == "time_us":
        t = number(largest.get("time (µs)", "-"))
        return t if t is not None else number(largest.get("in-place time (µs)", "-"))
    if key == "busbw":
        b = number(largest.get("busbw (GB/s)", "-"))
        return b if b is not None else number(largest.get("in-place busbw (GB/s)", "-"))
    if key == "in_place_busbw":
        return number(largest.get("in-place busbw (GB/s)", "-"))
    if key == "bw_mbps":
        b = number(largest.get("bandwidth (MB/s)", "-"))
        if b is None:
            a = number(largest.get("algbw (GB/s)", "-"))
            b = a * 1000 if a is not None else None
        return b
    if key == "wrong":
        counts = [
            number(r.get(c, "N/A"))
            for r in rows
            for c in ("#wrong", "in-place #wrong")
        ]
        counts = [c for c in counts if c is not None]
        return sum(counts) if counts else None
    if key == "avg_busbw":
        return avg.get(run)
    return None


def close(got, want):
    return got is not None and abs(got - want) <= max(0.0051, 5e-4 * abs(want))


def align(want, got):
    """{expected index: read index} of a least-cost alignment (a gap or a
    renamed op costs 1, a matching op 0)."""
    n, m = len(want), len(got)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                cost[i][j] = i + j
            else:
                cost[i][j] = min(cost[i - 1][j] + 1, cost[i][j - 1] + 1,
                                 cost[i - 1][j - 1] + (want[i - 1] != got[j - 1]))
    pairs, i, j = {}, n, m
    while i > 0 and j > 0:
        if cost[i][j] == cost[i - 1][j - 1] + (want[i - 1] != got[j - 1]):
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif cost[i][j] == cost[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    return pairs


KEYS = ["op", "rows", "min_bytes", "max_bytes", "time_us", "busbw",
        "in_place_busbw", "bw_mbps", "wrong", "avg_busbw"]


def score(binary, log):
    expect = tomllib.loads(log.with_name(log.name.rsplit(".", 1)[0] + ".expect.toml").read_text())
    p = subprocess.run([binary, "report", str(log)], capture_output=True, text=True)
    refused = p.returncode != 0
    bad, total = [], 0
    if expect.get("refused"):
        total = 1
        if not refused:
            bad.append("read, expected a refusal")
        return total, bad, refused, p.stderr.strip().splitlines()
    want = expect.get("table", [])
    if refused:
        n = sum(len([k for k in KEYS if k in w]) for w in want)
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else str(p.returncode)
        return n, [f"refused ({n} values): {msg}"], refused, p.stderr.strip().splitlines()
    secs = sections(p.stdout)
    avg = env_avg(p.stdout)
    if len(secs) != len(want):
        bad.append(f"{len(secs)} table(s) read ({', '.join(s[1] for s in secs)}), {len(want)} expected")
    # One table the reader did not produce (or one too many) must not shift
    # every later pairing: expected and read tables are aligned by op with
    # the fewest gaps and renamings (an edit-distance alignment); an
    # expected table left without a partner counts all its values wrong.
    pairs = align([w.get("op") for w in want], [s[1].split("/")[0] for s in secs])
    for i, w in enumerate(want):
        keys = [k for k in KEYS if k in w]
        total += len(keys)
        sec = secs[pairs[i]] if pairs.get(i) is not None else None
        if sec is None:
            bad.extend(f"table {i+1} ({w.get('op')}): {k} missing" for k in keys)
            continue
        run, op, rows = sec
        for k in keys:
            if k == "op":
                if op.split("/")[0] != w["op"]:
                    bad.append(f"table {i+1}: op {op}, expected {w['op']}")
                continue
            g = figure(run, rows, k, avg) if rows else None
            if not close(g, float(w[k])):
                bad.append(f"table {i+1} ({op}): {k} {g}, expected {w[k]}")
    return total, bad, refused, p.stderr.strip().splitlines()


def main():
    binary, folder = sys.argv[1], Path(sys.argv[2])
    logs = sorted(p for p in folder.iterdir()
                  if p.suffix in (".txt", ".json", ".log") and
                  p.with_name(p.name.rsplit(".", 1)[0] + ".expect.toml").exists())
    all_values = all_bad = logs_right = 0
    for log in logs:
        total, bad, refused, err = score(binary, log)
        wrong = total if refused and bad else min(len([b for b in bad if "table(s) read" not in b]), total)
        right = total - wrong
        all_values += total
        all_bad += wrong
        state = "right" if not bad else ("REFUSED" if refused else "WRONG")
        logs_right += not bad
        print(f"{state:8} {right:3}/{total:<3} {log.name}")
        for b in bad:
            print(f"           - {b}")
    print(f"\nlogs read right: {logs_right} of {len(logs)}; "
          f"values right: {all_values - all_bad} of {all_values}")


if __name__ == "__main__":
    main()
