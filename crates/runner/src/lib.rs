//! collbench-runner: turns a [`Plan`] into a [`collbench_core::Record`] by
//! driving a [`Backend`] on every local rank, timing and verifying each
//! case, and combining per-rank results across processes.
//!
//! Not for: printing (see collbench-output) or knowing any particular
//! library: backends live behind the [`Backend`] trait. The built-in
//! [`cpu::CpuBackend`] runs ranks as threads of this process.
//!
//! While a run goes, a [`watchdog`] thread carries where this process's
//! ranks are ([`watch::Watch`]) to the control plane and stops the run
//! when the job has failed or, on rank 0, when a collective has made no
//! progress for the deadline (naming the ranks behind in one line).

pub mod arrival;
mod auto_iters;
pub mod backend;
pub mod bitwise;
pub mod case_names;
mod combine;
pub mod cpu;
mod error;
mod gather;
pub mod host_buffers;
pub mod memory;
pub mod placement_check;
pub mod plan;
pub mod run;
pub mod setup_guard;
pub mod shortfall;
pub mod timing;
pub mod watch;
pub mod watchdog;

pub use backend::{
    Backend, BackendError, BackendInfo, BackendSettings, CaseSpec, Measurement, MemoryUsage,
};
pub use placement_check::{PlacementCheck, Site};
pub use plan::{Average, Checks, Plan, RootSel};
pub use run::{PlanError, RunError, RunObserver, Runner};
pub use shortfall::Shortfall;
pub use timing::{Blocking, Graph, Timing};
pub use watch::{Fault, FaultKind, Stop, Watch};
pub use watchdog::Watchdog;
