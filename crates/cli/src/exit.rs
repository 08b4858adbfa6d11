//! The one place where outcomes become exit codes. Libraries return what
//! happened (a verdict, a comparison, an error); `main` turns it into an
//! [`Outcome`] here. The README's exit-code tables are generated from the
//! lists and meanings below, which only the tests need: a test keeps the
//! tables verbatim in README.md.

/// How a command ended. Each outcome has one documented exit code;
/// commands share codes (1 is "wrong results" for `run`, "warn" for
/// `check`, "regression" for `compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `run`: everything ran and every checked element was right.
    Ok,
    /// `run`: some results were wrong (#wrong > 0).
    Wrong,
    /// Bad command line or input (nothing ran), or the results could not
    /// be written.
    Usage,
    /// A peer process failed, or the job could not be assembled.
    Launch,
    /// The backend or its library failed (missing library, CUDA/NCCL
    /// error, out of memory).
    Backend,
    /// A collective made no progress within the timeout (`-T`, else the
    /// watchdog's): stuck.
    Timeout,
    /// `check`: every figure passes.
    CheckPass,
    /// `check`: some figure is below the warning line.
    CheckWarn,
    /// `check`: some figure fails, a result is wrong, or the check could
    /// not run.
    CheckFail,
    /// `check`: part of the job could not be judged (pair tests that
    /// could not run, a host no test measured, a case the baseline
    /// expects that did not run), and nothing failed.
    CheckIncomplete,
    /// `compare`: no case regressed.
    NoRegression,
    /// `compare`: some case regressed beyond the threshold, or NEW failed
    /// its correctness gate.
    Regression,
    /// `compare`: no case regressed, but an op drops beyond the threshold
    /// within its noise.
    CompareCannotTell,
    /// `compare`: an input cannot be read, or the two share no case.
    CompareUnusable,
    /// `preflight`: every rank checked in with the same versions.
    PreflightPass,
    /// `preflight`: ranks are missing or versions differ.
    PreflightFail,
    /// `doctor`: every check passes or is skipped.
    DoctorPass,
    /// `doctor`: some check warns.
    DoctorWarn,
    /// `doctor`: some check fails.
    DoctorFail,
    /// `report`: the report was written from every input.
    ReportComplete,
    /// `report`: an input named directly cannot be read, or `--strict` and
    /// a file in a folder cannot or a log has a line no reader can place.
    ReportUnusable,
    /// `report`: the report was written, but files in a folder were
    /// skipped (each listed on stderr).
    ReportSkipped,
    /// `tune`: every band searched.
    TuneComplete,
    /// `tune`: a usage error, or nothing to tune with NCCL (CPU backend,
    /// the user's own NCCL_TUNER_PLUGIN): nothing ran.
    TuneRefused,
    /// `tune`: NCCL failed, or a measurement did; the measured bands are
    /// printed.
    TuneFailed,
    /// `tune`: stopped by Ctrl-C; the measured bands are printed.
    TuneInterrupted,
    /// `run`: stopped by Ctrl-C, SIGTERM or SIGHUP; the rows measured are
    /// in the output files, marked partial.
    Interrupted,
    /// `run --require-transport`: NCCL took another path than the one
    /// required, or its path could not be told; the results are written.
    TransportMismatch,
}

/// The outcomes of `run` (and the `<op>_perf` aliases), in code order.
#[cfg(test)]
const RUN: [Outcome; 8] = [
    Outcome::Ok,
    Outcome::Wrong,
    Outcome::Usage,
    Outcome::Launch,
    Outcome::Backend,
    Outcome::Timeout,
    Outcome::TransportMismatch,
    Outcome::Interrupted,
];

/// The other commands and their own outcomes, in code order.
#[cfg(test)]
const OTHERS: [(&str, &[Outcome]); 6] = [
    (
        "check",
        &[
            Outcome::CheckPass,
            Outcome::CheckWarn,
            Outcome::CheckFail,
            Outcome::Launch,
            Outcome::Timeout,
            Outcome::CheckIncomplete,
        ],
    ),
    (
        "compare",
        &[
            Outcome::NoRegression,
            Outcome::Regression,
            Outcome::CompareUnusable,
            Outcome::CompareCannotTell,
        ],
    ),
    (
        "report",
        &[
            Outcome::ReportComplete,
            Outcome::ReportUnusable,
            Outcome::ReportSkipped,
        ],
    ),
    (
        "preflight",
        &[Outcome::PreflightPass, Outcome::PreflightFail],
    ),
    (
        "doctor",
        &[
            Outcome::DoctorPass,
            Outcome::DoctorWarn,
            Outcome::DoctorFail,
        ],
    ),
    (
        "tune",
        &[
            Outcome::TuneComplete,
            Outcome::TuneRefused,
            Outcome::Launch,
            Outcome::TuneFailed,
            Outcome::TuneInterrupted,
        ],
    ),
];

impl Outcome {
    /// The process exit code.
    pub const fn code(self) -> i32 {
        match self {
            Outcome::Ok
            | Outcome::CheckPass
            | Outcome::NoRegression
            | Outcome::PreflightPass
            | Outcome::ReportComplete
            | Outcome::DoctorPass
            | Outcome::TuneComplete => 0,
            Outcome::Wrong | Outcome::CheckWarn | Outcome::Regression | Outcome::DoctorWarn => 1,
            Outcome::Usage
            | Outcome::CheckFail
            | Outcome::CompareUnusable
            | Outcome::ReportUnusable
            | Outcome::DoctorFail
            | Outcome::TuneRefused => 2,
            Outcome::Launch | Outcome::PreflightFail | Outcome::CompareCannotTell => 3,
            Outcome::Backend | Outcome::TuneFailed => 4,
            Outcome::Timeout => 5,
            Outcome::ReportSkipped => 6,
            Outcome::TransportMismatch => 7,
            Outcome::CheckIncomplete => collbench_check::verdict::INCOMPLETE_CODE,
            Outcome::TuneInterrupted | Outcome::Interrupted => 130,
        }
    }

    /// What the code means, as the README says it.
    #[cfg(test)]
    const fn meaning(self) -> &'static str {
        match self {
            Outcome::Ok => "ran, every checked element right",
            Outcome::Wrong => "wrong results (#wrong > 0, or a placement check after `-c` failed)",
            Outcome::Usage => "usage error (bad flag, size, name, existing or unwritable output): nothing ran; or the results could not be written (stdout or a file)",
            Outcome::Launch => "launch failure: a peer missing, refused, dead or silent",
            Outcome::Backend => "backend failure: library missing, CUDA/NCCL error, out of memory",
            Outcome::Timeout => "a collective made no progress for `-T` seconds (else `--watchdog`'s, 300 by default): one line names the ranks behind; communicators were aborted",
            Outcome::CheckPass => "pass",
            Outcome::CheckWarn => "warn",
            Outcome::CheckFail => "fail (a wrong result always fails), or the check could not run",
            Outcome::CheckIncomplete => "incomplete: part of the job could not be judged (pair tests that could not run, a host no pair test measured, a case the baseline expects that did not run) and nothing failed; never a pass on partial evidence",
            Outcome::NoRegression => "no regression",
            Outcome::Regression => "regression (a 95% interval beyond the threshold in two adjacent cases), or NEW has wrong results or a failed placement check, an out-of-bounds FAILED line, an error or crash line, or fewer cases than BASE",
            Outcome::CompareUnusable => "an input cannot be read, the two share no case, or BASE has wrong results, a failed placement check or was cut short (`--trust-base` compares anyway)",
            Outcome::CompareCannotTell => "cannot tell: no case regressed, but an op drops beyond the threshold within its noise",
            Outcome::ReportComplete => "report written, every input read",
            Outcome::ReportUnusable => "an input named directly cannot be read, or `--strict` and a file in a folder cannot or a log has a line no reader can place",
            Outcome::ReportSkipped => "report written, but files in a folder were skipped (listed on stderr)",
            Outcome::PreflightPass => "every rank checked in, versions match",
            Outcome::PreflightFail => "ranks are missing or versions differ",
            Outcome::DoctorPass => "every check passes or is skipped",
            Outcome::DoctorWarn => "a check warns",
            Outcome::DoctorFail => "a check fails",
            Outcome::TuneComplete => "every band searched",
            Outcome::TuneRefused => "usage error, or not NCCL (CPU backend, the user's own `NCCL_TUNER_PLUGIN`): nothing ran",
            Outcome::TuneFailed => "NCCL or a measurement failed; the bands measured so far are printed",
            Outcome::TuneInterrupted => "stopped by Ctrl-C; the bands measured so far are printed",
            Outcome::TransportMismatch => "`--require-transport`: NCCL took another path (one line each: expected, used, cause), or its path could not be told; the results are written",
            Outcome::Interrupted => "stopped by Ctrl-C, SIGTERM or SIGHUP: the rows measured so far are written to `--output` and `-J` (and a JSON/CSV/Markdown stdout), marked partial",
        }
    }

    /// `check`'s verdict.
    pub fn check(status: collbench_check::verdict::Status) -> Outcome {
        use collbench_check::verdict::Status;
        match status {
            Status::Info | Status::Pass => Outcome::CheckPass,
            Status::Warn => Outcome::CheckWarn,
            Status::Fail => Outcome::CheckFail,
            Status::Incomplete => Outcome::CheckIncomplete,
        }
    }

    /// `compare`'s finding.
    pub fn compare(found: collbench_report::CompareOutcome) -> Outcome {
        use collbench_report::CompareOutcome;
        match found {
            CompareOutcome::NoRegression => Outcome::NoRegression,
            CompareOutcome::Regression | CompareOutcome::NewFailed => Outcome::Regression,
            CompareOutcome::Unusable => Outcome::CompareUnusable,
            CompareOutcome::CannotTell => Outcome::CompareCannotTell,
        }
    }

    /// `report`'s result.
    pub fn report(done: collbench_report::ReportOutcome) -> Outcome {
        match done {
            collbench_report::ReportOutcome::Complete => Outcome::ReportComplete,
            collbench_report::ReportOutcome::Skipped => Outcome::ReportSkipped,
        }
    }

    /// How `tune`'s search ended.
    pub fn tune(end: &collbench_tune::End) -> Outcome {
        match end {
            collbench_tune::End::Complete => Outcome::TuneComplete,
            collbench_tune::End::Interrupted => Outcome::TuneInterrupted,
            collbench_tune::End::Failed(_) => Outcome::TuneFailed,
        }
    }

    /// Rank 0's exit code of `tune`, as another process of the job ends
    /// (it learns the code, not the outcome).
    pub fn tune_of_code(code: Option<u8>) -> Outcome {
        match code.map(i32::from) {
            Some(0) => Outcome::TuneComplete,
            Some(2) => Outcome::TuneRefused,
            Some(3) => Outcome::Launch,
            Some(130) => Outcome::TuneInterrupted,
            _ => Outcome::TuneFailed,
        }
    }

    /// `doctor`'s worst status, which `collbench_check::doctor_main` still
    /// hands over as 0 (pass or skip), 1 (warn) or 2 (fail).
    pub fn doctor(worst: i32) -> Outcome {
        match worst {
            0 => Outcome::DoctorPass,
            1 => Outcome::DoctorWarn,
            _ => Outcome::DoctorFail,
        }
    }
}

/// The README's table of `run`'s exit codes.
#[cfg(test)]
fn run_table() -> String {
    let mut out = String::from("| code | meaning |\n| --- | --- |\n");
    for o in RUN {
        out += &format!("| {} | {} |\n", o.code(), o.meaning());
    }
    out
}

/// The README's table of the other commands' exit codes.
#[cfg(test)]
fn others_table() -> String {
    let mut out = String::from("| command | code | meaning |\n| --- | --- | --- |\n");
    for (command, outcomes) in OTHERS {
        for o in outcomes {
            out += &format!("| `{command}` | {} | {} |\n", o.code(), o.meaning());
        }
    }
    out
}

/// A failure that ends the program with its outcome's code after printing
/// `message` as one line on stderr.
#[derive(Debug)]
pub struct Failure {
    pub outcome: Outcome,
    pub message: String,
}

impl Failure {
    /// A failure with this outcome.
    pub fn new(outcome: Outcome, message: impl Into<String>) -> Failure {
        Failure {
            outcome,
            message: message.into(),
        }
    }

    /// A usage error: nothing ran.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(Outcome::Usage, message)
    }
}

impl From<collbench_runner::RunError> for Failure {
    fn from(e: collbench_runner::RunError) -> Failure {
        Failure::from_run(&e)
    }
}

impl Failure {
    /// A run's error and its outcome.
    fn from_run(e: &collbench_runner::RunError) -> Failure {
        use collbench_runner::{BackendError, RunError};
        let outcome = match e {
            RunError::Plan(_) => Outcome::Usage,
            RunError::Control(_) => Outcome::Launch,
            RunError::Backend(BackendError::Timeout(_)) | RunError::Stuck(_) => Outcome::Timeout,
            RunError::Backend(_) => Outcome::Backend,
        };
        Failure::new(outcome, e.to_string())
    }
}

/// `check`'s errors, by kind: a stuck collective or a failed peer keep
/// `run`'s codes (5 and 3), a failed write to stdout is exit 2 (as for
/// `run`); anything else means the check could not run.
pub fn check_failure(e: collbench_check::CheckError) -> Failure {
    use collbench_check::CheckError;
    use collbench_runner::RunError;
    match e {
        CheckError::Run(run @ (RunError::Stuck(_) | RunError::Control(_))) => {
            Failure::from_run(&run)
        }
        CheckError::Stdout(stdout) => Failure::from(stdout),
        e => Failure::new(Outcome::CheckFail, crate::one_line(&e.into())),
    }
}

/// Whether a stop's line has been printed already (by [`announce`]), so
/// the error the run returns afterwards is not printed a second time.
static STOP_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The exit outcome of a stop: a stuck collective 5, a failed peer 3.
fn stop_outcome(stop: &collbench_runner::Stop) -> Outcome {
    match stop {
        collbench_runner::Stop::Stuck(_) => Outcome::Timeout,
        collbench_runner::Stop::Failed(_) => Outcome::Launch,
    }
}

/// Says a stop's line the moment the job stops (once), flushed: the run
/// may be held inside a library call for a while before it returns.
pub fn announce() -> collbench_runner::watchdog::Announce {
    std::sync::Arc::new(|stop: &collbench_runner::Stop| {
        use std::sync::atomic::Ordering;
        if !STOP_SAID.swap(true, Ordering::SeqCst) {
            crate::stdout::say(format!("collbench: {}", stop.message()));
        }
    })
}

/// Whether a failure with `outcome` was already said by [`announce`]: a
/// peer failure or a stuck collective after the job's stop.
pub fn already_said(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Launch | Outcome::Timeout)
        && STOP_SAID.load(std::sync::atomic::Ordering::SeqCst)
}

/// What ends a run that a stop could not interrupt: its one line (unless
/// already said), and the code the run would have returned.
pub fn last_resort() -> collbench_runner::watchdog::LastResort {
    std::sync::Arc::new(|stop: &collbench_runner::Stop| {
        announce()(stop);
        terminate(stop_outcome(stop))
    })
}

/// Ends the process with `outcome`'s code. After a stuck collective or a
/// failed peer (exit 5 or 3), a library may hold threads that wait on a
/// peer that will never answer: on two H200s, with the other process
/// stopped by SIGSTOP, the survivor printed its line and then never ended
/// (NCCL's abort and exit handlers waited on the stopped peer). So then
/// the process ends at once, without exit handlers, once what it printed
/// is flushed; otherwise it ends normally (a profiler such as Nsight
/// writes its report in an exit handler).
pub fn terminate(outcome: Outcome) -> ! {
    let code = outcome.code();
    if matches!(outcome, Outcome::Launch | Outcome::Timeout) {
        collbench_runner::watchdog::end_process_now(code)
    }
    std::process::exit(code)
}

/// Stdout that did not take the results is exit 2, whatever the command.
impl From<collbench_core::stdout::StdoutError> for Failure {
    fn from(e: collbench_core::stdout::StdoutError) -> Failure {
        Failure::usage(e.to_string())
    }
}

/// A library command's error: a failed write to stdout is exit 2 (one
/// line, as for `run`); anything else ends with `outcome`.
pub fn library_failure(e: &anyhow::Error, outcome: Outcome) -> Failure {
    match e.downcast_ref::<collbench_core::stdout::StdoutError>() {
        Some(stdout) => Failure::usage(stdout.to_string()),
        None => Failure::new(outcome, crate::one_line(e)),
    }
}

/// `tune`'s failures: refused 2, a peer 3, failed 4.
impl From<collbench_tune::job::TuneError> for Failure {
    fn from(e: collbench_tune::job::TuneError) -> Failure {
        use collbench_tune::job::TuneError;
        let outcome = match &e {
            TuneError::Refused(_) => Outcome::TuneRefused,
            TuneError::Peer(_) => Outcome::Launch,
            TuneError::Failed(_) => Outcome::TuneFailed,
        };
        Failure::new(outcome, e.to_string())
    }
}

impl From<collbench_launch::LaunchError> for Failure {
    fn from(e: collbench_launch::LaunchError) -> Failure {
        let outcome = match e {
            // A port variable or flag out of range is the user's input.
            collbench_launch::LaunchError::Port(_) => Outcome::Usage,
            _ => Outcome::Launch,
        };
        Failure::new(outcome, crate::launch_args::launch_words(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const README: &str = include_str!("../../../README.md");

    #[test]
    fn readme_holds_the_generated_tables() {
        for table in [run_table(), others_table()] {
            assert!(
                README.contains(&table),
                "README.md lacks this exit-code table (paste it in):\n{table}"
            );
        }
    }

    #[test]
    fn a_run_errors_code_follows_its_kind_not_its_line() {
        use collbench_runner::{RunError, Stop};
        let stuck = Failure::from_run(&RunError::Stuck("reworded entirely".into()));
        assert_eq!(stuck.outcome.code(), 5);
        let peer = Failure::from_run(&RunError::Control(
            "stuck collective: a peer's words".into(),
        ));
        assert_eq!(peer.outcome.code(), 3);
        assert_eq!(stop_outcome(&Stop::Stuck("any words".into())).code(), 5);
        assert_eq!(
            stop_outcome(&Stop::Failed("stuck collective: any words".into())).code(),
            3
        );
    }

    #[test]
    fn a_check_errors_code_follows_its_kind() {
        use collbench_check::CheckError;
        use collbench_runner::RunError;
        let outcome = |e: CheckError| check_failure(e).outcome;
        assert_eq!(
            outcome(RunError::Stuck("any words".into()).into()),
            Outcome::Timeout
        );
        assert_eq!(
            outcome(RunError::Control("any words".into()).into()),
            Outcome::Launch
        );
        assert_eq!(
            outcome(
                RunError::Plan(collbench_runner::PlanError::Root {
                    root: 1,
                    world_size: 1
                })
                .into()
            ),
            Outcome::CheckFail
        );
        let closed = collbench_core::stdout::StdoutError {
            reason: "Broken pipe".into(),
        };
        assert_eq!(outcome(closed.into()), Outcome::Usage);
        let bad = check_failure(CheckError::PairFraction(1.5));
        assert_eq!(bad.outcome, Outcome::CheckFail);
        assert_eq!(
            bad.message,
            "--pair-fraction must be between 0 and 1 (got 1.5), e.g. 0.8"
        );
    }

    /// The codes a command's one-line help lists: the numbers after
    /// "exit " in it (`(exit 0 pass, 1 warn, ...)`).
    fn help_codes(name: &str) -> Vec<i32> {
        use clap::CommandFactory;
        let cli = crate::Cli::command();
        let about = cli
            .find_subcommand(name)
            .and_then(|c| c.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        let after = about.split_once("exit ").map_or("", |(_, rest)| rest);
        let summary = after.split(';').next().unwrap_or("");
        summary
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    }

    /// `collbench --help` lists each command with its exit codes: the
    /// README's tables' codes, every one, for every command.
    #[test]
    fn every_commands_help_lists_the_readmes_exit_codes() {
        let mut wrong = Vec::new();
        let tables = OTHERS
            .iter()
            .map(|(c, o)| (*c, o.to_vec()))
            .chain([("run", RUN.to_vec())]);
        for (command, outcomes) in tables {
            let readme: Vec<i32> = outcomes.iter().map(|o| o.code()).collect();
            let help = help_codes(command);
            if help != readme {
                wrong.push(format!("{command}: --help {help:?}, README {readme:?}"));
            }
        }
        assert!(wrong.is_empty(), "exit codes differ: {wrong:?}");
    }

    #[test]
    fn run_codes_are_0_to_5_in_order_then_7_then_130() {
        let codes: Vec<i32> = RUN.iter().map(|o| o.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 7, 130]);
    }

    #[test]
    fn check_codes_match_the_check_json() {
        use collbench_check::verdict::Status;
        for s in [
            Status::Info,
            Status::Pass,
            Status::Warn,
            Status::Fail,
            Status::Incomplete,
        ] {
            assert_eq!(Outcome::check(s).code(), s.exit_code(), "{s:?}");
        }
    }
}
