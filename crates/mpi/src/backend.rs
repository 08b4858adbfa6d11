//! [`MpiBackend`]: one rank per process, host buffers, every collective
//! through MPI, timed and checked like the built-in CPU backend.

use crate::check;
use crate::coll::{self, Ctx, Ptrs};
use crate::ops::{self, Op};
use collbench_core::alltoallv::Traffic;
use collbench_core::collective::RedopUse;
use collbench_core::element::Element;
use collbench_core::{verify::Pattern, with_element, Bootstrap, Collective, DeviceInfo};
use collbench_runner::arrival::{ArrivalSamples, LateEntry, RankSamples};
use collbench_runner::host_buffers::HostBuffers;
use collbench_runner::watch::Watch;
use collbench_runner::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, Timing};
use mpi::ffi;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::{AsRaw, Communicator};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This process's rank of an MPI job as a collbench backend.
pub struct MpiBackend {
    /// A duplicate of MPI_COMM_WORLD (or, for a group's backend, a split
    /// of it), so benchmark traffic never mixes with anyone else's, with
    /// errors returned instead of aborting the job. Every collective of
    /// this backend runs on it.
    comm: SimpleCommunicator,
    rank: usize,
    world_size: usize,
    host: String,
    library: String,
    buffers: HostBuffers,
    /// Who sends how much to whom in alltoallv.
    traffic: Traffic,
    /// Where the timed loop publishes its iterations (and learns of a
    /// stop), so a rank inside an MPI call reads as inside it.
    watch: Option<Arc<Watch>>,
    /// Test hook: this process enters every timed iteration late by this
    /// much (a starved host); its group backends keep it.
    late_entry: Option<Duration>,
}

/// Send, receive and scratch buffers (8-byte aligned), grown on demand.
impl MpiBackend {
    /// The NCCL-only flags the CLI says this backend ignores. -G, -R and
    /// --explain are passed over without a line, as the MPI backend always
    /// has (they change nothing here either).
    pub const IGNORES: &'static [collbench_core::NcclOnly] = &[
        collbench_core::NcclOnly::DeviceImplementation,
        collbench_core::NcclOnly::DeviceCtaCount,
        collbench_core::NcclOnly::CtaPolicy,
        collbench_core::NcclOnly::Memory,
    ];

    /// The backend for this process on `host` (the name shown for it). MPI
    /// must be running (see [`crate::bootstrap`]) and agree with the job's
    /// control plane, `job`, on rank and size.
    pub fn new(job: &dyn Bootstrap, host: &str) -> Result<MpiBackend, BackendError> {
        if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
            return Err(BackendError::Library(
                "MPI is not running: --backend mpi must start MPI before the control plane (collbench_mpi::bootstrap)".into(),
            ));
        }
        let comm = SimpleCommunicator::world().duplicate();
        let (rank, world_size) = (comm.rank() as usize, comm.size() as usize);
        if (rank, world_size) != (job.rank(), job.world_size()) {
            return Err(BackendError::Library(format!(
                "MPI says rank {rank} of {world_size} but the control plane says rank {} of {}: drop --rank/--world-size under mpirun",
                job.rank(),
                job.world_size()
            )));
        }
        let library = mpi::environment::library_version()
            .ok()
            // Open MPI counts the terminating NUL in the length.
            .and_then(|v| {
                v.lines()
                    .next()
                    .map(|l| l.trim_matches(['\0', ' ']).to_string())
            })
            .unwrap_or_else(|| "MPI".into());
        MpiBackend::over(comm, host, library)
    }

    /// Test hook (`--test-late-entry RANK:MICROSECONDS`, RANK the job's
    /// global rank): that process enters every timed iteration late.
    pub fn with_late_entry(mut self, hook: Option<LateEntry>) -> MpiBackend {
        self.late_entry = hook.filter(|h| h.rank == self.rank).map(|h| h.delay);
        self
    }

    /// A backend on `comm` (this process's own communicator, which it
    /// keeps and frees), with errors returned instead of aborting the job.
    fn over(
        comm: SimpleCommunicator,
        host: &str,
        library: String,
    ) -> Result<MpiBackend, BackendError> {
        ops::check(
            // SAFETY: a valid communicator and MPI's predefined handler.
            unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) },
            "MPI_Comm_set_errhandler",
        )?;
        let (rank, world_size) = (comm.rank() as usize, comm.size() as usize);
        Ok(MpiBackend {
            comm,
            rank,
            world_size,
            host: host.to_string(),
            library,
            buffers: HostBuffers::default(),
            traffic: Traffic::default(),
            watch: None,
            late_entry: None,
        })
    }

    /// See [`Backend::group`]: one MPI_Comm_split of this backend's
    /// communicator per round, collective over its processes (the control
    /// plane is not needed: MPI matches the calls). The processes of
    /// `group` get a backend on their own communicator, in the order of
    /// their rank here; a process with no group takes part in the split
    /// with MPI_UNDEFINED and gets `None`.
    fn for_group(&self, group: Option<u32>) -> Result<Option<MpiBackend>, BackendError> {
        let value = group.map(i32::try_from);
        // A process whose group MPI cannot name still takes part in the
        // split (as an idle one), so that no other process waits for it.
        let color = match value {
            Some(Ok(v)) => Color::with_value(v),
            _ => Color::undefined(),
        };
        let sub = self.comm.split_by_color(color);
        match (group, value, sub) {
            (None, ..) => Ok(None),
            (Some(_), _, Some(sub)) => {
                let mut b = MpiBackend::over(sub, &self.host, self.library.clone())?;
                b.traffic = self.traffic.clone();
                b.late_entry = self.late_entry;
                Ok(Some(b))
            }
            (Some(g), Some(Err(_)), None) => Err(BackendError::Unsupported(format!(
                "group {g} is beyond MPI's colours"
            ))),
            (Some(g), _, None) => Err(BackendError::Library(format!(
                "MPI_Comm_split gave this process no communicator for group {g}"
            ))),
        }
    }

    fn ensure(&mut self, case: &CaseSpec, max_bytes: u64) -> Result<(), BackendError> {
        self.buffers.ensure(case, max_bytes, 0)
    }

    /// Pointers for the operation at `iter` (rotating like nccl-tests').
    fn ptrs<T: Element>(&mut self, case: &CaseSpec, iter: u64, max_bytes: u64) -> Ptrs<T> {
        let (send, recv) = self.buffers.pointers(case, self.rank, iter, max_bytes, 0);
        Ptrs {
            send: send as *mut T,
            recv: recv as *mut T,
            scratch: self.buffers.scratch() as *mut T,
        }
    }

    /// The operator (reducing collectives only) and this rank's context.
    fn op<T: Element>(&self, case: &CaseSpec) -> Result<Option<Op>, BackendError> {
        let reduces = case.collective.spec().redop == RedopUse::Reduces;
        reduces.then(|| Op::new::<T>(case.redop)).transpose()
    }

    fn ctx<'a, T: Element>(&self, case: &CaseSpec, op: Option<&'a Op>) -> Ctx<'a, T> {
        let pattern = Pattern {
            seed: 0,
            world_size: case.world_size,
            dtype: case.dtype,
            redop: None,
        };
        Ctx {
            comm: self.comm.as_raw(),
            rank: self.rank,
            world_size: self.world_size,
            op,
            scalar: T::from_value(pattern.scalar(self.rank)),
            peers: (case.collective == Collective::AllToAllV).then(|| {
                self.traffic.peer_counts(
                    case.counts.param_count,
                    case.dtype.size_bytes(),
                    case.world_size,
                )
            }),
        }
    }

    fn time_typed<T: Element>(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
    ) -> Result<Measurement, BackendError> {
        let op = self.op::<T>(case)?;
        let ctx = self.ctx::<T>(case, op.as_ref());
        let per_iter = timing.agg_iters.max(1) as u64;
        let total_ops = (timing.iters as u64 * per_iter).max(1);
        let watch = self.watch.clone();
        let late = self.late_entry.map(|delay| LateEntry { rank: 0, delay });
        // Progress as the other backends count it: warm-up iterations
        // first, then the timed ones; one relaxed store each, outside the
        // iteration's clock for `at`. A blocking MPI call cannot be
        // interrupted: a stop is seen between calls (else the watchdog's
        // last resort ends the process).
        let mark = |k: u64, inside: bool| -> Result<(), BackendError> {
            let Some(w) = &watch else {
                return Ok(());
            };
            let marked = match inside {
                true => w.calling(0, k as u32),
                false => w.at(0, k as u32),
            };
            marked.map_err(|_| collbench_runner::watch::stopped_error(Some(w)))
        };
        let mut run = |i: u64| {
            let p = self.ptrs::<T>(case, i, timing.max_bytes);
            // SAFETY: `time` sized the buffers; every rank runs the same plan.
            unsafe { coll::run_op(&ctx, case, &p) }
        };
        let warmup = timing.warmup_iters as u64;
        mark(0, false)?;
        for k in 0..warmup {
            mark(k, true)?;
            run(0)?;
            mark(k + 1, false)?;
        }
        mark(warmup, true)?;
        // SAFETY: a valid communicator.
        ops::check(unsafe { ffi::MPI_Barrier(ctx.comm) }, "MPI_Barrier")?;
        let mut samples = timing
            .arrival
            .then(|| RankSamples::with_capacity(timing.iters as u64));
        let start = Instant::now();
        let mut iter_times_us = Vec::with_capacity(timing.iters as usize);
        for it in 0..timing.iters as u64 {
            let k = warmup + it;
            if it > 0 {
                mark(k, true)?;
            }
            LateEntry::hold(late, 0);
            let t0 = Instant::now();
            if let Some(s) = &mut samples {
                s.enter();
            }
            for a in 0..per_iter {
                run(it * per_iter + a)?;
            }
            if let Some(s) = &mut samples {
                s.leave();
            }
            iter_times_us.push(t0.elapsed().as_secs_f64() * 1e6 / per_iter as f64);
            mark(k + 1, false)?;
        }
        let time_s = start.elapsed().as_secs_f64() / total_ops as f64;
        let arrival = samples.map(|s| ArrivalSamples {
            ranks: vec![s],
            device_clock_error_ns: 0,
        });
        Ok(Measurement {
            rank_time_s: vec![time_s],
            rank_cputime_s: vec![time_s],
            iter_times_us,
            iter_stats: None,
            arrival,
        })
    }

    fn check_typed<T: Element>(
        &mut self,
        case: &CaseSpec,
        seed: u64,
        corrupt: bool,
    ) -> Result<u64, BackendError> {
        let op = self.op::<T>(case)?;
        let ctx = self.ctx::<T>(case, op.as_ref());
        let p = self.ptrs::<T>(case, 0, 0);
        // SAFETY: `check` sized the buffers; every rank runs the same plan.
        unsafe { check::check_case(&ctx, case, seed, corrupt, &p) }
    }
}

impl Backend for MpiBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "mpi".into(),
            library: Some(self.library.clone()),
            library_path: None,
            library_version_code: None,
            devices: vec![DeviceInfo {
                rank: self.rank as u64,
                group: 0,
                pid: std::process::id() as u64,
                host: self.host.clone(),
                device: 0,
                bus_id: None,
                name: "cpu (MPI rank)".into(),
            }],
        }
    }

    fn local_ranks(&self) -> usize {
        1
    }

    fn set_watch(&mut self, watch: Arc<Watch>) {
        self.watch = Some(watch);
    }

    fn set_traffic(&mut self, traffic: &Traffic) -> Result<(), BackendError> {
        self.traffic = traffic.clone();
        Ok(())
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn group(
        &mut self,
        _control: &dyn Bootstrap,
        group: Option<u32>,
    ) -> Result<Option<Box<dyn Backend>>, BackendError> {
        Ok(self
            .for_group(group)?
            .map(|b| Box::new(b) as Box<dyn Backend>))
    }

    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        let c = &case.counts;
        ops::count(c.send_count.max(c.recv_count)).map(|_| ())
    }

    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        self.ensure(case, timing.max_bytes)?;
        with_element!(case.dtype, T => self.time_typed::<T>(case, timing))
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        self.ensure(case, 0)?;
        with_element!(case.dtype, T => self.check_typed::<T>(case, seed, corrupt))
    }
}
