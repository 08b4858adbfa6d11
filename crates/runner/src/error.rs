//! Why a run stopped ([`RunError`]), and how it maps to and from the
//! job's failure ([`Stop`]) that the watchdog carries: its own file so
//! both the measuring loop and the iteration search name it without
//! importing each other.

use crate::backend::BackendError;
use crate::watch::Stop;
use collbench_core::alltoallv::TrafficError;
use collbench_core::size::SweepError;
use collbench_core::{FailureKind, PeerFailure};

/// Failures that stop a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan cannot run on this job; nothing was started.
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("control plane: {0}")]
    Control(String),
    /// A collective made no progress for the watchdog's deadline: the
    /// line naming the ranks behind (see `collbench_core::stuck`).
    #[error("{0}")]
    Stuck(String),
}

/// Why a plan cannot run on a job, found before anything runs. The words
/// name no flag (the plan may come from `run`'s flags, `check`'s battery
/// or `tune`); the CLI, which knows, names them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The sweep's sizes (smallest, largest, step).
    #[error(transparent)]
    Sweep(#[from] SweepError),
    /// alltoallv's traffic does not fit the job.
    #[error(transparent)]
    Traffic(#[from] TrafficError),
    /// A fixed root that is no rank of the job.
    #[error("root {root} is out of range for {world_size} ranks")]
    Root { root: usize, world_size: usize },
}

impl From<PeerFailure> for RunError {
    /// By the failure's kind, not its words.
    fn from(e: PeerFailure) -> RunError {
        match e.kind {
            FailureKind::Stuck => RunError::Stuck(e.message),
            FailureKind::Peer => RunError::Control(e.message),
        }
    }
}

impl RunError {
    /// The job's failure this error stands for (a stuck collective, a lost
    /// peer, a failed library call), as a stop; `None` for a plan that
    /// cannot run, where nothing was started.
    pub(crate) fn job_failure(&self) -> Option<Stop> {
        match self {
            RunError::Plan(_) => None,
            RunError::Stuck(line) | RunError::Backend(BackendError::Timeout(line)) => {
                Some(Stop::Stuck(line.clone()))
            }
            other => Some(Stop::Failed(other.to_string())),
        }
    }
}

impl From<&Stop> for RunError {
    fn from(stop: &Stop) -> RunError {
        match stop {
            Stop::Stuck(line) => RunError::Stuck(line.clone()),
            Stop::Failed(m) => RunError::Control(m.clone()),
        }
    }
}
