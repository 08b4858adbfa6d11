//! How `collbench gen` fails, as a type: a value refused before anything
//! is written, a launch file that could not be rendered, or one that
//! could not be written. Each reads as the one line the CLI prints; a
//! cause already quoted in a variant's line (an I/O error) is not also
//! its `source`, so a printer that follows the chain does not say it
//! twice.

use std::path::PathBuf;

/// Why `collbench gen` wrote nothing (or could not finish writing).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value breaks its rule, or two flags disagree; the line
    /// names the flag, the value and the rule
    /// (`invalid --nodes 0: must be at least 1`).
    #[error("{0}")]
    Invalid(String),
    /// A manifest could not be serialised as YAML.
    #[error(transparent)]
    Yaml(#[from] serde_norway::Error),
    /// Text could not be formatted into the launch file.
    #[error(transparent)]
    Format(#[from] std::fmt::Error),
    /// The `-o` file could not be written.
    #[error("cannot write {}: {error}", .path.display())]
    Write {
        /// The `-o` file.
        path: PathBuf,
        /// The system's words.
        error: std::io::Error,
    },
    /// The written Slurm script could not be made executable.
    #[error("cannot make {} executable: {error}", .path.display())]
    Executable {
        /// The `-o` file.
        path: PathBuf,
        /// The system's words.
        error: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
