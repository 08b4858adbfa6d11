//! Typed failure signals found in a log: wrong results, nccl-tests'
//! out-of-bounds count, crash and error lines, a log cut short. A
//! correctness gate reads these instead of matching warning texts; the
//! warnings stay for people.
//!
//! Parsers note [`Fault::OutOfBounds`] and [`Fault::CutShort`] where they
//! see them ([`crate::parse::Notes`]); [`Fault::WrongResults`] is derived
//! from the parsed rows of every format ([`wrong_results`]) and
//! [`Fault::Crashed`] from the text's lines ([`crashes`]), each in one
//! place.

use crate::units;
use collbench_core::extension_list::extensions;
use collbench_core::{CaseResult, Record};

/// One failure signal, with the file (and rank stream) it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A row's `#wrong` count is above 0: the collective returned values
    /// outside the checker's tolerance for this case.
    WrongResults {
        /// The file (and rank stream) it is about.
        origin: String,
        /// The case: op, type, redop, root, size and placement
        /// (`all_reduce float sum 1 KiB out-of-place`).
        case: String,
        /// Values found wrong.
        count: u64,
    },
    /// A placement failed a placement extension's check
    /// (`collbench_core::extension`): the library returned results that
    /// the check finds wrong although `#wrong` may not.
    PlacementCheck {
        /// The file (and rank stream) it is about.
        origin: String,
        /// The extension's name (the record field it owns).
        check: &'static str,
        /// The case and placement, as for [`Fault::WrongResults`].
        case: String,
        /// What the extension says of it (with the case).
        line: String,
    },
    /// nccl-tests' footer `# Out of bounds values : N FAILED` (or JSON
    /// `out_of_bounds.okay = false`): N result values, over the whole
    /// table, were outside tolerance, i.e. wrong results.
    OutOfBounds {
        /// The file (and rank stream) it is about.
        origin: String,
        /// The footer's count of values outside tolerance.
        count: u64,
    },
    /// A line saying the run failed or crashed (`Test NCCL failure`,
    /// `Segmentation fault`, `terminate called`, an MPI or Slurm abort,
    /// a Python traceback, `collbench: error:`).
    Crashed {
        /// The file it is about.
        origin: String,
        /// The line as printed, trimmed.
        line: String,
    },
    /// The log stops mid-sweep or mid-row, or the run says it was stopped
    /// (collbench JSON `partial`).
    CutShort {
        /// The file (and rank stream) it is about.
        origin: String,
        /// What shows it, as the matching warning says it.
        reason: String,
    },
}

impl Fault {
    /// The file (and rank stream) the fault was found in.
    pub fn origin(&self) -> &str {
        match self {
            Fault::WrongResults { origin, .. }
            | Fault::PlacementCheck { origin, .. }
            | Fault::OutOfBounds { origin, .. }
            | Fault::Crashed { origin, .. }
            | Fault::CutShort { origin, .. } => origin,
        }
    }

    /// Names the file the fault came from (parsers leave it empty).
    pub(crate) fn set_origin(&mut self, name: &str) {
        match self {
            Fault::WrongResults { origin, .. }
            | Fault::PlacementCheck { origin, .. }
            | Fault::OutOfBounds { origin, .. }
            | Fault::Crashed { origin, .. }
            | Fault::CutShort { origin, .. } => *origin = name.to_string(),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::WrongResults {
                origin,
                case,
                count,
            } => write!(
                f,
                "{origin}: wrong results: {count} value(s) wrong in {case}"
            ),
            Fault::PlacementCheck { origin, line, .. } => write!(f, "{origin}: {line}"),
            Fault::OutOfBounds { origin, count } => write!(
                f,
                "{origin}: wrong results: nccl-tests found {count} value(s) outside tolerance"
            ),
            Fault::Crashed { origin, line } => write!(f, "{origin}: crashed: {line}"),
            Fault::CutShort { origin, reason } => write!(f, "{origin}: cut short: {reason}"),
        }
    }
}

/// Markers of a failed or crashed run, as tools and launchers print them.
/// NCCL's `NCCL WARN` lines are not among them: most are not fatal.
const CRASH_MARKERS: [&str; 16] = [
    "Test NCCL failure",
    "Test CUDA failure",
    "Test failure",
    "NCCL failure ",
    "CUDA failure ",
    "Segmentation fault",
    "Aborted",
    "core dumped",
    "Bus error",
    "terminate called",
    "mpirun noticed that process rank",
    "mpirun detected that one or more processes exited with non-zero status",
    "srun: error:",
    "Traceback (most recent call last)",
    "RuntimeError",
    "collbench: error:",
];

/// [`CRASH_MARKERS`], found in one pass over a line.
static CRASH: super::scan::Needles = super::scan::Needles::new(&CRASH_MARKERS);

/// At most this many [`Fault::Crashed`] per text: every rank of a large
/// job may print the same failure, and one line is enough to fail a gate.
const MAX_CRASH_LINES: usize = 16;

/// Whether `line` says the run failed or crashed (one of the markers
/// above: `Test NCCL failure`, `Segmentation fault`, ...).
pub fn is_crash_line(line: &str) -> bool {
    crash_marker_at(line).is_some()
}

/// Where the first crash marker starts in `line`, if any: a crash message
/// glued to the end of a row starts there.
pub fn crash_marker_at(line: &str) -> Option<usize> {
    CRASH.find(line)
}

/// The crash and error lines of `text` (not JSON: its values are data).
pub fn crashes(text: &str, origin: &str) -> Vec<Fault> {
    if super::scan::looks_like_json(text) {
        return Vec::new();
    }
    text.lines()
        .filter(|l| is_crash_line(l))
        .take(MAX_CRASH_LINES)
        .map(|l| Fault::Crashed {
            origin: origin.to_string(),
            line: l.trim().to_string(),
        })
        .collect()
}

/// One [`Fault::WrongResults`] per placement of `record` whose `#wrong`
/// is above 0, whatever format the record came from.
pub fn wrong_results(record: &Record, origin: &str) -> Vec<Fault> {
    let mut out = Vec::new();
    for c in &record.results {
        for (name, p) in c.placements() {
            let Some(count) = p.wrong.filter(|w| *w > 0) else {
                continue;
            };
            let placement = if name == "in_place" {
                "in-place"
            } else {
                "out-of-place"
            };
            out.push(Fault::WrongResults {
                origin: origin.to_string(),
                case: format!("{} {placement}", case_name(c)),
                count,
            });
        }
    }
    out
}

/// One [`Fault::PlacementCheck`] per placement of `record` that failed
/// a placement extension's check, whatever format the record came from.
pub fn placement_checks(record: &Record, origin: &str) -> Vec<Fault> {
    let mut out = Vec::new();
    for c in &record.results {
        for (name, p) in c.placements() {
            let placement = if name == "in_place" {
                "in-place"
            } else {
                "out-of-place"
            };
            let case = format!("{} {placement}", case_name(c));
            for ext in extensions() {
                if let Some(line) = ext.fault(p, &case) {
                    out.push(Fault::PlacementCheck {
                        origin: origin.to_string(),
                        check: ext.name(),
                        case: case.clone(),
                        line,
                    });
                }
            }
        }
    }
    out
}

/// `all_reduce float sum root 0 1 KiB`: a case as warnings and
/// faults name it.
pub(crate) fn case_name(c: &CaseResult) -> String {
    let mut s = format!("{} {}", c.op, c.dtype);
    if !c.redop.is_empty() && c.redop != "none" {
        s = format!("{s} {}", c.redop);
    }
    if c.root >= 0 {
        s = format!("{s} root {}", c.root);
    }
    format!("{s} {}", units::bytes(c.size_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_lines_are_found_and_info_lines_are_not() {
        let text = "h:1:1 [0] NCCL INFO Bootstrap\n\
                    h:1:2 [0] misc/socket.cc:50 NCCL WARN socket closed\n\
                    h: Test NCCL failure common.cu:1204 'unhandled cuda error'\n \
                    .. h pid 7: Test failure common.cu:915\n";
        let f = crashes(text, "x.txt");
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(
            f[1].to_string(),
            "x.txt: crashed: .. h pid 7: Test failure common.cu:915"
        );
        assert!(crashes("{\"x\": \"Segmentation fault\"}", "j").is_empty());
    }

    #[test]
    fn display_is_one_line() {
        let f = Fault::OutOfBounds {
            origin: "a.txt".into(),
            count: 3,
        };
        assert_eq!(
            f.to_string(),
            "a.txt: wrong results: nccl-tests found 3 value(s) outside tolerance"
        );
        assert_eq!(f.origin(), "a.txt");
    }
}
