//! What happens to a log before and after its parser: clean-up of launcher
//! prefixes and line ends ([`clean()`]), data-quality checks on the parsed
//! records ([`quality`]), and reading folders where some files are not logs
//! ([`read_paths`]).

pub mod clean;
pub mod fault;
pub mod quality;

pub use clean::{clean, Cleaned, Stream};
pub use fault::Fault;

use crate::parse::{read_file, FileError, Format, SourceUnits};
use collbench_core::Record;
use std::path::{Path, PathBuf};

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
}

impl Inputs {
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

/// Reads files and folders. A folder contributes every file in it
/// (recursively, sorted by name); a file there that cannot be read or
/// parsed is listed in [`Inputs::skipped`] and left out, or with `strict`
/// ends the read with its error. A file named directly must parse.
pub fn read_paths(
    paths: &[PathBuf],
    format: Option<Format>,
    strict: bool,
) -> Result<Inputs, FileError> {
    let mut out = Inputs::default();
    for path in paths {
        if !path.is_dir() {
            out.parsed.append(read_file(path, format)?);
            continue;
        }
        for file in files_under(path)? {
            match read_file(&file, format) {
                Ok(p) => out.parsed.append(p),
                Err(e) if strict => return Err(e),
                Err(e) => out.skipped.push(skip_reason(&e)),
            }
        }
    }
    Ok(out)
}

/// `PATH: not a benchmark log (...)` from a file's error.
fn skip_reason(e: &FileError) -> String {
    e.to_string()
}

/// The files `path` names: itself, or every file under a folder (sorted
/// by name, recursively).
pub fn files_of(path: &Path) -> Result<Vec<PathBuf>, FileError> {
    if path.is_dir() {
        files_under(path)
    } else {
        Ok(vec![path.to_path_buf()])
    }
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let io = |source| FileError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.append(&mut files_under(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}
