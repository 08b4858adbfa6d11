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
