//! The `collbench` binary: argument parsing and wiring only.
//!
//! Called as `<op>_perf` (a symlink such as `all_reduce_perf -> collbench`)
//! it behaves as `collbench run <op>` with nccl-tests' defaults, so
//! existing scripts keep working.

#![forbid(unsafe_code)]

mod aliases;
mod args;
mod backend_open;
mod exit;
mod launch_args;
mod meta;
mod observer;
mod preflight;
mod run_cmd;
mod tune_cmd;

use args::RunArgs;
use backend_open::{Mode, Tuning};
use clap::{Parser, Subcommand};
use exit::{Failure, Outcome};

/// Measure, verify and report collective-communication performance.
#[derive(Parser, Debug)]
#[command(name = "collbench", version, disable_version_flag = true)]
struct Cli {
    /// Print the version.
    #[arg(long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run collectives with nccl-tests' flags (exit 0 ok, 1 wrong results,
    /// 2 usage, 3 launch, 4 backend, 5 timeout: see `exit::RUN`).
    #[command(disable_version_flag = true)]
    Run(RunArgs),
    /// Find NCCL settings that beat the defaults on this machine, prove
    /// each gain, write a tuner config (exit 0 done, 2 not NCCL or usage,
    /// 4 failed, 130 interrupted).
    Tune(tune_cmd::TuneArgs),
    /// Check that every rank of a multi-process job can reach the others
    /// (exit 0 pass, 3 missing ranks or mismatched versions).
    Preflight(preflight::PreflightArgs),
    /// Write Slurm, Kubernetes or mpirun launch files.
    Gen(collbench_gen::GenArgs),
    /// Turn benchmark logs (nccl-tests, OSU, nccom-test, NVSHMEM, collbench) into a report.
    Report(collbench_report::ReportArgs),
    /// Compare two runs; exit 1 on regression.
    Compare(collbench_report::CompareArgs),
    /// Short health battery with a PASS/WARN/FAIL verdict (exit 0/1/2).
    Check {
        #[command(flatten)]
        check: collbench_check::CheckArgs,
        #[command(flatten)]
        backend: args::BackendArgs,
        #[command(flatten, next_help_heading = "Launch")]
        launch: launch_args::LaunchArgs,
    },
    /// Local checks of drivers, GPUs, NCCL, network and limits.
    Doctor(collbench_doctor::DoctorArgs),
    /// List or show built-in baselines.
    Baselines(collbench_check::BaselinesArgs),
    /// Create `<op>_perf` symlinks to this binary in DIR (drop-in for nccl-tests).
    InstallAliases {
        /// Folder for the symlinks.
        dir: std::path::PathBuf,
    },
}

/// Parser for the alias form: only the run flags.
#[derive(Parser, Debug)]
#[command(disable_version_flag = true)]
struct AliasCli {
    #[command(flatten)]
    args: RunArgs,
}

/// Prints a clap error as one line (help and version print in full). A
/// bad value keeps clap's list of possible values on that line.
fn clap_failure(e: clap::Error, hint: &str) -> Failure {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        std::process::exit(
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                Outcome::Usage.code()
            } else {
                Outcome::Ok.code()
            },
        );
    }
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ")
        .to_string();
    let values = rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("[possible values: "))
        .map(|v| format!(": use {}", v.trim_end_matches(']')))
        .unwrap_or_default();
    Failure::usage(format!("{first}{values} (see '{hint} --help')"))
}

/// A library's error as a usage failure (`{:#}` prints anyhow's chain of
/// causes on one line).
fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("{e:#}"))
}

fn real_main() -> Result<Outcome, Failure> {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let prog = argv
        .first()
        .map(|p| {
            std::path::Path::new(p)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    if let Some(coll) = collbench_core::Collective::from_perf_name(&prog) {
        let mut cli = AliasCli::try_parse_from(&argv).map_err(|e| clap_failure(e, &prog))?;
        cli.args.ops = vec![coll.name().to_string()];
        return run_cmd::run(&cli.args, &argv, Mode::Alias);
    }
    let cli = Cli::try_parse_from(&argv).map_err(|e| clap_failure(e, "collbench"))?;
    match cli.command {
        Command::Run(a) => run_cmd::run(&a, &argv, Mode::Native),
        Command::Tune(a) => tune_cmd::tune(&a),
        Command::Preflight(a) => preflight::run(&a),
        Command::Gen(a) => collbench_gen::run(&a).map(|_| Outcome::Ok).map_err(usage),
        Command::Report(a) => collbench_report::report_main(&a)
            .map(Outcome::report)
            .map_err(|e| Failure::new(Outcome::ReportUnusable, format!("{e:#}"))),
        Command::Compare(a) => collbench_report::compare_main(&a)
            .map(Outcome::compare)
            .map_err(usage),
        Command::Check {
            check,
            backend,
            launch,
        } => {
            let mut opened =
                backend_open::open(&backend, &launch, Tuning::default(), Mode::Native)?;
            collbench_check::check_main(&check, opened.backend.as_mut(), &opened.control, &argv)
                .map(Outcome::check)
                .map_err(|e| Failure::new(Outcome::CheckFail, format!("{e:#}")))
        }
        Command::Doctor(a) => collbench_doctor::doctor_main(&a)
            .map(Outcome::doctor)
            .map_err(usage),
        Command::Baselines(a) => collbench_check::baselines_main(&a)
            .map(|_| Outcome::Ok)
            .map_err(usage),
        Command::InstallAliases { dir } => aliases::install(&dir).map(|_| Outcome::Ok),
    }
}

fn main() {
    let outcome = match real_main() {
        Ok(o) => o,
        Err(f) => {
            eprintln!("collbench: {}", f.message.trim_end());
            f.outcome
        }
    };
    std::process::exit(outcome.code());
}
