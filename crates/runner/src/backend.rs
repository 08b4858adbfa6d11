//! The seam between the runner and a communication library.

use crate::timing::Timing;
use collbench_core::alltoallv::{PeerCounts, Traffic};
use collbench_core::stats::StreamingStats;
use collbench_core::verify::{alltoallv_source, output_source, Source};
use collbench_core::{Collective, Counts, DataType, DeviceInfo, Explanation, ReduceOp};
use std::sync::Arc;

/// One case as a backend runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseSpec {
    pub collective: Collective,
    pub dtype: DataType,
    pub redop: ReduceOp,
    pub root: usize,
    pub counts: Counts,
    pub in_place: bool,
    /// Global number of ranks taking part.
    pub world_size: usize,
}

impl CaseSpec {
    /// Bytes of the larger buffer (the printed size).
    pub fn size_bytes(&self) -> u64 {
        self.counts.size_bytes(self.dtype.size_bytes())
    }

    /// Where element `j` of rank `rank`'s output comes from, for every
    /// backend's check: alltoallv's layout `peers`, else the collective's.
    pub fn output_source(&self, rank: usize, j: u64, peers: Option<&PeerCounts>) -> Source {
        match peers {
            Some(peers) => alltoallv_source(peers, rank, j),
            None => output_source(
                self.collective,
                &self.counts,
                self.world_size,
                rank,
                self.root,
                j,
            ),
        }
    }
}

/// What a backend measured for one case on this process's ranks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    /// Seconds per operation, per local rank: wall time of the timed loop
    /// (including completion) divided by iterations x aggregation.
    pub rank_time_s: Vec<f64>,
    /// Seconds per operation spent issuing work (`-C`), per local rank.
    pub rank_cputime_s: Vec<f64>,
    /// Per-iteration times in microseconds (slowest local rank), where
    /// the backend takes them one by one (grows with -n; backends that
    /// summarise as they go fill `iter_stats` instead).
    pub iter_times_us: Vec<f64>,
    /// The same per-iteration times summarised in fixed memory, where the
    /// backend does so (the CPU backend).
    pub iter_stats: Option<StreamingStats>,
    /// Each local rank's entries and ends of the timed iterations, where
    /// [`Timing::arrival`] asked for them and the backend takes them.
    pub arrival: Option<crate::arrival::ArrivalSamples>,
}

/// GPU memory a run took (`-M 1`), in bytes, as nccl-tests reports it:
/// communicator creation, the test's own buffers, and what the library
/// allocated while running. Each is the largest over the GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryUsage {
    pub initialization: i64,
    pub user_allocated: i64,
    pub collective: i64,
}

impl MemoryUsage {
    /// Each figure's largest over `all` (processes).
    pub fn largest(all: impl IntoIterator<Item = MemoryUsage>) -> Option<MemoryUsage> {
        all.into_iter().reduce(|a, b| MemoryUsage {
            initialization: a.initialization.max(b.initialization),
            user_allocated: a.user_allocated.max(b.user_allocated),
            collective: a.collective.max(b.collective),
        })
    }
}

/// Facts about a backend for the report header.
#[derive(Debug, Clone, Default)]
pub struct BackendInfo {
    /// `cpu`, `nccl`, `mpi`.
    pub name: String,
    /// Library and version, e.g. `NCCL 2.28.3`.
    pub library: Option<String>,
    /// Path the library was loaded from.
    pub library_path: Option<String>,
    /// Library version code as nccl-tests prints it (22803), if any.
    pub library_version_code: Option<u32>,
    /// One entry per local rank.
    pub devices: Vec<DeviceInfo>,
}

/// What the runner tells a backend before its cases run (`-u`, alltoallv's
/// traffic, the watch), for a backend that keeps it as told: such a
/// backend returns its copy from [`Backend::settings`], and the default
/// [`Backend::set_unalign`], [`Backend::set_traffic`] and
/// [`Backend::set_watch`] store into it.
#[derive(Clone, Default)]
pub struct BackendSettings {
    /// Elements every buffer is misaligned by (`-u`).
    pub unalign: u64,
    /// Who sends how much to whom in alltoallv.
    pub traffic: Traffic,
    /// Where the timed loop publishes progress and learns of a stop.
    pub watch: Option<Arc<crate::watch::Watch>>,
}

/// Backend failures: each reads as one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot run this case (skipped with a note, not fatal).
    #[error("{0}")]
    Unsupported(String),
    /// Not enough memory for this size: what was asked and what was
    /// there, for the command to name its own flags in the fix.
    #[error(transparent)]
    OutOfMemory(#[from] crate::shortfall::Shortfall),
    /// A library call failed.
    #[error("{0}")]
    Library(String),
    /// An operation did not finish within the timeout (`-T`).
    #[error("{0}")]
    Timeout(String),
}

/// A communication backend driving this process's ranks. A backend that
/// does not apply some of nccl-tests' NCCL-only flags
/// ([`collbench_core::NcclOnly`]) lists them as its `IGNORES` (see
/// [`crate::cpu::CpuBackend::IGNORES`]), for the CLI to say so before it
/// opens it.
pub trait Backend {
    /// Header facts: name, library, devices of the local ranks.
    fn info(&self) -> BackendInfo;
    /// Ranks driven by this process.
    fn local_ranks(&self) -> usize;
    /// Total ranks in the job.
    fn world_size(&self) -> usize;
    /// Whether the backend can run this case at all; `Err` explains why not.
    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError>;
    /// Runs warmup and timed iterations.
    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError>;
    /// Fills inputs from the verification pattern with `seed`, poisons the
    /// outputs, runs the case once and returns the number of wrong
    /// elements over this process's ranks. `corrupt` is a test hook: flip
    /// one output element first, to prove the check catches it.
    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError>;
    /// Fills inputs from the verification pattern with `seed`, poisons the
    /// outputs, runs the case once and reads back each local rank's
    /// output (its `recv_count` elements, little-endian bytes), as
    /// [`Backend::check`] does before it counts: the general read-back
    /// that placement checks ([`crate::placement_check`]) inspect as they
    /// need. Backends that cannot read their outputs back say so (the
    /// default).
    fn outputs(&mut self, case: &CaseSpec, seed: u64) -> Result<Vec<Vec<u8>>, BackendError> {
        let _ = (case, seed);
        Err(BackendError::Unsupported(
            "reading outputs back is not supported by this backend".into(),
        ))
    }
    /// Runs the case once, untimed, and says what the library ran for it on
    /// this process's ranks (NCCL: algorithm, protocol and channels per
    /// kernel). `Ok(None)`: this backend cannot say (the default).
    fn explain(&mut self, case: &CaseSpec) -> Result<Option<Explanation>, BackendError> {
        let _ = case;
        Ok(None)
    }
    /// The path NCCL took for this process's ranks, from its own lines;
    /// `None` where the backend does not use NCCL or could not capture them
    /// (the default).
    fn nccl_path(&mut self) -> Option<collbench_core::nccl_path::NcclPath> {
        None
    }

    /// GPU memory taken so far (`-M 1`); `None` where the backend has no
    /// GPU memory to report (the default).
    fn memory_usage(&mut self) -> Option<MemoryUsage> {
        None
    }
    /// Where this backend keeps what the setters below are told, if it
    /// keeps it as told: the setters' defaults then store into it. `None`
    /// (the default): they refuse `-u` and alltoallv and ignore the watch.
    fn settings(&mut self) -> Option<&mut BackendSettings> {
        None
    }
    /// Misaligns every buffer by this many elements from now on (`-u`), to
    /// measure unaligned transfers. Backends that cannot say so (the
    /// default, unless [`Backend::settings`] keeps it).
    fn set_unalign(&mut self, elements: u64) -> Result<(), BackendError> {
        match self.settings() {
            Some(settings) => {
                settings.unalign = elements;
                Ok(())
            }
            None if elements == 0 => Ok(()),
            None => Err(BackendError::Unsupported(
                "-u (unaligned buffers) is not supported by this backend".into(),
            )),
        }
    }
    /// Sets who sends how much to whom in alltoallv, before any alltoallv
    /// case runs. Backends without alltoallv say so (the runner then skips
    /// alltoallv with a note): the default, unless [`Backend::settings`]
    /// keeps it.
    fn set_traffic(&mut self, traffic: &Traffic) -> Result<(), BackendError> {
        let Some(settings) = self.settings() else {
            return Err(BackendError::Unsupported(
                "alltoallv is not supported by this backend yet".into(),
            ));
        };
        settings.traffic = traffic.clone();
        Ok(())
    }
    /// Where to publish progress and learn that the job has stopped (see
    /// [`crate::watch`]): from now on the timed loop calls
    /// [`Watch::at`](crate::watch::Watch::at) after each call, and long
    /// waits give up once [`Watch::is_stopped`](crate::watch::Watch::is_stopped)
    /// (returning any error: the runner reports the stop's reason).
    /// Default: kept in [`Backend::settings`], or else ignored (the runner
    /// still publishes between cases).
    fn set_watch(&mut self, watch: Arc<crate::watch::Watch>) {
        if let Some(settings) = self.settings() {
            settings.watch = Some(watch);
        }
    }
    /// A backend over this job's processes that share `group` (host
    /// tests: each host pair of a round is a group), for cases that run on
    /// those processes alone, side by side with the other groups. Every
    /// process of the job calls it at the same step (it may talk over
    /// `control`); `None`: this process sits the round out and gets
    /// `Ok(None)`. Backends that cannot say so (the default).
    fn group(
        &mut self,
        control: &dyn collbench_core::Bootstrap,
        group: Option<u32>,
    ) -> Result<Option<Box<dyn Backend>>, BackendError> {
        let _ = (control, group);
        Err(BackendError::Unsupported(
            "this backend cannot run tests on a group of the job's processes".into(),
        ))
    }
    /// A backend over some of this process's ranks (global rank numbers),
    /// renumbered 0.., for localisation tests such as pairwise sendrecv.
    /// Backends that cannot split say so.
    fn subset(&self, ranks: &[usize]) -> Result<Box<dyn Backend>, BackendError> {
        let _ = ranks;
        Err(BackendError::Unsupported(
            "this backend cannot run tests on a subset of its ranks".into(),
        ))
    }
}
