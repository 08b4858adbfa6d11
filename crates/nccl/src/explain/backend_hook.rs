//! The NCCL backend's side of `Backend::explain`: everything but the
//! launching itself, which stays in the backend.
//!
//! The backend installs the plugin before it creates its communicators
//! and, per case, calls [`explain_case`] with its local ranks and a closure
//! that launches the case once on every local GPU and waits for it. The
//! wiring, in `NcclBackend`:
//!
//! ```text
//! // field
//! explainer: crate::explain::Explainer,
//!
//! // NcclBackend::new, before the first ncclCommInitAll/ncclCommInitRank
//! // (NCCL opens its profiler plugin there); the first process of a job
//! // prints the one-line notice for all:
//! let explainer = if control.rank() == 0 {
//!     crate::explain::Explainer::install()
//! } else {
//!     crate::explain::Explainer::install_quiet()
//! };
//!
//! // impl Backend for NcclBackend
//! fn explain(&mut self, case: &CaseSpec) -> Result<Option<Explanation>, BackendError> {
//!     self.comms.ensure_usable()?;
//!     let ops = self.prepare(case, case.size_bytes())?;
//!     let ranks = crate::explain::backend_hook::expected_ranks(
//!         self.comms.gpus.iter().map(|g| (g.rank, g.global_rank)),
//!     );
//!     let explainer = self.explainer.clone();
//!     let max = case.size_bytes();
//!     let (comms, _, _, run) = self.parts();
//!     let result = crate::explain::backend_hook::explain_case(&explainer, &ranks, || {
//!         run.launch(comms, case, 0, max, &ops)?;
//!         comms.wait_all()
//!     });
//!     self.issue.free_ops(&self.comms, case, &ops);
//!     result
//! }
//! ```

use super::plugin::Explainer;
use super::rows::ExpectedRank;
use collbench_core::Explanation;
use collbench_runner::BackendError;

/// Runs `run_once` with NCCL's profiler events switched on and returns what
/// NCCL reported for this process's `ranks`. When NCCL cannot explain (the
/// user's own NCCL_PROFILER_PLUGIN, an NCCL without the interface), the
/// case is not run and the explanation says why. Errors of `run_once` are
/// returned as they are; recording is off again in every case.
pub fn explain_case(
    explainer: &Explainer,
    ranks: &[ExpectedRank],
    run_once: impl FnOnce() -> Result<(), BackendError>,
) -> Result<Option<Explanation>, BackendError> {
    explainer.record_case(ranks, run_once).map(Some)
}

/// `ranks` for [`explain_case`] from (rank in the communicator, rank in the
/// job) pairs of the local GPUs.
pub fn expected_ranks(ranks: impl IntoIterator<Item = (usize, usize)>) -> Vec<ExpectedRank> {
    ranks
        .into_iter()
        .map(|(comm_rank, global_rank)| ExpectedRank {
            comm_rank: comm_rank as i64,
            global_rank: global_rank as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unavailable_explainer_does_not_run_the_case() {
        let ex = Explainer::off("NCCL_PROFILER_PLUGIN is set");
        let r = explain_case(&ex, &expected_ranks([(0, 0), (1, 1)]), || {
            Err(BackendError::Library("must not run".into()))
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            r.unavailable.as_deref(),
            Some("NCCL_PROFILER_PLUGIN is set")
        );
    }

    #[test]
    fn ranks_map_to_expected() {
        let r = expected_ranks([(1, 5)]);
        assert_eq!(
            r,
            vec![ExpectedRank {
                comm_rank: 1,
                global_rank: 5
            }]
        );
    }
}
