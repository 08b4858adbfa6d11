//! How a `tune` job fails, as a type: the CLI maps each variant to its
//! exit code (`cli/src/exit.rs`); the words are for people only.

use collbench_core::PeerFailure;

/// Why `tune` ended without a report (a report that ends early is
/// [`crate::End`], not an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TuneError {
    /// Nothing ran: a flag, or nothing to tune with (the user's own tuner
    /// plugin, a backend without NCCL).
    #[error("{0}")]
    Refused(String),
    /// A process of the job failed, or the processes disagree (not the
    /// same collbench everywhere).
    #[error("{0}")]
    Peer(String),
    /// The setup failed (NCCL, child processes, ports), or it took the
    /// whole budget.
    #[error("{0}")]
    Failed(String),
}

impl From<PeerFailure> for TuneError {
    fn from(f: PeerFailure) -> TuneError {
        TuneError::Peer(f.message)
    }
}
