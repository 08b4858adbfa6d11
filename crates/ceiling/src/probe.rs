//! Short probes of the local machine, for the parts no file or driver
//! states: host memory copy bandwidth (the CPU backend's ceiling) and
//! loopback TCP (the network of hosts emulated on one machine, where
//! NCCL's socket transport runs over `lo`). Each takes milliseconds; the
//! best of a few repeats is kept, since a busy machine only slows a probe
//! and a ceiling must not sit below what a run reached.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// Bytes each probe thread copies per repeat: 16 MiB source and 16 MiB
/// destination, past the per-core L2 as a 16-64 MiB collective's buffers
/// are, so the probe streams from the same level of the memory system.
const COPY_BYTES_PER_THREAD: usize = 16 << 20;
const COPY_REPEATS: usize = 5;

/// Host memory copy bandwidth, GB/s of bytes copied, with one thread per
/// core copying its own buffers at once (the best of a few repeats).
pub fn mem_copy_gbps() -> f64 {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    mem_copy_gbps_with(threads, COPY_BYTES_PER_THREAD, COPY_REPEATS)
}

/// [`mem_copy_gbps`] with its knobs, for tests.
pub fn mem_copy_gbps_with(threads: usize, bytes_per_thread: usize, repeats: usize) -> f64 {
    let threads = threads.max(1);
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || copy_times(&start, bytes_per_thread, repeats))
        })
        .collect();
    let per_thread: Vec<Vec<f64>> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    // Repeat k of every thread ran together: its rate is all bytes over
    // the slowest thread's time.
    (0..repeats)
        .filter_map(|k| {
            let slowest = per_thread
                .iter()
                .map(|t| t.get(k).copied().unwrap_or(f64::INFINITY))
                .fold(0.0, f64::max);
            (slowest > 0.0 && slowest.is_finite())
                .then(|| (threads * bytes_per_thread) as f64 / slowest / 1e9)
        })
        .fold(0.0, f64::max)
}

/// One thread's copy times in seconds, each repeat started together with
/// the other threads.
fn copy_times(start: &Barrier, bytes: usize, repeats: usize) -> Vec<f64> {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    // Touch the destination first: page faults are not memory bandwidth.
    dst.copy_from_slice(&src);
    (0..repeats)
        .map(|_| {
            start.wait();
            let t = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// Bytes sent through loopback per repeat.
const TCP_BYTES: usize = 64 << 20;

/// Loopback TCP throughput, GB/s in one direction (the best of a few
/// single-stream transfers); `None` where loopback cannot be opened.
pub fn loopback_tcp_gbps() -> Option<f64> {
    (0..3).filter_map(|_| tcp_once(TCP_BYTES)).reduce(f64::max)
}

fn tcp_once(bytes: usize) -> Option<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").ok()?;
    let addr = listener.local_addr().ok()?;
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut s = TcpStream::connect(addr)?;
        let chunk = vec![7u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            s.write_all(&chunk[..n])?;
            left -= n;
        }
        Ok(())
    });
    let (mut conn, _) = listener.accept().ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut got = 0;
    while got < bytes {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let secs = t.elapsed().as_secs_f64();
    sender.join().ok()?.ok()?;
    (got == bytes && secs > 0.0).then(|| bytes as f64 / secs / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_probe_reports_a_plausible_rate() {
        let gbps = mem_copy_gbps_with(1, 1 << 20, 3);
        assert!(gbps > 0.1 && gbps < 10_000.0, "{gbps}");
    }

    #[test]
    fn loopback_probe_moves_every_byte() {
        let gbps = tcp_once(1 << 20).expect("loopback");
        assert!(gbps > 0.0, "{gbps}");
    }
}
