#!/usr/bin/env python3
"""Issue 23's bars from the emulated-hosts tune stages (bench/emu.sh).

usage:
  emu_tune.py gains TUNE.json [SIZE...]
      per band: op, band, outcome, busbw gain [95% interval]; then, for
      each op and SIZE (default 128M 512M), the band holding SIZE and
      whether its gain is >= +50% with the interval above zero.
  emu_tune.py repro TUNE.json DIR [WINNER.sh]
      WINNER.sh: the `export` lines run (the --shell winner); its claim
      per band is its confirmed gain where it won, else its process-wide
      figure (fresh pairs), else its screening estimate there. DIR holds cbdef<r>.txt / cbenv<r>.txt (collbench run, defaults and
      the --shell environment) and ntdef<r>/, ntenv<r>/ (nccl-tests, one
      file per op), rounds r = 1, 2, ...: per (op, size) at >= 64 MiB the
      busbw ratio env/default for collbench and for nccl-tests, the
      claimed gain of the band holding the size, the share of it
      collbench reproduced (bar >= 90%), and nccl-tests' own noise
      (default round against default round).
  emu_tune.py nogain NAME=VALUE TUNE.json...
      per search, the candidate NAME=VALUE's status; "no gain" when it was
      measured (has an interval), did not win, and its interval does not
      lie wholly at or below 0.98; "NOT MEASURED" counts for nothing.
  emu_tune.py nauto DIR
      DIR holds auto<r>.txt and n20<r>.txt with wall<r>.txt ("auto S" and
      "n20 S" lines): the wall-time ratio auto/n20 (bar <= 0.6) and, per
      (op, size, placement) at >= 64 MiB, the spread of busbw over rounds
      (max/min - 1) for each; bar: auto's median spread <= n20's.
  emu_tune.py probe TUNE.json DIR
      DIR holds cb{def,ch8,reg}<r>.txt and nt{def,ch8,reg}<r>/ (stage
      commprobe): per op at 64 MiB, the time ratio setting/default of
      channels=8 and -R 1 set for the whole process, in collbench run and
      nccl-tests, beside tune's in-process screening ratio for the same
      setting in the band holding 64 MiB.
  emu_tune.py falls DIR
      DIR holds def*.json and env*.json (stage falls: one process each,
      every iteration's time): per process, the median iteration time,
      the share of iterations slower than 1.5x the fastest process's
      median, and how those slow iterations lie (runs of consecutive slow
      iterations): a fall that belongs to a process shows as a process
      all slow; one that belongs to time, as runs inside processes.
  emu_tune.py cpuvar DIR
      DIR holds nt{def,env}<placement><r>/ and cbdef<placement><r>.txt
      (stage cpuvar; placement shared or own): per placement, tool and
      (op, size) at >= 64 MiB, each round's out-of-place busbw, their
      spread (max/min - 1) and the standard deviation of their logs; then
      nccl-tests' gain of 4 sockets per thread over the defaults.
Exit 0 always: the numbers are the result.
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_text import merged  # noqa: E402

MIB = 1 << 20


def size_arg(s):
    units = {"K": 1 << 10, "M": MIB, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def gain_pct(ratio):
    """busbw gain % (estimate, low, high) from a time-ratio interval."""
    return tuple((1 / ratio[k] - 1) * 100 for k in ("estimate", "hi", "lo"))


def env_text(setting):
    vars_ = setting.get("env") or []
    rest = {k: v for k, v in setting.items() if k != "env" and v not in (None, "none", "default", [])}
    parts = [f"{k}={v}" for k, v in vars_] + [f"{k}={v}" for k, v in rest.items()]
    return " ".join(parts) or "default"


def bands(path):
    return __import__("json").load(open(path))["bands"]


def holding(report_bands, op, size):
    for b in report_bands:
        band = b["band"]
        if band["op"] == op and band["min_bytes"] <= size <= band["max_bytes"]:
            return b
    return None


def claimed(b):
    o = b["outcome"] if b else {}
    return gain_pct(o["ratio"]) if o.get("kind") == "gain" else None


def gains(argv):
    bs = bands(argv[0])
    sizes = [size_arg(s) for s in argv[1:]] or [128 * MIB, 512 * MIB]
    print("| op | band | probe | outcome | setting | busbw gain [95%] |")
    print("| --- | --- | --- | --- | --- | --- |")
    for b in bs:
        band, o = b["band"], b["outcome"]
        g = claimed(b)
        gtxt = f"{g[0]:+.1f}% [{g[1]:+.1f}, {g[2]:+.1f}]" if g else "-"
        s = o.get("setting") or o.get("best") or {}
        print(f"| {band['op']} | {band['min_bytes']}-{band['max_bytes']} | {band['probe_bytes']} "
              f"| {o['kind']} | {env_text(s) if s else '-'} | {gtxt} |")
    ops = sorted({b["band"]["op"] for b in bs})
    met = 0
    for op in ops:
        for size in sizes:
            g = claimed(holding(bs, op, size))
            ok = bool(g) and g[0] >= 50 and g[1] > 0
            met += ok
            print(f"bar {op} {size}: {'met' if ok else 'NOT met'} ({'-' if not g else f'{g[0]:+.1f}%, low {g[1]:+.1f}%'})")
    print(f"gains: {met} of {len(ops) * len(sizes)} bars met")


def bw_by_key(files):
    """(op, size) -> mean out-of-place busbw over the files (rounds)."""
    out = {}
    for k, v in merged(files).items():
        if k[2] == "oop" and k[1] >= 64 * MIB:
            out[(k[0], k[1])] = statistics.mean(x[2] or x[1] for x in v)
    return out


def rounds(d, prefix):
    files = sorted(glob.glob(os.path.join(d, f"{prefix}[0-9]*.txt")))
    return [f for f in files if ".r" not in os.path.basename(f)]


def nt_rounds(d, prefix):
    return [glob.glob(os.path.join(r, "*.txt")) for r in sorted(glob.glob(os.path.join(d, f"{prefix}[0-9]*")))]


def winner_env(path):
    """The `export NAME=VALUE` lines of a --shell winner file, as env_text."""
    kv = [ln.split(None, 1)[1].strip() for ln in open(path) if ln.startswith("export ")]
    return " ".join(kv)


def claim_for(report, b, env):
    """The search's claim for setting `env` in band b, what --shell says:
    its confirmed gain where it won the band, else its process-wide
    figure (fresh pairs, the report's `process_wide`), else its screening
    estimate (fewer pairs); (gain %, kind) or None."""
    if not b:
        return None
    o = b["outcome"]
    if o.get("kind") == "gain" and env_text(o["setting"]) == env:
        return gain_pct(o["ratio"])[0], "confirmed"
    pw = report.get("process_wide")
    if pw and env_text(pw["setting"]) == env:
        for x in pw["bands"]:
            if x["band"] == b["band"] and x["figure"]["kind"] == "confirmed":
                return gain_pct(x["figure"]["ratio"])[0], "process-wide"
    for c in b["candidates"]:
        if env_text(c["setting"]) == env and "ratio" in c["status"]:
            return gain_pct(c["status"]["ratio"])[0], "screened"
    return None


def repro(argv):
    report = __import__("json").load(open(argv[0]))
    bs, d = report["bands"], argv[1]
    env = winner_env(argv[2]) if len(argv) > 2 else None
    cb_def, cb_env = bw_by_key(rounds(d, "cbdef")), bw_by_key(rounds(d, "cbenv"))
    ntd = nt_rounds(d, "ntdef")
    nt_def = bw_by_key([f for r in ntd for f in r])
    nt_env = bw_by_key([f for r in nt_rounds(d, "ntenv") for f in r])
    per_round = [bw_by_key(r) for r in ntd]
    print(f"setting run: {env or '(not given: each band winner claim)'}")
    print("| op | size | band winner's claim | claim for this setting | cb env/def | reproduced "
          "| nt env/def | cb/nt gain | nt def/def range |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in sorted(cb_def.keys() & cb_env.keys()):
        b = holding(bs, k[0], k[1])
        c = claimed(b)
        mine = claim_for(report, b, env) if env else ((c[0], "band winner") if c else None)
        cb = cb_env[k] / cb_def[k]
        # The share of the claimed busbw gain this run's gain is (percent).
        share = (cb - 1) * 100 / mine[0] * 100 if mine and mine[0] > 0 else None
        nt = nt_env[k] / nt_def[k] if k in nt_env and k in nt_def else None
        noise = [a[k] / b_[k] for a in per_round for b_ in per_round if a is not b_ and k in a and k in b_]
        winner = f"{c[0]:+.1f}% ({env_text(b['outcome']['setting'])})" if c else "-"
        print(f"| {k[0]} | {k[1]} | {winner} | {f'{mine[0]:+.1f}% {mine[1]}' if mine else 'not measured'} "
              f"| {cb:.3f} | {f'{share:.0f}%' if share is not None else '-'} | {f'{nt:.3f}' if nt else '-'} "
              f"| {f'{cb / nt:.3f}' if nt else '-'} "
              f"| {f'{min(noise):.3f} - {max(noise):.3f}' if noise else '-'} |")


def probe(argv):
    report = __import__("json").load(open(argv[0])) if os.path.exists(argv[0]) else {"bands": []}
    d = argv[1]
    tune_key = {"ch8": lambda st: st.get("channels") == 8 and not st.get("env"),
                "reg": lambda st: st.get("registration") == "local"}
    print("| op | size | setting | cb time ratio | nt time ratio | tune's in-process ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    cb_def = bw_by_key(rounds(d, "cbdef"))
    nt_def = bw_by_key([f for r in nt_rounds(d, "ntdef") for f in r])
    for name in ("ch8", "reg"):
        cb = bw_by_key(rounds(d, f"cb{name}"))
        nt = bw_by_key([f for r in nt_rounds(d, f"nt{name}") for f in r])
        for k in sorted(cb_def):
            b = holding(report["bands"], k[0], k[1])
            t = "-"
            for c in (b or {}).get("candidates", []):
                if tune_key[name](c["setting"]) and "ratio" in c["status"]:
                    t = f"{c['status']['ratio']['estimate']:.2f} ({c['status']['kind']})"
            # busbw ratio default/setting is the time ratio setting/default.
            cbr = f"{cb_def[k] / cb[k]:.2f}" if k in cb else "-"
            ntr = f"{nt_def[k] / nt[k]:.2f}" if k in nt and k in nt_def else "-"
            print(f"| {k[0]} | {k[1]} | {name} | {cbr} | {ntr} | {t} |")


def iter_times(path):
    """Every timed iteration's time (us) of the first placement that has them."""
    doc = __import__("json").load(open(path))
    for r in doc.get("results", [doc]) if isinstance(doc, dict) else doc:
        for v in (r.values() if isinstance(r, dict) else []):
            if isinstance(v, dict) and "times_us" in v:
                return v["times_us"]
    return []


def falls(argv):
    d = argv[0]
    files = sorted(glob.glob(os.path.join(d, "def*.json"))) + sorted(glob.glob(os.path.join(d, "env*.json")))
    series = {os.path.basename(f)[:-5]: iter_times(f) for f in files}
    env = {k: v for k, v in series.items() if k.startswith("env") and v}
    if not env:
        print("no per-iteration times found")
        return
    fast = min(statistics.median(v) for v in env.values())
    print(f"fastest env process median: {fast:.0f} us; slow = above {1.5 * fast:.0f} us")
    print("| process | iterations | median us | slow share | slow runs (longest) |")
    print("| --- | --- | --- | --- | --- |")
    for k, v in series.items():
        if not v:
            print(f"| {k} | 0 | - | - | - |")
            continue
        slow = [t > 1.5 * fast for t in v]
        runs, cur = [], 0
        for x in slow + [False]:
            if x:
                cur += 1
            elif cur:
                runs.append(cur)
                cur = 0
        print(f"| {k} | {len(v)} | {statistics.median(v):.0f} | {100.0 * sum(slow) / len(v):.0f}% "
              f"| {len(runs)} ({max(runs) if runs else 0}) |")


def nogain(argv):
    """Per search, what became of the candidate `want`. Two counts: the
    tool's claims (a band's outcome), and, stricter (the rule up to call
    17), also any screen whose interval lies wholly below 0.98. A screen
    of an environment candidate is one pair of child processes: its
    interval carries none of the spread between processes (docs/tune.md,
    section 6), so it is no verdict; the strict count is kept to show it."""
    want, files = argv[0], argv[1:]
    no = strict = 0
    for path in files:
        status = "absent"
        for b in bands(path):
            for c in b["candidates"]:
                if env_text(c["setting"]) == want.replace(",", " "):
                    st = c["status"]
                    won = claimed(b) and env_text(b["outcome"]["setting"]) == env_text(c["setting"])
                    wholly_below = "ratio" in st and st["ratio"]["hi"] <= 0.98
                    # Never measured is no verdict (call 12's 15 s searches
                    # measured nothing and were first counted as no gain).
                    if "ratio" not in st:
                        status = f"NOT MEASURED ({st['kind']})"
                    elif won:
                        status = "GAIN"
                    elif wholly_below:
                        r = st["ratio"]
                        status = (f"no gain ({st['kind']}; its screen's one-pair interval "
                                  f"{r['lo']:.3f}-{r['hi']:.3f} lies below 0.98)")
                    else:
                        status = f"no gain ({st['kind']})"
        no += status.startswith("no gain")
        strict += status.startswith("no gain") and "lies below" not in status
        print(f"{os.path.basename(path)}: {want}: {status}")
    print(f"nogain: {no} of {len(files)} searches (the tool's verdicts); "
          f"{strict} of {len(files)} counting a screen's interval as a verdict")


def nauto(argv):
    d = argv[0]
    walls = {"auto": [], "n20": []}
    for f in sorted(glob.glob(os.path.join(d, "wall[0-9]*.txt"))):
        for line in open(f):
            k, v = line.split()
            walls[k].append(float(v))
    spread = {}
    for mode in ("auto", "n20"):
        per = [bw_by_key([f]) for f in rounds(d, mode)]
        keys = set.intersection(*(set(p) for p in per)) if per else set()
        spread[mode] = [max(p[k] for p in per) / min(p[k] for p in per) - 1 for k in keys]
    if walls["auto"] and walls["n20"]:
        ratio = sum(walls["auto"]) / sum(walls["n20"])
        print(f"wall auto/n20: {ratio:.2f} over {len(walls['auto'])} rounds ({'met' if ratio <= 0.6 else 'NOT met'}: <= 0.6)")
    med = {m: statistics.median(v) if v else None for m, v in spread.items()}
    for m, v in med.items():
        print(f"busbw spread >= 64 MiB, {m}: median {'-' if v is None else f'{v * 100:.1f}%'} over {len(spread[m])} rows")
    if None not in med.values():
        print(f"spread: {'met' if med['auto'] <= med['n20'] else 'NOT met'} (auto no wider than n20)")


def cpuvar(argv):
    import math
    d = argv[0]
    print("| placement | tool | op | size | busbw per round, GB/s | spread | sd of log |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    means, sds = {}, {"shared": [], "own": []}
    for p in ("shared", "own"):
        per = {
            "nt def": [bw_by_key(r) for r in nt_rounds(d, f"ntdef{p}")],
            "nt env": [bw_by_key(r) for r in nt_rounds(d, f"ntenv{p}")],
            "cb def": [bw_by_key([f]) for f in rounds(d, f"cbdef{p}")],
        }
        for tool, rs in per.items():
            for k in sorted(set().union(*rs) if rs else []):
                v = [r[k] for r in rs if k in r]
                logs = [math.log(x) for x in v]
                sd = statistics.stdev(logs) if len(v) > 1 else float("nan")
                means[(p, tool, k)] = statistics.mean(v)
                if tool == "nt def" and len(v) > 1:
                    sds[p].append(sd)
                print(f"| {p} | {tool} | {k[0]} | {k[1] // MIB}M | {' '.join(f'{x:.2f}' for x in v)} "
                      f"| {max(v) / min(v) - 1:.1%} | {sd:.3f} |")
    for p in ("shared", "own"):
        for k in sorted(k for (q, t, k) in means if q == p and t == "nt env"):
            if (p, "nt def", k) in means:
                print(f"nt gain, {p}, {k[0]} {k[1] // MIB}M: "
                      f"{means[(p, 'nt env', k)] / means[(p, 'nt def', k)]:.3f}x")
    if sds["shared"] and sds["own"]:
        med = {p: statistics.median(v) for p, v in sds.items()}
        quieter = "own" if med["own"] < 0.7 * med["shared"] else "shared"
        print(f"cpuvar: quieter placement: {quieter} (nccl-tests' defaults, median sd of log busbw "
              f"between processes: shared {med['shared']:.3f}, own {med['own']:.3f}; own must be < 0.7x)")


def main(argv):
    cmds = {"gains": gains, "repro": repro, "nogain": nogain, "nauto": nauto, "probe": probe,
            "falls": falls, "cpuvar": cpuvar}
    if len(argv) < 3 or argv[1] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 0
    cmds[argv[1]](argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
