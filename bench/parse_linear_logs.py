#!/usr/bin/env python3
"""Writes the logs of bench/parse-linear.sh (issue #49): nccl-tests text as
`collbench report` reads it, large enough to show whether reading is linear.

  rows65k.txt   one all_reduce table of 65,536 rows (the largest sweep
                `collbench run` allows: -b 8 -e 524288 -i 8), ~9 MB
  big60m.txt    ~60 MB: runs of 65,536 rows one after another, every
                200th row cut in two by NCCL INFO lines of other processes
                (NCCL_DEBUG=INFO on a multi-rank job), INFO lines between
                and after
  plain60m.txt  the same without the cut rows (the reader before issue #49
                refused big60m.txt at its first cut row)

Usage: parse_linear_logs.py OUT_DIR
"""
import os
import sys

HEAD = """# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 8 maxBytes 524288 step: 8(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1378 on      node1 device  0 [0000:00:06] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
ROWS = 65536
INFO = "node2:4242:4300 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read\n"


def halves(i):
    size = 8 * (i + 1)
    t = 10.0 + i * 0.001
    algbw = size / t / 1e3
    oop = f"{size:12d}  {size // 4:12d}     float     sum      -1  {t:7.2f}  {algbw:6.2f}  {algbw * 1.75:6.2f}       0"
    ip = f"  {t:7.2f}  {algbw:6.2f}  {algbw * 1.75:6.2f}       0\n"
    return oop, ip


def table(out, cut_every=0):
    out.write(HEAD)
    for i in range(ROWS):
        oop, ip = halves(i)
        if cut_every and i % cut_every == cut_every - 1:
            out.write(oop + INFO + INFO + ip)
        else:
            out.write(oop + ip)
    out.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.3456 \n#\n")


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "rows65k.txt"), "w") as f:
        table(f)
    for name, cut_every in (("big60m.txt", 200), ("plain60m.txt", 0)):
        with open(os.path.join(out_dir, name), "w") as f:
            while f.tell() < 60_000_000 - 10_000_000:
                f.write(INFO * 2000)
                table(f, cut_every=cut_every)
            # INFO lines of the job's teardown up to 60 MB.
            while f.tell() < 60_000_000:
                f.write(INFO)
    print(out_dir)


if __name__ == "__main__":
    main()
