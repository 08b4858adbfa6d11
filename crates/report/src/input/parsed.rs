//! What reading a text gives: its records, the units they were printed
//! in, data-quality [`Warning`]s and typed [`Fault`]s ([`Parsed`]). Its
//! own file, below the parsers and the checks that fill it, so that each
//! of them names it without importing the others.

use super::fault::Fault;
use crate::parse::unit::SourceUnits;
use collbench_core::Record;

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

/// Lines of one text (or rank stream) that its reader could not place
/// and skipped: how many, and the first, said in one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// The file (and rank stream) they are in.
    pub origin: String,
    /// How many lines were skipped.
    pub count: usize,
    /// The first one's 1-based line number.
    pub line: usize,
    /// The first one's text, shortened.
    pub text: String,
    /// Why it could not be placed.
    pub reason: String,
}

/// The most characters of a skipped line quoted.
const QUOTE_CHARS: usize = 60;

impl Skipped {
    /// `count` lines skipped in `origin`, the first at `line` (`text`).
    pub fn new(origin: &str, count: usize, line: usize, text: &str, reason: &str) -> Skipped {
        let text = text.trim();
        let text = match text.char_indices().nth(QUOTE_CHARS) {
            Some((at, _)) => format!("{}...", &text[..at]),
            None => text.to_string(),
        };
        Skipped {
            origin: origin.to_string(),
            count,
            line,
            text,
            reason: reason.to_string(),
        }
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines = if self.count == 1 { "line" } else { "lines" };
        write!(
            f,
            "{}: {} {lines} skipped; first: line {} '{}' ({})",
            self.origin, self.count, self.line, self.text, self.reason
        )
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
    /// Lines the readers could not place and skipped, one entry per text
    /// (or rank stream) that had any.
    pub skipped: Vec<Skipped>,
}

impl Parsed {
    /// Appends `other`.
    pub fn append(&mut self, mut other: Parsed) {
        self.records.append(&mut other.records);
        self.units.append(&mut other.units);
        self.warnings.append(&mut other.warnings);
        self.faults.append(&mut other.faults);
        self.skipped.append(&mut other.skipped);
    }

    /// Whether any warning says the log was cut ("partial").
    pub fn partial(&self) -> bool {
        self.warnings
            .iter()
            .any(|w| w.message.starts_with("partial"))
    }
}
