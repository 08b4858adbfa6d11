//! Find the bad host: host pairs tested against each other in rounds of
//! disjoint pairs, and a verdict that names a slow host or host-to-host
//! link from the pair figures alone (docs/hosts.md).
//!
//! Modules, one job each, each importing only those before it:
//! [`noise`] (the median/MAD rule, shared with in-process localisation),
//! [`matrix`] (the pair results, the host-pair matrix and its text),
//! [`types`] (how to judge, the findings and the verdict holding them,
//! the findings in words), [`schedule`](mod@schedule) (which pairs run in
//! which round), [`verdict`] (pair figures -> findings), [`confirm`]
//! (the confirmation loop), [`groups`] (hosts grouped by the fabric:
//! within groups first, then across group boundaries), [`sim`] (a
//! simulated job, for tests and for trying the rule). Measuring a round (NCCL communicators
//! per pair) is the caller's: [`run`] takes it as a closure.

pub mod confirm;
pub mod groups;
pub mod matrix;
pub mod noise;
pub mod schedule;
pub mod sim;
pub mod types;
pub mod verdict;

pub use groups::{run_grouped, HostGroups};
pub use matrix::{HostInfo, HostMatrix, PairResult};
pub use schedule::{confirmation_rounds, max_rounds, schedule, Round, Schedule};
pub use types::{finding_line, finding_lines, Finding, HostVerdict, JudgeConfig, SlowHostEvidence};
pub use verdict::judge;

/// The whole procedure: the main rounds, the verdict, then confirmation
/// rounds and a new verdict while anything is suspect (a suspect cleared
/// by a retest can leave new ones), at most
/// [`schedule::MAX_CONFIRMATION_ROUNDS`] in all. `measure` runs one round
/// (all its pairs at once) and returns its figures; its error (the job
/// failed) ends the procedure. Returns the verdict and the number of
/// rounds run.
pub fn run<E>(
    cfg: &JudgeConfig,
    seed: u64,
    mut measure: impl FnMut(&Round) -> Result<Vec<PairResult>, E>,
) -> Result<(HostVerdict, usize), E> {
    let main = schedule(cfg.hosts, seed);
    let mut results: Vec<PairResult> = Vec::new();
    for round in &main.rounds {
        results.extend(measure(round)?);
    }
    let mut rounds = main.rounds.len();
    let last = rounds + schedule::MAX_CONFIRMATION_ROUNDS;
    let verdict = confirm::judge_and_confirm(cfg, &mut results, &mut rounds, last, &mut measure)?;
    Ok((verdict, rounds))
}
