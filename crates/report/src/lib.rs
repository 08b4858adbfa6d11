//! collbench-report: reads benchmark logs of many tools into
//! [`collbench_core::Record`]s, writes Markdown and HTML reports with SVG
//! charts, and compares two runs for regressions.
//!
//! * [`parse`]: one module per log format, plus detection; entry points
//!   [`parse::parse_file`] and [`input::parse_paths`].
//! * [`render`]: Markdown and HTML writers, [`render::charts`] (plotters SVG,
//!   including [`heatmap_svg`] for bandwidth matrices).
//! * [`input`]: clean-up before parsing (launcher prefixes, line ends,
//!   colour), data-quality checks after it, folders with stray files.
//! * [`metrics`]: which figures mean something for which test.
//! * [`compare`]: NEW vs BASE with a documented noise rule;
//!   [`compare_sides`] names both sides and warns where they differ;
//!   [`compare_explain`] names changes in what NCCL ran; [`compare_out`]
//!   prints it as text or JSON, [`render::compare_html`] as an HTML page.
//! * [`units`]: collbench-output's number formatter, re-exported.
//!
//! Not for: running benchmarks or judging them against baselines (`check`).

#![forbid(unsafe_code)]

pub mod compare;
pub mod compare_explain;
pub mod compare_out;
pub mod compare_sides;
pub mod error;
pub mod input;
pub mod parse;
pub mod render;
pub use collbench_output::{metrics, units};

pub use compare::command::{compare_main, CompareOptions, CompareOutcome};
pub use compare_out::CompareFormat;
pub use error::Error;
pub use input::{parse_paths, read_paths, Inputs, Parsed, Warning};
pub use parse::{parse_file, parse_str, FileError, Format, ParseError};
pub use render::charts::heatmap_svg;

use collbench_core::diag;
use std::path::PathBuf;

/// What `collbench report` reads and writes (the CLI fills it from its
/// flags).
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Logs or directories of logs.
    pub inputs: Vec<PathBuf>,
    /// Output file: `.md` for Markdown, `.html` for a self-contained page
    /// with charts. Markdown on stdout when absent.
    pub output: Option<PathBuf>,
    /// Read every input as this format instead of detecting it.
    pub format: Option<Format>,
    /// `collbench check --json` outputs whose pairwise matrices the HTML
    /// report draws as heatmaps.
    pub matrix: Vec<PathBuf>,
    /// Fail when a file in a folder cannot be read as a log, or a log has
    /// a line its reader cannot place, instead of listing the file or
    /// skipping the line (counted in one line) and going on.
    pub strict: bool,
    /// The machine the logs ran on (`--topology`): records without a
    /// topology of their own get its ceilings, so the report shows "% of
    /// ceiling" for other tools' logs too.
    pub topology: Option<collbench_core::Topology>,
}

/// How `collbench report` went, for the CLI's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Every input was read.
    Complete,
    /// The report was written, but files of a folder were skipped (each
    /// listed on stderr with its reason).
    Skipped,
}

/// Reads the pairwise matrix of a `collbench check --json` file
/// (`localization.matrix`, a [`collbench_core::pairs::PairMatrix`]), or
/// its host-pair matrix (`hosts`, a job of several processes); untested
/// pairs become NaN, which the heatmap leaves blank.
pub fn load_check_matrix(path: &std::path::Path) -> Result<render::html::Matrix, Error> {
    // Bounded: a check JSON is some KiB; serde reads it whole.
    let limit = 16 << 20;
    let text = collbench_core::read_limit::read_to_string(path, limit, "a check JSON")
        .map_err(|error| Error::MatrixUnreadable { error })?;
    let file: collbench_core::pairs::CheckMatrixFile =
        serde_json::from_str(&text).map_err(|error| Error::NotCheckJson {
            path: path.to_path_buf(),
            error,
        })?;
    // One process: rank pairs; several: host pairs.
    let (m, what, cut) = match (file.localization, file.hosts) {
        (Some(l), _) => (l.matrix, "Pairwise sendrecv bandwidth", None),
        (None, Some(h)) => (
            h.to_matrix(),
            "Host-pair sendrecv bandwidth",
            h.verdict.threshold.map(|t| t.cut),
        ),
        (None, None) => {
            return Err(Error::NoMatrix {
                path: path.to_path_buf(),
            })
        }
    };
    if !m.is_square() {
        return Err(Error::MatrixNotSquare {
            path: path.to_path_buf(),
            labels: m.labels.len(),
        });
    }
    Ok(render::html::Matrix {
        title: format!("{what} ({})", path.display()),
        labels: m.labels,
        gbps: m
            .gbps
            .into_iter()
            .map(|row| row.into_iter().map(|c| c.unwrap_or(f64::NAN)).collect())
            .collect(),
        cut,
    })
}

/// Runs `collbench report`. Skipped files and data-quality warnings go to
/// [`collbench_core::diag`] (stderr), one line each, and into the report's
/// "Data quality" section. Returns the Markdown for stdout when there is no
/// `output` file.
pub fn report_main(args: &ReportOptions) -> Result<(ReportOutcome, Option<String>), Error> {
    let mut inputs = read_paths(&args.inputs, args.format, args.strict)?;
    if let Some(machine) = &args.topology {
        for r in &mut inputs.parsed.records {
            collbench_ceiling::annotate_described(r, machine);
        }
    }
    for line in inputs.lines_for_people() {
        diag::line(&format!("collbench report: {line}"));
    }
    let outcome = if inputs.skipped.is_empty() {
        ReportOutcome::Complete
    } else {
        ReportOutcome::Skipped
    };
    let records = &inputs.parsed.records;
    let ext = args
        .output
        .as_deref()
        .and_then(|p| p.extension())
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let html = matches!(ext.as_str(), "html" | "htm");
    if !args.matrix.is_empty() && !html {
        return Err(Error::MatrixNeedsHtml);
    }
    // A check's host matrix alone is a report (which host is slow); any
    // other report needs results.
    if records.is_empty() && args.matrix.is_empty() {
        return Err(Error::NoResults);
    }
    let quality = inputs.quality_markdown();
    let Some(path) = &args.output else {
        return Ok((outcome, Some(render::markdown::render(records) + &quality)));
    };
    let text = match ext.as_str() {
        "md" | "markdown" => render::markdown::render(records) + &quality,
        "html" | "htm" => {
            let matrices = args
                .matrix
                .iter()
                .map(|p| load_check_matrix(p))
                .collect::<Result<Vec<_>, Error>>()?;
            let page = render::html::render(records, &matrices);
            match page.rfind("</body>") {
                Some(at) if !quality.is_empty() => format!(
                    "{}<pre>{}</pre>\n{}",
                    &page[..at],
                    render::html::esc(&quality),
                    &page[at..]
                ),
                _ => page,
            }
        }
        _ => return Err(Error::UnknownReportType { path: path.clone() }),
    };
    std::fs::write(path, text).map_err(|error| Error::Write {
        path: path.clone(),
        error,
    })?;
    Ok((outcome, None))
}
