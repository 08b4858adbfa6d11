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

/// Each probe thread copies chunks of 4 MiB out of a region of up to
/// 16 MiB into another, moving on chunk by chunk as a benchmark's rotating
/// buffers move through their allocation. 16 MiB, not more: on a machine
/// with a large last-level cache (260 MiB here) a run's 64 MiB buffers are
/// partly cached, and a probe that streamed from main memory only was
/// beaten by a run (4.07 GB/s against a 3.82 ceiling).
const CHUNK_BYTES: usize = 4 << 20;
const REGION_BYTES: usize = 16 << 20;

/// Host memory copy bandwidth, GB/s of bytes copied, with one thread per
/// core, each copying through a region of `region_bytes` (a run's largest
/// size, at most 16 MiB, at least one chunk): the level of the memory
/// system the run's rotating buffers stream from. Each thread times every
/// chunk on its own and keeps its fastest: on a shared machine a thread is
/// descheduled now and then, and a chunk it copied without a break is the
/// rate its core and memory allow, so the ceiling never sits under what a
/// quieter moment lets a run reach. `None` when the buffers cannot be
/// allocated (a memory limit): the ceiling is then unknown.
pub fn mem_copy_gbps(region_bytes: u64) -> Option<f64> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let region = usize::try_from(region_bytes)
        .unwrap_or(REGION_BYTES)
        .clamp(CHUNK_BYTES, REGION_BYTES);
    let gbps = mem_copy_gbps_with(threads, region, CHUNK_BYTES, 2 * region / CHUNK_BYTES);
    (gbps > 0.0).then_some(gbps)
}

/// The largest region [`mem_copy_gbps`] uses.
pub const MAX_REGION_BYTES: u64 = REGION_BYTES as u64;

/// [`mem_copy_gbps`] with its knobs, for tests: the sum over `threads` of
/// each one's fastest `chunk`-byte copy out of its `region` (0 where a
/// thread could not allocate its buffers).
pub fn mem_copy_gbps_with(threads: usize, region: usize, chunk: usize, chunks: usize) -> f64 {
    let threads = threads.max(1);
    let chunk = chunk.clamp(1, region.max(1));
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || fastest_chunk_gbps(&start, region.max(chunk), chunk, chunks))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
}

/// A zeroed buffer of `len` bytes, or `None` where memory is refused
/// (an allocation failure must not abort the run being annotated).
fn buffer(len: usize) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, 0);
    Some(v)
}

/// One thread's fastest chunk copy, GB/s (0 without memory for it).
fn fastest_chunk_gbps(start: &Barrier, region: usize, chunk: usize, chunks: usize) -> f64 {
    let buffers = buffer(region).zip(buffer(region));
    // Every thread reaches the barrier, with or without its buffers.
    start.wait();
    let Some((mut src, mut dst)) = buffers else {
        return 0.0;
    };
    src.fill(1);
    // Touch the destination first: page faults are not memory bandwidth.
    dst.copy_from_slice(&src);
    let slots = region / chunk;
    (0..chunks)
        .map(|i| {
            let at = (i % slots) * chunk;
            let t = Instant::now();
            dst[at..at + chunk].copy_from_slice(std::hint::black_box(&src[at..at + chunk]));
            std::hint::black_box(&dst);
            t.elapsed().as_secs_f64()
        })
        .filter(|&s| s > 0.0)
        .map(|s| chunk as f64 / s / 1e9)
        .fold(0.0, f64::max)
}

/// Bytes sent through loopback per repeat.
const TCP_BYTES: usize = 64 << 20;

/// Loopback TCP throughput, GB/s in one direction: streams in parallel,
/// one per core up to 8, their rates summed (the best of 3 tries). NCCL's
/// socket transport opens several connections (channels, and
/// NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS each), so a single stream
/// would sit under what it reaches. `None` where loopback cannot be
/// opened.
pub fn loopback_tcp_gbps() -> Option<f64> {
    let streams = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    (0..3)
        .filter_map(|_| parallel_tcp(streams, TCP_BYTES / streams))
        .reduce(f64::max)
}

/// `streams` transfers of `bytes` at once: their summed rate.
fn parallel_tcp(streams: usize, bytes: usize) -> Option<f64> {
    let handles: Vec<_> = (0..streams)
        .map(|_| std::thread::spawn(move || tcp_once(bytes)))
        .collect();
    let rates: Option<Vec<f64>> = handles
        .into_iter()
        .map(|h| h.join().ok().flatten())
        .collect();
    rates.map(|r| r.iter().sum())
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
        let gbps = mem_copy_gbps_with(1, 1 << 20, 1 << 18, 8);
        assert!(gbps > 0.1 && gbps < 10_000.0, "{gbps}");
    }

    #[test]
    fn loopback_probe_moves_every_byte() {
        let gbps = tcp_once(1 << 20).expect("loopback");
        assert!(gbps > 0.0, "{gbps}");
    }
}
