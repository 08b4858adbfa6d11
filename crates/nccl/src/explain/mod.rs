//! `--explain`: which algorithm, protocol and channel count NCCL used for
//! each case, as NCCL itself reports them through its profiler-plugin
//! interface (not guessed from a cost model).
//!
//! - [`plugin`]: the embedded plugin library, installed before the first
//!   communicator ([`Explainer::install`]) and switched on only around a
//!   separate, untimed run of each case.
//! - [`events`]: the records the plugin hands back.
//! - [`rows`]: events -> one case's [`collbench_core::Explanation`].
//! - [`backend_hook`]: what the NCCL backend calls from `Backend::explain`.

pub mod backend_hook;
pub mod events;
pub mod plugin;
pub mod rows;

pub use plugin::Explainer;
pub use rows::ExpectedRank;
