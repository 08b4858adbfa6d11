//! The built-in CPU backend: ranks are threads of this process sharing
//! memory. It runs anywhere (CI, laptops, login nodes), moves real data
//! with the algorithms in [`algo`], and checks results with the same exact
//! patterns as every other backend.
//!
//! Given a [`Watch`], each rank thread publishes where it is after every
//! iteration and its barriers give up once the job stops, so a rank that
//! stops calling (or sleeps) cannot hang the others.

pub mod algo;
pub mod barrier;
mod check;
pub mod fit;
pub mod ranks;

use crate::arrival::{ArrivalSamples, LateEntry, RankSamples};
use crate::backend::{Backend, BackendError, BackendInfo, BackendSettings, CaseSpec, Measurement};
use crate::host_buffers::{rotation_elements, HostBuffers};
use crate::timing::Timing;
use crate::watch::{Stopped, Watch};
use algo::Ptrs;
use barrier::SpinBarrier;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::element::Element;
use collbench_core::stats::StreamingStats;
use collbench_core::{verify::Pattern, with_element, Collective, DeviceInfo};
use ranks::run_ranks;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Ranks as threads of this process.
pub struct CpuBackend {
    world_size: usize,
    host: String,
    buffers: Vec<HostBuffers>,
    /// Test hook: this rank moves data at about 0.25 GB/s, to prove that
    /// slow-rank localisation finds it.
    slow_rank: Option<usize>,
    /// Test hook: this rank enters every timed iteration late; how long
    /// each hold lasted, in microseconds (see [`CpuBackend::take_held_us`]).
    late_entry: Option<LateEntry>,
    held_us: Arc<Mutex<Vec<f64>>>,
    /// `-u`, alltoallv's traffic and the watch where rank threads publish
    /// progress and learn of a stop, as the runner set them.
    settings: BackendSettings,
    /// Test aid: a barrier with the other processes after every timed
    /// operation (see [`CpuBackend::with_process_barrier`]).
    process_barrier: Option<ProcessBarrier>,
}

/// A barrier with the job's other processes (`Err`: the job failed).
pub type ProcessBarrier = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Raw pointers handed to rank threads; each thread touches only what the
/// algorithms allow, separated by barriers.
struct Shared<T>(Ptrs<T>);
// SAFETY: the algorithms give each rank thread its own write ranges and
// order cross-rank reads with barriers (see algo.rs).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for Send.
unsafe impl<T> Sync for Shared<T> {}

impl CpuBackend {
    /// The NCCL-only flags this backend ignores: all of them (no NCCL,
    /// no GPU), each said once on stderr by the CLI.
    pub const IGNORES: &'static [collbench_core::NcclOnly] = &collbench_core::NcclOnly::ALL;

    /// A backend with `ranks` rank threads on host `host`.
    pub fn new(ranks: usize, host: &str) -> CpuBackend {
        CpuBackend {
            world_size: ranks.max(1),
            host: host.to_string(),
            buffers: (0..ranks.max(1)).map(|_| HostBuffers::default()).collect(),
            slow_rank: None,
            late_entry: None,
            held_us: Arc::default(),
            settings: BackendSettings::default(),
            process_barrier: None,
        }
    }

    /// Test aid for jobs of several processes, each running its own rank
    /// threads (CI has no GPUs): after every operation of the timed loop,
    /// rank thread 0 meets the other processes at `barrier`, so that a
    /// rank that stops calling holds every process up, as in a real
    /// collective. Each process's data still stays inside it.
    pub fn with_process_barrier(mut self, barrier: Option<ProcessBarrier>) -> CpuBackend {
        self.process_barrier = barrier;
        self
    }

    /// alltoallv's per-peer counts for `case` (`None` for the others).
    fn peers(&self, case: &CaseSpec) -> Option<PeerCounts> {
        (case.collective == Collective::AllToAllV).then(|| {
            self.settings.traffic.peer_counts(
                case.counts.param_count,
                case.dtype.size_bytes(),
                case.world_size,
            )
        })
    }

    /// Test hook: slow down one rank (see the field).
    pub fn with_slow_rank(mut self, rank: Option<usize>) -> CpuBackend {
        self.slow_rank = rank;
        self
    }

    /// Test hook: one rank enters every timed iteration late by the
    /// hook's delay (see [`LateEntry`]).
    pub fn with_late_entry(mut self, hook: Option<LateEntry>) -> CpuBackend {
        self.late_entry = hook;
        self
    }

    /// How long the late-entry hook held its rank, each timed iteration
    /// since the last call (microseconds): tests compare the time the
    /// figures say was lost with the time that was.
    pub fn take_held_us(&self) -> Vec<f64> {
        std::mem::take(&mut *self.held_us.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn ensure(&mut self, case: &CaseSpec, max_bytes: u64) -> Result<(), BackendError> {
        fit::check_fits(&self.buffers, case, max_bytes, self.settings.unalign)?;
        for b in &mut self.buffers {
            b.ensure(case, max_bytes, self.settings.unalign)?;
        }
        Ok(())
    }

    /// Every rank's pointers for the operation at `iter`.
    fn ptrs<T: Element>(&mut self, case: &CaseSpec, iter: u64, max_bytes: u64) -> Ptrs<T> {
        let mut p = Ptrs {
            send: Vec::new(),
            recv: Vec::new(),
            scratch: Vec::new(),
        };
        let unalign = self.settings.unalign;
        for (r, b) in self.buffers.iter_mut().enumerate() {
            let (send, recv) = b.pointers(case, r, iter, max_bytes, unalign);
            p.send.push(send as *mut T);
            p.recv.push(recv as *mut T);
            p.scratch.push(b.scratch() as *mut T);
        }
        p
    }

    fn scalars<T: Element>(&self, case: &CaseSpec) -> Vec<T> {
        let pat = Pattern {
            seed: 0,
            world_size: case.world_size,
            dtype: case.dtype,
            redop: None,
        };
        (0..self.world_size)
            .map(|r| T::from_value(pat.scalar(r)))
            .collect()
    }

    fn time_typed<T: Element>(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
    ) -> Result<Measurement, BackendError> {
        let n = self.world_size;
        // Pointers once; each operation shifts them by its rotation, so
        // memory does not grow with -n or -m.
        let ptrs = Shared(self.ptrs::<T>(case, 0, timing.max_bytes));
        let scalars = self.scalars::<T>(case);
        let peers = self.peers(case);
        let barrier = SpinBarrier::new(n).watched(self.settings.watch.clone());
        let watch = self.settings.watch.as_deref();
        let timed = TimedLoop {
            case,
            timing,
            ptrs: &ptrs,
            barrier: &barrier,
            scalars: &scalars,
            peers: peers.as_ref(),
            slowest: SlowestPerIteration::default(),
            slow_rank: self.slow_rank,
            late_entry: self.late_entry,
            held_us: &self.held_us,
            watch,
            across: self.process_barrier.as_ref(),
        };
        let results = run_ranks(n, |r| timed.rank(r))?
            .into_iter()
            .collect::<Result<Vec<_>, Stopped>>()
            .map_err(|_| crate::watch::stopped_error(watch))?;
        Ok(timed.measurement(results))
    }
}

/// One case's timed loop as its rank threads share it: warm-up, then the
/// timed iterations, each of `-m` operations.
struct TimedLoop<'a, T> {
    case: &'a CaseSpec,
    timing: &'a Timing,
    ptrs: &'a Shared<T>,
    barrier: &'a SpinBarrier,
    scalars: &'a [T],
    peers: Option<&'a PeerCounts>,
    slowest: SlowestPerIteration,
    slow_rank: Option<usize>,
    late_entry: Option<LateEntry>,
    held_us: &'a Mutex<Vec<f64>>,
    watch: Option<&'a Watch>,
    across: Option<&'a ProcessBarrier>,
}

/// One rank's result of a timed loop: seconds per operation, its
/// iteration times summarised (rank 0 only), and kept (`-I 1`), and its
/// arrival samples where asked for.
type RankTimes = (f64, StreamingStats, Vec<f64>, Option<RankSamples>);

impl<T: Element> TimedLoop<'_, T> {
    /// After each iteration's calls return: one relaxed store (and the
    /// fault hooks' check), outside the iteration's clock.
    fn at(&self, r: usize, k: u64) -> Result<(), Stopped> {
        self.watch.map_or(Ok(()), |w| w.at(r, k as u32))
    }

    /// Operation `i` (its rotation) of iteration `k` as rank `r`: one
    /// relaxed store as it enters.
    fn op(&self, r: usize, i: u64, k: u64) -> Result<(), Stopped> {
        if let Some(w) = self.watch {
            w.calling(r, k as u32)?;
        }
        let shift = rotation_elements(self.case, i, self.timing.max_bytes);
        // SAFETY: `ptrs` point into buffers sized for this case at every
        // rotation up to max_bytes; run_op's contract (disjoint writes,
        // barrier-ordered reads) is kept by the algorithms.
        unsafe {
            algo::run_op(
                self.case,
                r,
                &self.ptrs.0,
                shift,
                self.barrier,
                self.scalars,
                self.peers,
            )?
        };
        if self.slow_rank == Some(r) {
            slow_down(self.case.size_bytes());
        }
        if let Some(across) = self.across {
            if r == 0 {
                if let Some(w) = self.watch {
                    w.waiting(0);
                }
                across().map_err(|_| Stopped)?;
            }
            self.barrier.wait(r)?;
        }
        Ok(())
    }

    /// Rank `r`'s warm-up and timed loop.
    fn rank(&self, r: usize) -> Result<RankTimes, Stopped> {
        let timing = self.timing;
        let per_iter = timing.agg_iters.max(1) as u64;
        let iters = timing.iters as u64;
        let total_ops = iters.saturating_mul(per_iter).max(1);
        let warmup = timing.warmup_iters;
        self.at(r, 0)?;
        for w in 0..warmup as u64 {
            self.op(r, 0, w)?;
            self.at(r, w + 1)?;
        }
        if let Some(w) = self.watch {
            w.arriving(r, warmup);
        }
        self.barrier.wait(r)?;
        // Allocated before the clock starts: the first case's page
        // faults cost one iteration ~50 us (its 8-byte row read 3 us
        // instead of 0.5 us).
        let mut stats = StreamingStats::new();
        let mut kept = Vec::new();
        if r == 0 {
            stats.reserve(iters);
            if timing.keep_iter_times {
                kept.reserve(iters as usize);
            }
        }
        let mut samples = timing.arrival.then(|| RankSamples::with_capacity(iters));
        let start = Instant::now();
        for it in 0..iters {
            if let Some(held) = LateEntry::hold(self.late_entry, r) {
                let mut log = self.held_us.lock().unwrap_or_else(|e| e.into_inner());
                log.push(held.as_secs_f64() * 1e6);
            }
            let t0 = Instant::now();
            if let Some(s) = &mut samples {
                s.enter();
            }
            for a in 0..per_iter {
                self.op(r, timing.first_op + it * per_iter + a, warmup as u64 + it)?;
            }
            if let Some(s) = &mut samples {
                s.leave();
            }
            self.slowest
                .record(it, t0.elapsed().as_secs_f64() * 1e6 / per_iter as f64);
            if r == 0 && it > 0 {
                let t = self.slowest.take(it - 1);
                stats.push(t);
                if timing.keep_iter_times {
                    kept.push(t);
                }
            }
            self.at(r, warmup as u64 + it + 1)?;
        }
        let total = start.elapsed().as_secs_f64();
        Ok((total / total_ops as f64, stats, kept, samples))
    }

    /// The ranks' results as one measurement, with the last iteration's
    /// slowest time, which no rank took inside the loop.
    fn measurement(&self, results: Vec<RankTimes>) -> Measurement {
        let iters = self.timing.iters as u64;
        let mut iter_stats = StreamingStats::new();
        let mut iter_times_us = Vec::new();
        for (_, s, kept, _) in results.iter() {
            iter_stats.merge(s);
            iter_times_us.extend_from_slice(kept);
        }
        if iters > 0 {
            let t = self.slowest.take(iters - 1);
            iter_stats.push(t);
            if self.timing.keep_iter_times {
                iter_times_us.push(t);
            }
        }
        let rank_time_s: Vec<f64> = results.iter().map(|r| r.0).collect();
        let ranks: Option<Vec<RankSamples>> = results.into_iter().map(|r| r.3).collect();
        Measurement {
            rank_cputime_s: rank_time_s.clone(),
            rank_time_s,
            iter_times_us,
            iter_stats: Some(iter_stats),
            arrival: ranks.map(|ranks| ArrivalSamples {
                ranks,
                device_clock_error_ns: 0,
            }),
        }
    }
}

/// Per-iteration time of the slowest rank, in a ring of a few slots:
/// every rank folds its time for iteration `it` into slot `it % SLOTS`,
/// and rank 0 takes iteration `it - 1` once it has finished `it`.
///
/// Why that is safe: a rank records `it - 1` before it starts iteration
/// `it`, and every operation ends with a barrier of all ranks (algo.rs),
/// so when rank 0 has finished `it`, everyone has recorded `it - 1`; and
/// no rank reaches `it - 1 + SLOTS` before rank 0 has emptied the slot.
#[derive(Default)]
struct SlowestPerIteration {
    slots: [AtomicU64; SLOTS],
}

const SLOTS: usize = 4;

impl SlowestPerIteration {
    fn record(&self, it: u64, us: f64) {
        // Non-negative floats order as their bit patterns do.
        self.slots[it as usize % SLOTS].fetch_max(us.max(0.0).to_bits(), Ordering::AcqRel);
    }

    fn take(&self, it: u64) -> f64 {
        f64::from_bits(self.slots[it as usize % SLOTS].swap(0, Ordering::AcqRel))
    }
}

/// Test hook: hold this rank back as if it moved `bytes` at 0.25 GB/s,
/// far below what a busy 2-core machine gives a healthy rank.
fn slow_down(bytes: u64) {
    let d = Duration::from_nanos(4 * bytes.max(10_000));
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::thread::yield_now();
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "cpu".into(),
            library: None,
            library_path: None,
            library_version_code: None,
            devices: (0..self.world_size)
                .map(|r| DeviceInfo {
                    rank: r as u64,
                    group: 0,
                    pid: std::process::id() as u64,
                    host: self.host.clone(),
                    device: r as u64,
                    bus_id: None,
                    name: "cpu (rank thread)".into(),
                })
                .collect(),
        }
    }

    fn local_ranks(&self) -> usize {
        self.world_size
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn supports(&self, _case: &CaseSpec) -> Result<(), BackendError> {
        Ok(())
    }

    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        self.ensure(case, timing.max_bytes)?;
        with_element!(case.dtype, T => self.time_typed::<T>(case, timing))
    }

    /// Keeps `-u`, the traffic and the watch: the CPU backend applies all
    /// three.
    fn settings(&mut self) -> Option<&mut BackendSettings> {
        Some(&mut self.settings)
    }

    /// Under the multi-process test hook a group is this process's own
    /// rank threads again (with its slow-rank hook, without the barrier
    /// with the other processes): the figures are this process's alone,
    /// which is what tests of the host-pair procedure need.
    fn group(
        &mut self,
        _control: &dyn collbench_core::Bootstrap,
        group: Option<u32>,
    ) -> Result<Option<Box<dyn Backend>>, BackendError> {
        Ok(group.map(|_| {
            let mut b = CpuBackend::new(self.world_size, &self.host)
                .with_slow_rank(self.slow_rank)
                .with_late_entry(self.late_entry);
            b.settings.traffic = self.settings.traffic.clone();
            Box::new(b) as Box<dyn Backend>
        }))
    }

    fn subset(&self, ranks: &[usize]) -> Result<Box<dyn Backend>, BackendError> {
        if ranks.is_empty() || ranks.iter().any(|&r| r >= self.world_size) {
            return Err(BackendError::Unsupported(format!(
                "rank subset {ranks:?} is outside 0..{}",
                self.world_size
            )));
        }
        let slow = self
            .slow_rank
            .and_then(|s| ranks.iter().position(|&r| r == s));
        let late = self.late_entry.and_then(|h| {
            let rank = ranks.iter().position(|&r| r == h.rank)?;
            Some(LateEntry { rank, ..h })
        });
        let mut sub = CpuBackend::new(ranks.len(), &self.host)
            .with_slow_rank(slow)
            .with_late_entry(late);
        sub.settings.traffic = self.settings.traffic.clone();
        Ok(Box::new(sub))
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        self.ensure(case, 0)?;
        with_element!(case.dtype, T => {
            let ptrs = Shared(self.ptrs::<T>(case, 0, 0));
            let scalars = self.scalars::<T>(case);
            let peers = self.peers(case);
            let watch = self.settings.watch.clone();
            check::check_case::<T>(case, seed, corrupt, &ptrs.0, &scalars, peers.as_ref(), watch)
        })
    }

    fn outputs(&mut self, case: &CaseSpec, seed: u64) -> Result<Vec<Vec<u8>>, BackendError> {
        self.ensure(case, 0)?;
        with_element!(case.dtype, T => {
            let ptrs = Shared(self.ptrs::<T>(case, 0, 0));
            let scalars = self.scalars::<T>(case);
            let peers = self.peers(case);
            let watch = self.settings.watch.clone();
            check::outputs_case::<T>(case, seed, &ptrs.0, &scalars, peers.as_ref(), watch)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::alltoallv::Traffic;
    use collbench_core::{Collective, DataType, ReduceOp};

    fn case(coll: Collective, bytes: u64, ranks: usize) -> CaseSpec {
        CaseSpec {
            collective: coll,
            dtype: DataType::Float,
            redop: ReduceOp::Sum,
            root: 0,
            counts: coll.counts(bytes, 4, ranks),
            in_place: false,
            world_size: ranks,
        }
    }

    fn timing(iters: u32, agg_iters: u32, max_bytes: u64) -> Timing {
        Timing {
            iters,
            agg_iters,
            max_bytes,
            ..Timing::default()
        }
    }

    #[test]
    fn the_runners_settings_are_kept_through_the_default_setters() {
        let mut b = CpuBackend::new(2, "h");
        let spread = Traffic::Generated { spread: 0.5 };
        b.set_unalign(3).unwrap();
        b.set_traffic(&spread).unwrap();
        b.set_watch(Arc::new(Watch::new(2, 0, Vec::new())));
        assert_eq!((b.settings.unalign, &b.settings.traffic), (3, &spread));
        assert!(b.settings.watch.is_some());
    }

    #[test]
    fn one_summary_per_iteration_in_fixed_memory() {
        let mut b = CpuBackend::new(3, "h");
        for coll in [
            Collective::AllReduce,
            Collective::AllToAll,
            Collective::Broadcast,
        ] {
            let m = b
                .time(&case(coll, 4096, 3), &timing(5000, 3, 1 << 20))
                .unwrap();
            let s = m.iter_stats.expect("the CPU backend summarises");
            assert_eq!(s.count(), 5000, "{coll}");
            assert!(s.heap_bytes() <= 64 * 1024, "{coll}: {}", s.heap_bytes());
            assert!(m.iter_times_us.is_empty());
            assert_eq!(m.rank_time_s.len(), 3);
        }
    }

    #[test]
    fn each_iteration_counts_its_slowest_rank() {
        // Rank 2 holds every operation back by at least 40 us (slow_down);
        // rank 0's own clock misses that in the first iteration, the
        // slowest-rank summary in none.
        let mut b = CpuBackend::new(3, "h").with_slow_rank(Some(2));
        let m = b
            .time(&case(Collective::AllGather, 96, 3), &timing(20, 1, 96))
            .unwrap();
        let s = m.iter_stats.unwrap().summary().unwrap();
        assert_eq!(s.samples, 20);
        assert!(s.min_us >= 40.0, "{s:?}");
    }
}
