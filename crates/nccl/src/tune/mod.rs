//! `collbench tune` on NCCL: the measurer the search in `collbench-tune`
//! drives, and the communicator configuration it needs.
//!
//! - [`config`]: what a candidate sets in `ncclConfig_t` (channel
//!   count, CTA policy).
//! - [`measure`]: [`NcclMeasurer`], one [`crate::NcclBackend`] per
//!   communicator a candidate needs, the tuner plugin's override for
//!   algorithm/protocol candidates.
//!
//! How each knob reaches NCCL, and why, is docs/tune.md section 1.

pub mod config;
pub mod measure;

pub use config::CommConfig;
pub use measure::NcclMeasurer;
