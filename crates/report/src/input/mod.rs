//! What happens to a log before and after its parser: clean-up of launcher
//! prefixes and line ends ([`clean()`]), data-quality checks on the parsed
//! records ([`quality`]), which files the inputs name ([`walk`]), and
//! reading folders where some files are not logs ([`read_paths`]).

pub mod clean;
pub mod fault;
pub mod quality;
pub mod walk;

pub use clean::{clean, Cleaned, Stream};
pub use fault::Fault;
pub use walk::{FileId, InputFile, InputSet};

use crate::parse::{read_file, FileError, Format, SourceUnits};
use collbench_core::Record;
use std::path::PathBuf;

/// A data-quality warning: the figures are kept, but something about them
/// needs the reader's eye (duplicates, a cut log, unchecked results...).
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// The file (and rank stream) it is about.
    pub origin: String,
    /// 1-based line; 0 when about the text as a whole.
    pub line: usize,
    pub message: String,
}

impl Warning {
    /// A warning about `line` of `origin`.
    pub fn new(origin: &str, line: usize, message: impl Into<String>) -> Warning {
        Warning {
            origin: origin.to_string(),
            line,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.origin, self.message),
            n => write!(f, "{}:{n}: {}", self.origin, self.message),
        }
    }
}

/// Records read from one text or many, with what was noticed on the way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub records: Vec<Record>,
    /// The units each record's figures were printed in (same order).
    pub units: Vec<SourceUnits>,
    pub warnings: Vec<Warning>,
    /// Failure signals (wrong results, crashes, a cut log), typed for a
    /// correctness gate; the warnings say the same for people.
    pub faults: Vec<Fault>,
}

impl Parsed {
    /// Appends `other`.
    pub fn append(&mut self, mut other: Parsed) {
        self.records.append(&mut other.records);
        self.units.append(&mut other.units);
        self.warnings.append(&mut other.warnings);
        self.faults.append(&mut other.faults);
    }

    /// Whether any warning says the log was cut ("partial").
    pub fn partial(&self) -> bool {
        self.warnings
            .iter()
            .any(|w| w.message.starts_with("partial"))
    }
}

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

/// Reads files and folders ([`InputSet::walk`]: a folder contributes
/// every regular file under it, each file is read once). A file of a
/// folder that cannot be read or parsed is listed in [`Inputs::skipped`]
/// and left out, or with `strict` ends the read with its error. A file
/// named directly must parse.
pub fn read_paths(
    paths: &[PathBuf],
    format: Option<Format>,
    strict: bool,
) -> Result<Inputs, FileError> {
    let set = InputSet::walk(paths)?;
    let mut out = Inputs {
        skipped: set.skipped,
        repeated: set.repeated,
        ..Inputs::default()
    };
    for file in &set.files {
        match read_file(&file.path, format) {
            Ok(p) => out.parsed.append(p),
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

/// The first [`MAX_LINES`] of `lines`, then `... and N more WHAT`.
fn capped(lines: impl ExactSizeIterator<Item = String>, what: &str) -> Vec<String> {
    let n = lines.len();
    let mut out: Vec<String> = lines.take(MAX_LINES).collect();
    if n > MAX_LINES {
        out.push(format!("... and {} more {what}", n - MAX_LINES));
    }
    out
}
