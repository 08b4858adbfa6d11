//! How `doctor` fails, as a type. Its checks never fail: a check that
//! cannot look says so in its own line (SKIP, WARN or FAIL). What can
//! fail is the output around them.

/// Why `doctor` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// The checks could not be written as JSON (`--format json`).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
