//! The measuring half of a placement extension
//! (`collbench_core::extension`): a check the runner runs on every
//! placement after the `-c` passes, through the backend's general
//! operations ([`Backend::outputs`], ...), writing its field of this
//! process's share of the row. The plan carries the checks a run asked
//! for; the runner calls them in order and `combine` merges the shares
//! through the core extension, so neither names any check.

use crate::backend::{Backend, BackendError, CaseSpec};
use collbench_core::record::{Placement, RunSettings};
use std::fmt::Debug;

/// Where a placement check runs: the input's seed and the global rank of
/// this process's first local rank.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// The seed of the verification pattern's input (the first `-c`
    /// pass's).
    pub seed: u64,
    /// Global rank of this process's first rank.
    pub first_rank: usize,
}

/// One check per placement, as the plan asked for it.
pub trait PlacementCheck: Debug + Send + Sync {
    /// Runs the check of `case` on this process's ranks and writes its
    /// share into `share` (the field its core extension owns).
    fn measure(
        &self,
        backend: &mut dyn Backend,
        case: &CaseSpec,
        at: Site,
        share: &mut Placement,
    ) -> Result<(), BackendError>;
    /// Writes its settings into the record's.
    fn settings(&self, settings: &mut RunSettings);
}
