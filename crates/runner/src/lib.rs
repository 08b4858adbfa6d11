//! collbench-runner: turns a [`Plan`] into a [`collbench_core::Record`] by
//! driving a [`Backend`] on every local rank, timing and verifying each
//! case, and combining per-rank results across processes.
//!
//! Not for: printing (see collbench-output) or knowing any particular
//! library: backends live behind the [`Backend`] trait. The built-in
//! [`cpu::CpuBackend`] runs ranks as threads of this process.

mod auto_iters;
pub mod backend;
pub mod cpu;
pub mod host_buffers;
pub mod memory;
pub mod plan;
pub mod run;

pub use backend::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, MemoryUsage, Timing};
pub use plan::{Average, Plan, RootSel};
pub use run::{RunError, RunObserver, Runner};
