//! Pair tests that gave no figure, as types: why each failed (why the
//! host tests as a whole did not run is [`HostTestsSkipped`], one of
//! `check`'s errors). A failed test is never a slow figure: the verdict
//! judges only the tests that ran, and the failures are listed beside it.

use crate::error::HostTestsSkipped;
use crate::hosts::{PairResult, Round};
use collbench_runner::BackendError;
use serde::{Deserialize, Serialize};

/// Why a pair test gave no figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PairFailure {
    /// The backend cannot run tests on a group of the job's processes at
    /// all: no pair test can run (the host tests are skipped).
    #[error("{reason}")]
    GroupUnsupported { reason: String },
    /// A process could not join its pair's group (its backend's error).
    #[error("{reason}")]
    Join { reason: String },
    /// The test ran and failed: an op errored, was skipped or gave wrong
    /// results (each said with the process's rank).
    #[error("{reason}")]
    Test { reason: String },
    /// A process tested at another size than rank 0 (a bug).
    #[error("a process tested at {size_bytes} bytes, rank 0 at {rank0_bytes} (a bug: the processes must agree on the size)")]
    SizeMismatch { size_bytes: u64, rank0_bytes: u64 },
    /// No process reported for the pair (cannot happen in a healthy job).
    #[error("no process reported for this pair")]
    Unreported,
}

impl PairFailure {
    /// How joining a group failed: a backend that cannot form groups at
    /// all, or this process's error.
    pub fn joining(e: BackendError) -> PairFailure {
        match e {
            BackendError::Unsupported(reason) => PairFailure::GroupUnsupported { reason },
            e => PairFailure::Join {
                reason: e.to_string(),
            },
        }
    }
}

/// A pair test that failed: its hosts, its round, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedPair {
    pub a: usize,
    pub b: usize,
    pub round: usize,
    pub failure: PairFailure,
}

/// One pair's outcome in a round: its figures, or why it has none.
pub type PairOutcome = Result<(f64, f64), PairFailure>;

/// Every pair test of the host tests so far, sorted by what it gave.
#[derive(Debug, Default)]
pub struct Tally {
    /// sendrecv busbw of the tests that ran (what the verdict judges).
    pub sendrecv: Vec<PairResult>,
    /// all_reduce busbw of the tests that ran.
    pub all_reduce: Vec<PairResult>,
    pub failures: Vec<FailedPair>,
}

impl Tally {
    /// Adds a round's outcomes (one per pair of `round`) and returns the
    /// sendrecv figures of the tests that ran, for the verdict. A backend
    /// that cannot form groups ends the host tests: nothing could run.
    pub fn add(
        &mut self,
        round: &Round,
        outcomes: &[PairOutcome],
    ) -> Result<Vec<PairResult>, HostTestsSkipped> {
        if let Some(PairFailure::GroupUnsupported { reason }) = outcomes
            .iter()
            .filter_map(|o| o.as_ref().err())
            .find(|f| matches!(f, PairFailure::GroupUnsupported { .. }))
        {
            return Err(HostTestsSkipped::GroupsUnsupported(reason.clone()));
        }
        let mut judged = Vec::new();
        for (&(a, b), outcome) in round.pairs.iter().zip(outcomes) {
            let result = |busbw_gbps| PairResult {
                a,
                b,
                round: round.index,
                busbw_gbps,
            };
            match outcome {
                Ok((sendrecv_gbps, all_reduce_gbps)) => {
                    judged.push(result(*sendrecv_gbps));
                    self.all_reduce.push(result(*all_reduce_gbps));
                }
                Err(failure) => self.failures.push(FailedPair {
                    a,
                    b,
                    round: round.index,
                    failure: failure.clone(),
                }),
            }
        }
        self.sendrecv.extend(judged.iter().copied());
        Ok(judged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(pairs: &[(usize, usize)]) -> Round {
        Round {
            index: 0,
            pairs: pairs.to_vec(),
        }
    }

    #[test]
    fn a_failed_test_is_listed_and_never_judged() {
        let mut tally = Tally::default();
        let failed = PairFailure::Test {
            reason: "process 1: sendrecv: MPI_Sendrecv failed".into(),
        };
        let judged = tally
            .add(
                &round(&[(0, 1), (2, 3)]),
                &[Ok((2.0, 1.0)), Err(failed.clone())],
            )
            .unwrap();
        assert_eq!(judged.len(), 1);
        assert_eq!(
            (judged[0].a, judged[0].b, judged[0].busbw_gbps),
            (0, 1, 2.0)
        );
        assert_eq!(tally.sendrecv, judged);
        assert_eq!(tally.all_reduce.len(), 1);
        assert_eq!(
            tally.failures,
            [FailedPair {
                a: 2,
                b: 3,
                round: 0,
                failure: failed
            }]
        );
    }

    #[test]
    fn a_backend_without_groups_skips_the_host_tests() {
        let mut tally = Tally::default();
        let no_groups = PairFailure::joining(BackendError::Unsupported("no groups here".into()));
        let e = tally
            .add(&round(&[(0, 1), (2, 3)]), &[Err(no_groups), Ok((2.0, 1.0))])
            .unwrap_err();
        assert_eq!(
            e,
            HostTestsSkipped::GroupsUnsupported("no groups here".into())
        );
        assert!(tally.sendrecv.is_empty() && tally.failures.is_empty());
        // Any other error joining is one pair's failure.
        let lib = PairFailure::joining(BackendError::Library("MPI_Comm_split failed".into()));
        assert!(matches!(lib, PairFailure::Join { .. }));
    }
}
