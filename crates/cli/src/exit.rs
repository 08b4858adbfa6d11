//! One mapping from failures to exit codes, documented in the README.

/// Exit codes of `collbench run` (and the aliases).
pub mod code {
    /// Everything ran and every checked element was right.
    pub const OK: i32 = 0;
    /// Some results were wrong (#wrong > 0).
    pub const WRONG: i32 = 1;
    /// Bad command line or input: nothing ran.
    pub const USAGE: i32 = 2;
    /// A peer process failed, or the job could not be assembled.
    pub const LAUNCH: i32 = 3;
    /// The backend or its library failed (missing library, CUDA/NCCL error,
    /// out of memory).
    pub const BACKEND: i32 = 4;
    /// An operation did not finish within the timeout.
    pub const TIMEOUT: i32 = 5;
    /// `report`: the report was written, but files in a folder were skipped
    /// (each listed on stderr); `--strict` makes them an error (2) instead.
    pub const SKIPPED: i32 = 6;
}

/// A failure that ends the program with `code` after printing `message`
/// as one line on stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: code::USAGE,
            message: message.into(),
        }
    }
}

impl From<collbench_runner::RunError> for Failure {
    fn from(e: collbench_runner::RunError) -> Failure {
        use collbench_runner::{BackendError, RunError};
        let code = match &e {
            RunError::Plan(_) => code::USAGE,
            RunError::Control(_) => code::LAUNCH,
            RunError::Backend(BackendError::Timeout(_)) => code::TIMEOUT,
            RunError::Backend(_) => code::BACKEND,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<collbench_launch::LaunchError> for Failure {
    fn from(e: collbench_launch::LaunchError) -> Failure {
        Failure {
            code: code::LAUNCH,
            message: e.to_string(),
        }
    }
}
