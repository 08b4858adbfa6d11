#!/usr/bin/env python3
"""Loopback TCP throughput by stream count (issue #40's socket ceiling):
N sender/receiver pairs start together (a barrier) and the aggregate rate
is all bytes over the wall time from the barrier to the last byte, so
streams that do not overlap cannot add up to more than the link moved.
Prints `streams GB/s` for each count, best of 3."""
import socket, sys, threading, time

def pair(nbytes, barrier, out, i):
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    port = srv.getsockname()[1]
    def send():
        c = socket.create_connection(("127.0.0.1", port)); chunk = b"\7" * (1 << 20)
        barrier.wait(); left = nbytes
        while left > 0:
            n = min(left, len(chunk)); c.sendall(chunk[:n]); left -= n
        c.close()
    t = threading.Thread(target=send); t.start()
    conn, _ = srv.accept(); got = 0
    while True:
        b = conn.recv(1 << 20)
        if not b: break
        got += len(b)
    out[i] = time.perf_counter(); t.join()

def aggregate(streams, nbytes):
    barrier = threading.Barrier(streams + 1); out = [0.0] * streams
    ths = [threading.Thread(target=pair, args=(nbytes, barrier, out, i)) for i in range(streams)]
    for t in ths: t.start()
    barrier.wait(); t0 = time.perf_counter()
    for t in ths: t.join()
    return streams * nbytes / (max(out) - t0) / 1e9

per = int(sys.argv[1]) if len(sys.argv) > 1 else 256 << 20
for s in (1, 2, 4, 8, 16):
    print(s, round(max(aggregate(s, per) for _ in range(3)), 2), flush=True)
