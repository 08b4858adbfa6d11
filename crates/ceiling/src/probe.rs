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

/// The fewest chunks each probe thread times (about 10 ms of copying at
/// 12 GB/s a core): its fastest one is then an uninterrupted copy even on
/// a shared machine.
const MIN_CHUNKS: usize = 32;

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
    main_copy_gbps(threads, region_bytes)
}

/// [`mem_copy_gbps`] with one thread alone: the fastest one rank copies
/// from host memory. Where fewer ranks write than there are cores (a
/// broadcast in place, whose root writes nothing; 2 ranks on a 64-core
/// host) the cores' sum is no bound's rate: each writer goes at most this
/// fast.
pub fn mem_copy_solo_gbps(region_bytes: u64) -> Option<f64> {
    main_copy_gbps(1, region_bytes)
}

/// The memory probe with `threads` threads.
fn main_copy_gbps(threads: usize, region_bytes: u64) -> Option<f64> {
    let region = usize::try_from(region_bytes)
        .unwrap_or(REGION_BYTES)
        .clamp(CHUNK_BYTES, REGION_BYTES);
    // At least 32 timed chunks a thread, whatever the region: with the two
    // of a 4 MiB region, one descheduling left the probe under what a
    // run's rows reached (1.25x "the ceiling" for a 4 MiB broadcast).
    let chunks = (2 * region / CHUNK_BYTES).max(MIN_CHUNKS);
    let gbps = mem_copy_gbps_with(threads, region, CHUNK_BYTES, chunks);
    (gbps > 0.0).then_some(gbps)
}

/// The largest region [`mem_copy_gbps`] uses.
pub const MAX_REGION_BYTES: u64 = REGION_BYTES as u64;

/// A copy rate through a region small enough to stay in a cache level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyLevel {
    /// Bytes each probe thread copies within (source and destination
    /// each this large).
    pub region_bytes: u64,
    /// Probe threads, one per core: the level holds `threads` regions.
    pub threads: u64,
    /// GB/s of bytes copied, all threads together.
    pub copy_gbps: f64,
    /// GB/s of one thread copying alone through the same region: the
    /// fastest any one rank can write there, whatever its neighbours do
    /// (`None` where it was not probed).
    pub solo_gbps: Option<f64>,
}

/// The regions probed under host memory's, per thread: every power of two
/// from 16 KiB (with its destination, within a 48 KiB L1) to 4 MiB: a
/// row's bytes past each probe's footprint go at that probe's rate
/// (`cpu.rs`), so the finer the grid, the nearer the bound. A grid of three (32 KiB, 256 KiB, 2 MiB) left rows
/// between its steps above their ceiling: a 1 MiB all_reduce over 2
/// ranks (2 MiB of buffers a core, within this VM's 2 MiB L2) was bounded
/// by the 2 MiB probe, whose source and destination (4 MiB a core) spill
/// to L3 at a third of L2's rate.
const CACHE_REGIONS: [usize; 9] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
];

/// Each timed copy of a small region is repeated up to this many bytes, so
/// that the clock's own cost (tens of ns) does not pull the rate down.
const BATCH_BYTES: usize = 1 << 20;

/// Timed batches per level and pass.
const LEVEL_BATCHES: usize = 48;

/// Passes over the levels; each level keeps its best. A neighbour that
/// hammers the memory system for the few milliseconds of one pass (a
/// build's link step) leaves the other pass clean.
const LEVEL_PASSES: usize = 2;

/// Copy rates through regions that fit a cache level (the `CACHE_REGIONS` sizes
/// per thread, one thread per core), smallest first. A CPU run's small
/// sizes live in cache, where a copy is several times faster than from
/// memory: a 32 KiB all_reduce reached 1.3x the host memory ceiling. A
/// level that cannot allocate is left out. Each level is also probed with
/// one thread alone ([`CopyLevel::solo_gbps`]). About 0.2 s.
pub fn cache_copy_levels() -> Vec<CopyLevel> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut best = [(0.0f64, 0.0f64); CACHE_REGIONS.len()];
    for _ in 0..LEVEL_PASSES {
        for (b, &region) in best.iter_mut().zip(CACHE_REGIONS.iter()) {
            b.0 =
                b.0.max(mem_copy_gbps_with(threads, region, region, LEVEL_BATCHES));
            b.1 =
                b.1.max(mem_copy_gbps_with(1, region, region, LEVEL_BATCHES));
        }
    }
    CACHE_REGIONS
        .iter()
        .zip(best)
        .map(|(&region, (copy_gbps, solo))| CopyLevel {
            region_bytes: region as u64,
            threads: threads as u64,
            copy_gbps,
            solo_gbps: (solo > 0.0).then_some(solo),
        })
        .filter(|l| l.copy_gbps > 0.0)
        .collect()
}

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
    // A small chunk is copied several times per reading of the clock.
    let reps = (BATCH_BYTES / chunk).max(1);
    (0..chunks)
        .map(|i| {
            let at = (i % slots) * chunk;
            let t = Instant::now();
            for _ in 0..reps {
                dst[at..at + chunk].copy_from_slice(std::hint::black_box(&src[at..at + chunk]));
                std::hint::black_box(&dst);
            }
            t.elapsed().as_secs_f64()
        })
        .filter(|&s| s > 0.0)
        .map(|s| (chunk * reps) as f64 / s / 1e9)
        .fold(0.0, f64::max)
}

/// Bytes each stream sends per try.
const TCP_BYTES_PER_STREAM: usize = 32 << 20;

/// Loopback TCP capacity, GB/s in one direction: the best aggregate rate
/// of 1, 2, 4, ... streams (up to twice the cores, at most 16), each
/// count tried twice. NCCL's socket transport opens several connections
/// (channels, and NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS each), and
/// loopback's rate grows with them (an H100 host: 3.9 GB/s with one
/// stream, 22 GB/s with 16), so the ceiling is what the most streams
/// reach, not one stream's rate. `None` where loopback cannot be opened.
pub fn loopback_tcp_gbps() -> Option<f64> {
    let most = std::thread::available_parallelism().map_or(2, |n| (2 * n.get()).min(16));
    let counts = std::iter::successors(Some(1usize), |s| Some(s * 2)).take_while(|&s| s <= most);
    counts
        .flat_map(|s| [s, s])
        .filter_map(|s| aggregate_tcp(s, TCP_BYTES_PER_STREAM))
        .reduce(f64::max)
}

/// `streams` connections, set up first, then sending `bytes` each at
/// once (a barrier): all bytes over the wall time from the start to the
/// last byte received. Streams that happen not to overlap cannot add up
/// to more than the link moved, as summed per-stream rates would (and a
/// first probe's 8 MiB per stream were over before the others began).
fn aggregate_tcp(streams: usize, bytes: usize) -> Option<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").ok()?;
    let addr = listener.local_addr().ok()?;
    let mut pairs = Vec::with_capacity(streams);
    for _ in 0..streams {
        let sender = TcpStream::connect(addr).ok()?;
        let (receiver, _) = listener.accept().ok()?;
        pairs.push((sender, receiver));
    }
    let start = Arc::new(Barrier::new(2 * streams + 1));
    let mut senders = Vec::with_capacity(streams);
    let mut receivers = Vec::with_capacity(streams);
    for (mut tx, mut rx) in pairs {
        let go = Arc::clone(&start);
        senders.push(std::thread::spawn(move || {
            let chunk = vec![7u8; 1 << 20];
            go.wait();
            let began = Instant::now();
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len());
                tx.write_all(&chunk[..n]).ok()?;
                left -= n;
            }
            Some(began)
        }));
        let go = Arc::clone(&start);
        receivers.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            go.wait();
            let mut got = 0;
            while got < bytes {
                match rx.read(&mut buf) {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => got += n,
                }
            }
            Some(Instant::now())
        }));
    }
    start.wait();
    // The clock starts when the first sender does, not when this thread
    // wakes from the barrier: a descheduled caller woke after a 1 MiB
    // transfer had ended and measured nothing.
    let ends: Option<Vec<Instant>> = receivers
        .into_iter()
        .map(|h| h.join().ok().flatten())
        .collect();
    let starts: Option<Vec<Instant>> = senders
        .into_iter()
        .map(|h| h.join().ok().flatten())
        .collect();
    let t0 = starts?.into_iter().min()?;
    let secs = ends?.into_iter().max()?.duration_since(t0).as_secs_f64();
    (secs > 0.0).then(|| (streams * bytes) as f64 / secs / 1e9)
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
        for streams in [1, 3] {
            let gbps = aggregate_tcp(streams, 1 << 20).expect("loopback");
            assert!(gbps > 0.0 && gbps < 10_000.0, "{streams}: {gbps}");
        }
    }
}
