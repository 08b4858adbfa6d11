//! How `check` (and `baselines`) fail, as a type: the CLI maps the kinds
//! to exit codes (`cli/src/exit.rs`: a stuck collective or a lost peer
//! keep `run`'s codes, a failed write to stdout is a usage error,
//! anything else means the check could not run); the words are for
//! people only, and read as they did when they were `anyhow` chains.

use collbench_core::read_limit::ReadLimitError;
use collbench_core::stdout::StdoutError;
use collbench_core::PeerFailure;
use collbench_runner::{BackendError, RunError};
use std::path::PathBuf;

/// Why `check` or `baselines` ended without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// `--pair-fraction` outside (0, 1): nothing ran.
    #[error("--pair-fraction must be between 0 and 1 (got {0}), e.g. 0.8")]
    PairFraction(f64),
    /// `--baseline NAME` (or `baselines show NAME`) names no built-in
    /// baseline.
    #[error(
        "unknown baseline '{name}': use one of {} (see `collbench baselines list`) or a .toml file",
        known.join(", ")
    )]
    UnknownBaseline {
        /// The name given.
        name: String,
        /// The built-in baselines' names, in listing order.
        known: Vec<String>,
    },
    /// A baseline file that cannot be opened or read (the system's words
    /// are its source).
    #[error("cannot read baseline file {file}: give a readable .toml file or a built-in name")]
    BaselineUnreadable {
        /// The file as named.
        file: String,
        /// Why it could not be read.
        source: ReadLimitError,
    },
    /// A baseline file that is read but cannot be one: larger than the
    /// limit, or not text.
    #[error("baseline file {0}")]
    BaselineFile(ReadLimitError),
    /// A baseline that is not TOML of the baseline format: the parser's
    /// first line (which names the key) and its last.
    #[error("baseline {origin}: {first} {detail} (format: docs/baselines.md)")]
    BaselineSyntax {
        /// The file, or `built-in baseline`.
        origin: String,
        /// The first line of the parser's message.
        first: String,
        /// The last line of the parser's message, trimmed.
        detail: String,
    },
    /// Something inside a baseline cannot be used: an `[[expect]]` entry
    /// (its op, data type, size or figures), the fractions, no entry at
    /// all, or an op given twice.
    #[error("{0}")]
    BaselineEntry(String),
    /// A baseline whose content is wrong, named by where it came from and
    /// its name; `problem` is what is wrong ([`CheckError::BaselineEntry`]).
    #[error("baseline {origin} ('{name}'): {problem}")]
    BaselineInvalid {
        /// The file, or `built-in baseline`.
        origin: String,
        /// The baseline's own name.
        name: String,
        /// What is wrong in it.
        problem: Box<CheckError>,
    },
    /// A built-in baseline of GPU systems judged on the CPU backend,
    /// whose rank threads would fail every line.
    #[error(
        "baseline '{name}' ({description}) does not apply to the CPU backend: use --baseline cpu-ci here, or run on the GPUs it describes"
    )]
    BaselineNotForCpu {
        /// The baseline's name.
        name: String,
        /// Its one line on the system.
        description: String,
    },
    /// A case of the battery failed to run: the backend or its library, a
    /// lost peer, or a collective stuck past the watchdog's deadline (the
    /// runner's error, as it is).
    #[error(transparent)]
    Run(#[from] RunError),
    /// Another process of the job failed or left while they exchanged
    /// results over the control plane.
    #[error(transparent)]
    Peer(#[from] PeerFailure),
    /// A process sent what this one cannot read (another collbench
    /// version?): what it was, and why.
    #[error("{0}")]
    Malformed(String),
    /// A figure or the JSON document could not be turned into JSON, or
    /// figures from another process could not be read back.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The host tests of a job of several processes did not run at all.
    #[error(transparent)]
    HostTestsSkipped(#[from] HostTestsSkipped),
    /// A pairwise test could not get the subset of ranks it tests.
    #[error("pairwise tests need a subset of ranks {ranks:?}: {error}")]
    Subset {
        /// The ranks of the subset.
        ranks: Vec<usize>,
        /// The backend's error.
        error: BackendError,
    },
    /// A pairwise sendrecv gave wrong results.
    #[error(
        "sendrecv between ranks {ranks:?} gave {wrong} wrong elements: the data path is broken there"
    )]
    PairWrong {
        /// The ranks tested.
        ranks: Vec<usize>,
        /// Wrong elements over both placements.
        wrong: u64,
    },
    /// The backend or the runner skipped a pairwise sendrecv.
    #[error("sendrecv on ranks {ranks:?}: {why}")]
    PairSkipped {
        /// The ranks tested.
        ranks: Vec<usize>,
        /// The runner's note.
        why: String,
    },
    /// Pairwise tests over the ranks of one process, run in a job of
    /// several (rank 0 has no figures of the others).
    #[error("pairwise tests run in one process only")]
    PairsNotLocal,
    /// `--json FILE` could not be written.
    #[error("cannot write --json {}: {error}; choose a writable path", path.display())]
    JsonUnwritable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// `--events FILE` could not be written.
    #[error("cannot write --events {}: {error}; choose a writable path (or - for stdout)", path.display())]
    EventsUnwritable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// `--prometheus FILE` names something a rename must not replace.
    #[error(
        "--prometheus {} is not a regular file ({what}): it is replaced by a rename on every run; name a regular file (or a new one)",
        path.display()
    )]
    MetricsNotAFile {
        /// The path.
        path: PathBuf,
        /// What is there, in words (`a symbolic link`).
        what: &'static str,
    },
    /// `--prometheus` names no file (`..`, `/`).
    #[error("--prometheus {}: not a file name", path.display())]
    MetricsNoFileName {
        /// The path.
        path: PathBuf,
    },
    /// The metrics file could not be written (or renamed into place).
    #[error(
        "cannot write metrics file {}: {error}; choose a writable folder (node_exporter's --collector.textfile.directory)",
        path.display()
    )]
    MetricsUnwritable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The verdict table could not be written to stdout.
    #[error(transparent)]
    Stdout(#[from] StdoutError),
}

/// Why the host tests did not run at all: `check` says so in one line
/// ("host tests skipped: ...") and names no host.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostTestsSkipped {
    /// Every process is on one host.
    #[error("all {processes} processes are on one host ({host}): nothing to test between hosts")]
    OneHost { processes: usize, host: String },
    /// The backend cannot run tests on a group of the job's processes.
    #[error("{0}")]
    GroupsUnsupported(String),
}

/// An error and its sources on one line, each after a colon: what
/// `anyhow` printed for `{:#}` (the notes of tests that were skipped).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out += &format!(": {c}");
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_reads_as_anyhows_alternate_form() {
        let e = CheckError::BaselineUnreadable {
            file: "b.toml".into(),
            source: ReadLimitError::Io {
                path: "b.toml".into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
            },
        };
        assert_eq!(
            chain(&e),
            "cannot read baseline file b.toml: give a readable .toml file or a built-in name: cannot read b.toml: gone: gone"
        );
        assert_eq!(
            chain(&CheckError::PairsNotLocal),
            "pairwise tests run in one process only"
        );
    }
}
