//! collbench-nccl: the CUDA + NCCL backend (work in progress).

pub mod loader;

use collbench_launch::Control;
use collbench_runner::BackendError;
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
    /// Buffer registration mode (`-R`).
    pub register: u32,
    /// Seconds before a stuck operation aborts the communicator (`-T`); 0 = never.
    pub timeout_s: u64,
    /// Use the default (null) stream (`-y`).
    pub stream_null: bool,
}

/// Number of CUDA GPUs visible, or why none can be used.
pub fn gpu_count() -> Result<usize, String> {
    Err("no CUDA driver found (libcuda.so.1 is not loadable)".into())
}

/// The NCCL backend.
pub struct NcclBackend;

impl NcclBackend {
    /// Opens CUDA and NCCL and creates the communicator(s).
    pub fn new(_opts: &NcclOptions, _control: &Control) -> Result<NcclBackend, BackendError> {
        Err(BackendError::Library(
            "the NCCL backend needs a CUDA driver and GPUs: none found here; use --backend cpu"
                .into(),
        ))
    }
}

impl collbench_runner::Backend for NcclBackend {
    fn info(&self) -> collbench_runner::BackendInfo {
        collbench_runner::BackendInfo::default()
    }
    fn local_ranks(&self) -> usize {
        0
    }
    fn first_rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        0
    }
    fn supports(&self, _case: &collbench_runner::CaseSpec) -> Result<(), BackendError> {
        Err(BackendError::Unsupported("NCCL backend not built".into()))
    }
    fn time(
        &mut self,
        _c: &collbench_runner::CaseSpec,
        _t: &collbench_runner::Timing,
    ) -> Result<collbench_runner::Measurement, BackendError> {
        Err(BackendError::Unsupported("NCCL backend not built".into()))
    }
    fn check(
        &mut self,
        _c: &collbench_runner::CaseSpec,
        _s: u64,
        _x: bool,
    ) -> Result<u64, BackendError> {
        Err(BackendError::Unsupported("NCCL backend not built".into()))
    }
}
