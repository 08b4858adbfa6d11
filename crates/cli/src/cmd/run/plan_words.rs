//! `run`'s words for a plan the job cannot run. The runner's
//! [`PlanError`] says what is wrong in the plan's own terms (the smallest
//! size, the step, the root); only `run` knows that `-b`, `-f` and `-r`
//! set them, so the flags and the fix are named here.

use crate::exit::{Failure, Outcome};
use collbench_core::alltoallv::TrafficError;
use collbench_core::size::{SweepError, MAX_SIZES};
use collbench_runner::{BackendError, PlanError, RunError};

/// The one line for a plan error, naming `run`'s flags.
pub fn plan_words(e: &PlanError) -> String {
    match e {
        PlanError::Sweep(s) => sweep_words(s),
        PlanError::Traffic(t) => traffic_words(t),
        PlanError::Root { root, world_size } => format!(
            "root {root} is out of range for {world_size} ranks: use -r 0..{} or -r -1 for every root",
            world_size.saturating_sub(1)
        ),
    }
}

/// A plan error as `run`'s usage failure (exit 2).
pub fn plan_failure(e: PlanError) -> Failure {
    Failure::usage(plan_words(&e))
}

/// A run's error as its failure, plan errors and memory shortfalls in
/// `run`'s words (the outcome is the library error's).
pub fn run_failure(e: RunError) -> Failure {
    match e {
        RunError::Plan(p) => plan_failure(p),
        RunError::Backend(BackendError::OutOfMemory(s)) => {
            Failure::new(Outcome::Backend, super::memory_words::memory_words(&s))
        }
        other => other.into(),
    }
}

fn sweep_words(e: &SweepError) -> String {
    match e {
        SweepError::MinAboveMax { min, max } => {
            format!("-b/--minbytes ({min}) is larger than -e/--maxbytes ({max}): make -b <= -e")
        }
        SweepError::Factor(f) => format!(
            "-f/--stepfactor must be 2 or more (got {f}): use -f 2 for doubling sizes, or -i BYTES for a linear sweep"
        ),
        SweepError::ZeroStep => "-i/--stepbytes must be at least 1".to_string(),
        SweepError::TooMany { min, max, count } => format!(
            "-b {min} -e {max} with this step makes {count} sizes, more than collbench's limit of {MAX_SIZES}: use a larger -i/--stepbytes, -f/--stepfactor or a narrower -b..-e"
        ),
    }
}

fn traffic_words(e: &TrafficError) -> String {
    match e {
        TrafficError::Sweep {
            file,
            min_bytes,
            max_bytes,
        } => format!(
            "traffic matrix {file}: -b ({min_bytes}) and -e ({max_bytes}) must be equal in matrix mode (sizes come from the matrix): use e.g. -b {max_bytes} -e {max_bytes}"
        ),
        TrafficError::MaxBytes {
            file,
            max_bytes,
            needed,
        } => format!(
            "traffic matrix {file}: -e ({max_bytes}) must be at least {needed} bytes, the largest total a rank sends or receives: use -b {needed} -e {needed} or larger"
        ),
        // The matrix file's own problems name the file and its fix, no flag.
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's words name no flag; `run`'s name the flag and the fix.
    #[test]
    fn run_names_the_flags_the_library_does_not() {
        let cases = [
            PlanError::Sweep(SweepError::MinAboveMax { min: 16, max: 8 }),
            PlanError::Sweep(SweepError::Factor(1)),
            PlanError::Sweep(SweepError::ZeroStep),
            PlanError::Sweep(SweepError::TooMany {
                min: 8,
                max: 1 << 30,
                count: 1 << 30,
            }),
            PlanError::Traffic(TrafficError::Sweep {
                file: "m.txt".into(),
                min_bytes: 8,
                max_bytes: 64,
            }),
            PlanError::Traffic(TrafficError::MaxBytes {
                file: "m.txt".into(),
                max_bytes: 8,
                needed: 64,
            }),
            PlanError::Root {
                root: 4,
                world_size: 2,
            },
        ];
        for e in cases {
            let library = e.to_string();
            let run = plan_words(&e);
            assert!(
                !library.contains(" -") && !library.starts_with('-'),
                "a library message names a flag: {library}"
            );
            assert!(run.contains(" -") || run.starts_with('-'), "{run}");
        }
        assert_eq!(
            plan_words(&PlanError::Root {
                root: 2,
                world_size: 2
            }),
            "root 2 is out of range for 2 ranks: use -r 0..1 or -r -1 for every root"
        );
    }
}
