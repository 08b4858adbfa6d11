//! How `collbench report` and `collbench compare` fail, as a type: one
//! variant per kind of failure, each reading as the one line the CLI
//! prints. A cause already quoted in a variant's line (an I/O or JSON
//! error) is not also its `source`, so a printer that follows the chain
//! does not say it twice.

use crate::parse::FileError;
use collbench_core::read_limit::ReadLimitError;
use std::path::PathBuf;

/// Why `report` or `compare` ended without its output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input file could not be read, or is not a log collbench can
    /// read (its own type names the file, the line and why).
    #[error(transparent)]
    Input(#[from] FileError),
    /// `--threshold` is not a percentage from 0 to below 100.
    #[error("--threshold must be a percentage from 0 to below 100")]
    Threshold,
    /// `--matrix` without an HTML report to draw the heatmap in.
    #[error("--matrix draws a heatmap, which only the HTML report has: give -o FILE.html")]
    MatrixNeedsHtml,
    /// The inputs hold no result (and no `--matrix` was given).
    #[error("no benchmark results found in the inputs")]
    NoResults,
    /// `-o` names a file that is neither Markdown nor HTML.
    #[error("{}: unknown report type (use a .md or .html file name)", .path.display())]
    UnknownReportType {
        /// The `-o` file.
        path: PathBuf,
    },
    /// A `--matrix` file could not be read (missing, too large, not text).
    #[error("--matrix: {error}")]
    MatrixUnreadable {
        /// Why, naming the file.
        error: ReadLimitError,
    },
    /// A `--matrix` file is not JSON of `collbench check --json`.
    #[error("{}: not check JSON: {error}", .path.display())]
    NotCheckJson {
        /// The `--matrix` file.
        path: PathBuf,
        /// serde's words.
        error: serde_json::Error,
    },
    /// A check JSON without a pairwise or host-pair matrix.
    #[error("{}: no localization.matrix or hosts.verdict.matrix: pass the JSON of a `collbench check --json FILE` run that made pairwise or host tests", .path.display())]
    NoMatrix {
        /// The `--matrix` file.
        path: PathBuf,
    },
    /// A check JSON whose matrix has not one figure per pair of labels.
    #[error("{}: localization.matrix.gbps is not {labels} x {labels}", .path.display())]
    MatrixNotSquare {
        /// The `--matrix` file.
        path: PathBuf,
        /// How many labels the matrix names.
        labels: usize,
    },
    /// The report or the HTML page could not be written.
    #[error("{}: cannot write: {error}", .path.display())]
    Write {
        /// The file written to.
        path: PathBuf,
        /// The system's words.
        error: std::io::Error,
    },
}
