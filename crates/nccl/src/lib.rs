//! collbench-nccl: collectives on CUDA GPUs through NCCL.
//!
//! The CUDA driver is reached through cudarc's run-time loaded bindings and
//! NCCL is opened by path ([`loader`]), so the same binary starts on
//! machines without either and falls back to the CPU backend there.
//!
//! Layers, bottom up: [`ffi`] (NCCL's entry points as loaded), [`api`] and
//! [`cuda`] (one safe method per library call; all `unsafe` lives there
//! and in the launches of [`kernels`] (verification), [`device_api`]
//! (`-D N`) and [`stamps`] (arrival timing's GPU clock)), [`group`]
//! (groups that always close),
//! [`error`] (typed errors that become `BackendError` with `?`), and
//! [`backend`] (the benchmark itself, safe Rust).

mod affinity;
pub mod alltoallv;
pub mod api;
pub mod backend;
pub mod cuda;
mod dev_comm;
pub mod device_api;
mod embedded;
pub mod error;
pub mod explain;
pub mod ffi;
pub mod gpu_choice;
pub mod group;
pub mod kernels;
pub mod loader;
pub mod path_capture;
pub mod split;
pub mod stamps;
pub mod tune;
pub mod tuner;

pub use affinity::{unpinned, ChildMask};
pub use backend::NcclBackend;
pub use error::{CudaError, NcclError};

use std::path::PathBuf;

/// Options of the NCCL backend.
#[derive(Debug, Clone, Default)]
pub struct NcclOptions {
    /// `--nccl-lib`: explicit path to libnccl.so.2.
    pub lib_path: Option<PathBuf>,
    /// GPUs driven by this process (`-g`); `None` = the launcher default.
    pub gpus_per_process: Option<usize>,
    /// Local rank of this process on its host.
    pub local_rank: usize,
    /// nccl-tests' flags that act on NCCL itself (`-R`, `-x`, `-D`, `-V`
    /// and the others), as given: the backend applies them.
    pub nccl_only: collbench_core::NcclOnlyFlags,
    /// Seconds before a stuck operation aborts the communicator (`-T`); 0 = never.
    pub timeout_s: u64,
    /// Use the default (null) stream (`-y`).
    pub stream_null: bool,
    /// This process's host name, as the launcher reported it.
    pub host: String,
    /// Install the profiler plugin so that `Backend::explain` can say what
    /// NCCL ran (before the first communicator; off: NCCL never sees it).
    pub explain: bool,
    /// Test hook (`--test-late-entry`): the job's rank `rank` reaches
    /// every timed collective `delay` late on its stream
    /// ([`stamps::Stamps::spin`]).
    pub late_entry: Option<collbench_runner::arrival::LateEntry>,
}

/// Number of CUDA GPUs visible, or why none can be used.
pub fn gpu_count() -> Result<usize, CudaError> {
    cuda::device_count()
}
