//! The built-in CPU backend: ranks are threads of this process sharing
//! memory. It runs anywhere (CI, laptops, login nodes), moves real data
//! with the algorithms in [`algo`], and checks results with the same exact
//! patterns as every other backend.

pub mod algo;
pub mod barrier;
mod check;

use crate::backend::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, Timing};
use crate::host_buffers::HostBuffers;
use algo::Ptrs;
use barrier::SpinBarrier;
use collbench_core::alltoallv::{PeerCounts, Traffic};
use collbench_core::element::Element;
use collbench_core::{verify::Pattern, with_element, Collective, DeviceInfo};
use std::time::{Duration, Instant};

/// Ranks as threads of this process.
pub struct CpuBackend {
    world_size: usize,
    host: String,
    buffers: Vec<HostBuffers>,
    /// Test hook: this rank moves data at about 0.25 GB/s, to prove that
    /// slow-rank localisation finds it.
    slow_rank: Option<usize>,
    /// Elements every buffer is misaligned by (`-u`).
    unalign: u64,
    /// Who sends how much to whom in alltoallv.
    traffic: Traffic,
}

/// Raw pointers handed to rank threads; each thread touches only what the
/// algorithms allow, separated by barriers.
struct Shared<T>(Ptrs<T>);
// SAFETY: the algorithms give each rank thread its own write ranges and
// order cross-rank reads with barriers (see algo.rs).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for Send.
unsafe impl<T> Sync for Shared<T> {}

impl CpuBackend {
    /// A backend with `ranks` rank threads on host `host`.
    pub fn new(ranks: usize, host: &str) -> CpuBackend {
        CpuBackend {
            world_size: ranks.max(1),
            host: host.to_string(),
            buffers: (0..ranks.max(1)).map(|_| HostBuffers::default()).collect(),
            slow_rank: None,
            unalign: 0,
            traffic: Traffic::default(),
        }
    }

    /// alltoallv's per-peer counts for `case` (`None` for the others).
    fn peers(&self, case: &CaseSpec) -> Option<PeerCounts> {
        (case.collective == Collective::AllToAllV).then(|| {
            self.traffic.peer_counts(
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

    fn ensure(&mut self, case: &CaseSpec, max_bytes: u64) -> Result<(), BackendError> {
        for b in &mut self.buffers {
            b.ensure(case, max_bytes, self.unalign)?;
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
        let unalign = self.unalign;
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

    fn time_typed<T: Element>(&mut self, case: &CaseSpec, timing: &Timing) -> Measurement {
        let n = self.world_size;
        let per_iter = timing.agg_iters.max(1) as u64;
        let total_ops = timing.iters as u64 * per_iter;
        let steps: Vec<Shared<T>> = (0..total_ops.max(1))
            .map(|i| Shared(self.ptrs::<T>(case, i, timing.max_bytes)))
            .collect();
        let scalars = self.scalars::<T>(case);
        let peers = self.peers(case);
        let barrier = SpinBarrier::new(n);
        let slow = self.slow_rank;
        let bytes = case.size_bytes();
        let results: Vec<(f64, Vec<f64>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|r| {
                    let (steps, barrier, scalars) = (&steps, &barrier, &scalars);
                    let peers = peers.as_ref();
                    s.spawn(move || {
                        // SAFETY: `steps[i]` holds pointers into buffers sized
                        // for this case; run_op's contract (disjoint writes,
                        // barrier-ordered reads) is kept by the algorithms.
                        let op = |i: u64| unsafe {
                            algo::run_op(case, r, &steps[i as usize].0, barrier, scalars, peers);
                            if slow == Some(r) {
                                slow_down(bytes);
                            }
                        };
                        for _ in 0..timing.warmup_iters {
                            op(0);
                        }
                        barrier.wait();
                        let start = Instant::now();
                        let mut iter_us = Vec::with_capacity(timing.iters as usize);
                        for it in 0..timing.iters as u64 {
                            let t0 = Instant::now();
                            for a in 0..per_iter {
                                op(it * per_iter + a);
                            }
                            iter_us.push(t0.elapsed().as_secs_f64() * 1e6 / per_iter as f64);
                        }
                        let total = start.elapsed().as_secs_f64();
                        (total / total_ops.max(1) as f64, iter_us)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank thread"))
                .collect()
        });
        let mut iter_times_us = vec![0.0f64; timing.iters as usize];
        for (_, it) in &results {
            for (a, b) in iter_times_us.iter_mut().zip(it) {
                *a = a.max(*b);
            }
        }
        let rank_time_s: Vec<f64> = results.iter().map(|r| r.0).collect();
        Measurement {
            rank_cputime_s: rank_time_s.clone(),
            rank_time_s,
            iter_times_us,
        }
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
        Ok(with_element!(case.dtype, T => self.time_typed::<T>(case, timing)))
    }

    fn set_unalign(&mut self, elements: u64) -> Result<(), BackendError> {
        self.unalign = elements;
        Ok(())
    }

    fn set_traffic(&mut self, traffic: &Traffic) -> Result<(), BackendError> {
        self.traffic = traffic.clone();
        Ok(())
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
        let mut sub = CpuBackend::new(ranks.len(), &self.host).with_slow_rank(slow);
        sub.traffic = self.traffic.clone();
        Ok(Box::new(sub))
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        self.ensure(case, 0)?;
        Ok(with_element!(case.dtype, T => {
            let ptrs = Shared(self.ptrs::<T>(case, 0, 0));
            let scalars = self.scalars::<T>(case);
            let peers = self.peers(case);
            check::check_case::<T>(case, seed, corrupt, &ptrs.0, &scalars, peers.as_ref())
        }))
    }
}
