//! Correctness before speed: what makes a side of a comparison fail
//! whatever its figures say. A NEW run with wrong results, a crash or a
//! cut-off log can never pass a gate; a BASE with them is a reference
//! that cannot be trusted.

use crate::units;
use collbench_core::Record;

/// Why a side cannot pass (NEW) or cannot be trusted (BASE).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A case's results differed from the exact answer (`#wrong` > 0).
    WrongResults {
        /// `all_reduce float sum 1 MiB out-of-place`.
        case: String,
        /// Wrong elements, summed over ranks.
        count: u64,
        /// Further cases with wrong results.
        more_cases: usize,
    },
    /// The log itself says the run failed: nccl-tests' `Out of bounds
    /// values : N FAILED` (N result values outside the tolerance), an error
    /// or crash line, a log cut short.
    Log(String),
    /// The run was stopped before its end (collbench's `partial`).
    Partial(String),
    /// BASE measured cases this side lacks: the run was cut short.
    MissingCases { count: usize, first: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::WrongResults {
                case,
                count,
                more_cases,
            } => {
                write!(f, "wrong results: {count} wrong element(s) in {case}")?;
                if *more_cases > 0 {
                    write!(f, " and {more_cases} more case(s)")?;
                }
                Ok(())
            }
            Failure::Log(line) => f.write_str(line),
            Failure::Partial(why) => write!(f, "cut short: {why}"),
            Failure::MissingCases { count, first } => write!(
                f,
                "cut short: {count} case(s) of BASE missing (first: {first}); \
                 --subset if NEW measures fewer cases on purpose"
            ),
        }
    }
}

/// The failures the records of one side carry themselves: wrong results
/// and a partial mark.
pub fn of_records(records: &[Record]) -> Vec<Failure> {
    let mut out = Vec::new();
    let mut wrong = records.iter().flat_map(|r| &r.results).flat_map(|c| {
        c.placements().filter_map(move |(name, p)| {
            let n = p.wrong.filter(|n| *n > 0)?;
            let placement = if name == "in_place" {
                "in-place"
            } else {
                "out-of-place"
            };
            let mut case = format!("{} {}", c.op, c.dtype);
            if !c.redop.is_empty() && c.redop != "none" {
                case = format!("{case} {}", c.redop);
            }
            Some((
                format!("{case} {} {placement}", units::bytes(c.size_bytes)),
                n,
            ))
        })
    });
    if let Some((case, count)) = wrong.next() {
        out.push(Failure::WrongResults {
            case,
            count,
            more_cases: wrong.count(),
        });
    }
    for r in records {
        if let Some(why) = &r.partial {
            out.push(Failure::Partial(why.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{all_reduce, rec};
    use collbench_core::Placement;

    #[test]
    fn wrong_results_and_partial_runs_fail() {
        let mut r = rec(&[(1 << 20, 10.0, 1.0)]);
        assert!(of_records(std::slice::from_ref(&r)).is_empty());
        r.results.push(all_reduce(
            2 << 20,
            Placement {
                wrong: Some(3),
                ..Placement::default()
            },
        ));
        r.partial = Some("interrupted by a signal after 2 rows".into());
        let f = of_records(&[r]);
        assert_eq!(
            f[0].to_string(),
            "wrong results: 3 wrong element(s) in all_reduce float sum 2 MiB out-of-place"
        );
        assert_eq!(
            f[1].to_string(),
            "cut short: interrupted by a signal after 2 rows"
        );
    }
}
