//! What happens to a log before and after its parser: clean-up of launcher
//! prefixes and line ends ([`clean()`]), data-quality checks on the parsed
//! records ([`quality`]), which files the inputs name ([`walk`]), and
//! reading folders where some files are not logs ([`read_paths`]).

pub mod clean;
pub mod fault;
pub mod identity;
pub mod parsed;
pub mod quality;
pub mod scan;
pub mod total;
pub mod walk;

pub use clean::{clean, Cleaned, Stream};
pub use fault::Fault;
pub use parsed::{Parsed, Skipped, Warning};
pub use walk::{FileId, InputFile, InputSet};

use crate::parse::{read_file_with, FileError, Format, Strictness};
use collbench_core::Record;
use std::path::PathBuf;

/// Everything read from the command's inputs, and the files left out.
#[derive(Debug, Default)]
pub struct Inputs {
    pub parsed: Parsed,
    /// One line per file of a folder that was skipped: `PATH: why`.
    pub skipped: Vec<String>,
    /// Paths that led to a file or folder read already (read once).
    pub repeated: Vec<PathBuf>,
}

/// The most lines of one kind (files skipped, warnings) said one by one;
/// the rest are counted in one line (a folder of junk, or a log with a
/// warning on every row, once flooded the terminal).
pub const MAX_LINES: usize = 5;

impl Inputs {
    /// The lines for people about these inputs, each to be prefixed by
    /// the command's name: files skipped and warnings, [`MAX_LINES`] of
    /// each and a count of the rest, and one line for paths read once.
    pub fn lines_for_people(&self) -> Vec<String> {
        let mut out = capped(
            self.skipped.iter().map(|s| format!("skipped {s}")),
            "file(s) skipped",
        );
        out.extend(capped(
            self.parsed.skipped.iter().map(|s| s.to_string()),
            "file(s) with lines skipped",
        ));
        out.extend(capped(
            self.parsed.warnings.iter().map(|w| format!("warning: {w}")),
            "warning(s)",
        ));
        if let Some(first) = self.repeated.first() {
            out.push(format!(
                "read once: {} path(s) lead to a file or folder read already (a link, or named twice), first {}",
                self.repeated.len(),
                first.display()
            ));
        }
        out
    }

    /// The "Data quality" section of a Markdown report: files skipped,
    /// warnings, and figures converted from other units. Empty when there
    /// is nothing to say.
    pub fn quality_markdown(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        lines.extend(self.skipped.iter().map(|s| format!("- skipped {s}")));
        lines.extend(self.parsed.skipped.iter().map(|s| format!("- {s}")));
        lines.extend(self.parsed.warnings.iter().map(|w| format!("- {w}")));
        for (r, u) in self.parsed.records.iter().zip(&self.parsed.units) {
            if u.is_default() {
                continue;
            }
            let name = r.origin.as_deref().unwrap_or(&r.source);
            lines.push(format!(
                "- {name}: printed times in {} and bandwidths in {}; converted to µs and GB/s here",
                u.time, u.bandwidth
            ));
        }
        if lines.is_empty() {
            return String::new();
        }
        format!("\n## Data quality\n\n{}\n", lines.join("\n"))
    }
}

/// What to do when `report`'s inputs are over a total bound.
const REPORT_FIX: &str = "report on fewer files at a time, or split the folder";

/// Reads files and folders ([`InputSet::walk`]: a folder contributes
/// every regular file under it, each file is read once). A file of a
/// folder that cannot be read or parsed is listed in [`Inputs::skipped`]
/// and left out, or with `strict` ends the read with its error. A file
/// named directly must parse. Lines a reader cannot place are skipped and
/// counted ([`Parsed::skipped`]), or with `strict` refuse their file.
pub fn read_paths(
    paths: &[PathBuf],
    format: Option<Format>,
    strict: bool,
) -> Result<Inputs, FileError> {
    let set = InputSet::walk(paths)?;
    total::check(&[("", &set)], REPORT_FIX)?;
    let mut out = Inputs {
        skipped: set.skipped,
        repeated: set.repeated,
        ..Inputs::default()
    };
    let strictness = if strict {
        Strictness::Refuse
    } else {
        Strictness::Skip
    };
    let mut rows = total::Rows::default();
    for file in &set.files {
        match read_file_with(&file.path, format, strictness) {
            Ok(p) => {
                rows.add(&file.path, &p.records, REPORT_FIX)?;
                out.parsed.append(p)
            }
            Err(e) if strict || !file.in_folder => return Err(e),
            Err(e) => out.skipped.push(e.to_string()),
        }
    }
    if strict {
        if let Some(first) = out.skipped.first() {
            return Err(FileError::LeftOut {
                line: first.clone(),
            });
        }
    }
    Ok(out)
}

/// Parses files and directories (see [`read_paths`]); files in a
/// directory that cannot be read are skipped, files named directly must
/// parse. Warnings and skipped files are dropped.
pub fn parse_paths(paths: &[PathBuf], format: Option<Format>) -> Result<Vec<Record>, FileError> {
    read_paths(paths, format, false).map(|i| i.parsed.records)
}

/// The first [`MAX_LINES`] of `lines`, then `... and N more WHAT`.
fn capped(lines: impl ExactSizeIterator<Item = String>, what: &str) -> Vec<String> {
    let n = lines.len();
    let mut out: Vec<String> = lines.take(MAX_LINES).collect();
    if n > MAX_LINES {
        out.push(format!("... and {} more {what}", n - MAX_LINES));
    }
    out
}
