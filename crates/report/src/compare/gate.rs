//! Correctness before speed: what makes a side of a comparison fail
//! whatever its figures say. A NEW run with wrong results, an
//! out-of-bounds FAILED line, a crash or error line, or a log cut short
//! can never pass a gate; a BASE with them is a reference that cannot be
//! trusted. The parsers find these as typed [`Fault`]s; the comparison
//! adds the cases BASE measured that NEW lacks.

use crate::input::Fault;

/// Why a side cannot pass (NEW) or cannot be trusted (BASE).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// What the log itself shows (wrong results, out-of-bounds values,
    /// a crash line, a cut log), with its file.
    Fault(Fault),
    /// BASE measured cases this side lacks: the run was cut short.
    MissingCases {
        /// The side's file or folder.
        origin: String,
        count: usize,
        /// The first missing case, `all_reduce float sum 8 GiB out-of-place`.
        first: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Fault(fault) => fault.fmt(f),
            Failure::MissingCases {
                origin,
                count,
                first,
            } => write!(
                f,
                "{origin}: cut short: {count} case(s) of BASE missing (first: {first}); \
                 --subset if NEW measures fewer cases on purpose"
            ),
        }
    }
}

/// At most this many failure lines are printed; the rest are counted.
pub const SHOWN: usize = 5;

/// One line per failure, `FAILED: NEW ...` (or `BASE`), the first
/// [`SHOWN`] of them and a count of the rest.
pub fn lines(side: &str, failures: &[Failure]) -> Vec<String> {
    let mut out: Vec<String> = failures
        .iter()
        .take(SHOWN)
        .map(|f| format!("FAILED: {side} {f}"))
        .collect();
    if failures.len() > SHOWN {
        out.push(format!(
            "FAILED: {side} ... and {} more failure(s)",
            failures.len() - SHOWN
        ));
    }
    out
}

/// The failures of a side's parsed faults.
pub fn of_faults(faults: &[Fault]) -> Vec<Failure> {
    faults.iter().cloned().map(Failure::Fault).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_side_and_count_the_rest() {
        let f: Vec<Failure> = (0..7)
            .map(|k| {
                Failure::Fault(Fault::WrongResults {
                    origin: "new.json".into(),
                    case: format!("all_reduce float sum {k} MiB out-of-place"),
                    count: 3,
                })
            })
            .collect();
        let l = lines("NEW", &f);
        assert_eq!(l.len(), SHOWN + 1);
        assert_eq!(
            l[0],
            "FAILED: NEW new.json: wrong results: 3 value(s) wrong in all_reduce float sum 0 MiB out-of-place"
        );
        assert_eq!(l[SHOWN], "FAILED: NEW ... and 2 more failure(s)");
    }
}
