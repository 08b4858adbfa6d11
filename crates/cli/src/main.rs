//! The `collbench` binary: it parses the command line, dispatches to the
//! command's room (`cmd/<command>`: its flags, their conversion and its
//! body) and maps the outcome to the exit code.
//!
//! Called as `<op>_perf` (a symlink such as `all_reduce_perf -> collbench`)
//! it behaves as `collbench run <op>` with nccl-tests' defaults, so
//! existing scripts keep working.

#![forbid(unsafe_code)]

mod aliases;
mod args;
mod backend_open;
mod cmd;
mod doc_stdout;
mod exit;
#[cfg(test)]
mod help_readme;
mod interrupt;
mod launch_args;
mod meta;
mod observer;
mod outputs;
mod preflight;
mod progress_line;
mod run_ceiling;
mod stdout;
mod transport_gate;
mod tune;
mod tuner_plugin_cmd;

use args::Mode;
use clap::{Parser, Subcommand};
use cmd::run::RunArgs;
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
    /// 2 usage, 3 launch, 4 backend, 5 timeout, 7 transport, 130 interrupted; the
    /// README's table says more).
    #[command(disable_version_flag = true)]
    Run(Box<RunArgs>),
    /// Find NCCL settings that beat the defaults on this machine, prove
    /// each gain, write a tuner config (exit 0 done, 2 not NCCL or usage,
    /// 3 launch, 4 failed, 130 interrupted).
    Tune(cmd::tune::TuneArgs),
    /// Write collbench's NCCL tuner plugin to DIR, for any NCCL program to
    /// load with NCCL_TUNER_PLUGIN and a tuner CSV.
    TunerPlugin(tuner_plugin_cmd::TunerPluginArgs),
    /// Check that every rank of a multi-process job can reach the others
    /// (exit 0 pass, 3 missing ranks or mismatched versions).
    Preflight(preflight::PreflightArgs),
    /// Write Slurm, Kubernetes or mpirun launch files.
    Gen(cmd::gen::GenArgs),
    /// Turn benchmark logs (nccl-tests, OSU, nccom-test, NVSHMEM, collbench)
    /// into a report (exit 0 written, 2 an input unreadable, 6 written but
    /// files of a folder skipped).
    Report {
        #[command(flatten)]
        report: cmd::report::ReportArgs,
        /// Replace an existing -o file (never an input).
        #[arg(long)]
        force: bool,
    },
    /// Compare two runs (exit 0 no regression, 1 regression, 2 an input
    /// unreadable or no case in common, 3 cannot tell).
    Compare(cmd::report::CompareArgs),
    /// Short health battery with a PASS/WARN/FAIL/INCOMPLETE verdict (exit
    /// 0 pass, 1 warn, 2 fail, 3 launch, 5 stuck, 6 incomplete).
    Check {
        #[command(flatten)]
        check: cmd::check::CheckArgs,
        #[command(flatten)]
        backend: args::BackendArgs,
        #[command(flatten)]
        watch: args::WatchdogArgs,
        #[command(flatten, next_help_heading = "Launch")]
        launch: launch_args::LaunchArgs,
        /// Replace an existing --json or --events file.
        #[arg(long)]
        force: bool,
    },
    /// Local checks of drivers, GPUs, NCCL, network and limits (exit 0
    /// pass or skipped, 1 warn, 2 fail).
    Doctor(cmd::doctor::DoctorArgs),
    /// Busbw ceilings and bottlenecks of a described machine (a topology
    /// TOML file), per op and size.
    Expect(cmd::expect::ExpectArgs),
    /// List or show built-in baselines.
    Baselines(cmd::check::BaselinesArgs),
    /// Create `<op>_perf` symlinks to this binary in DIR (drop-in for nccl-tests).
    InstallAliases {
        /// Folder for the symlinks.
        dir: std::path::PathBuf,
        /// Replace links of these names that point elsewhere (another
        /// nccl-tests build).
        #[arg(long)]
        force: bool,
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
/// bad value keeps clap's list of possible values on that line, missing
/// arguments are named, and the hint names the subcommand's own help.
fn clap_failure(e: clap::Error, prog: &str) -> Failure {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Help or version that stdout cannot take ends like any other
        // failed write: exit 2, one line.
        if let Err(io) = e.print() {
            let f = Failure::from(collbench_core::stdout::StdoutError::from(io));
            stdout::say(format!("collbench: {}", f.message));
            std::process::exit(f.outcome.code());
        }
        std::process::exit(
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                Outcome::Usage.code()
            } else {
                Outcome::Ok.code()
            },
        );
    }
    let rendered = e.render().to_string();
    let command = prog;
    let hint = format!("(see '{command} --help')");
    if let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) {
        let number = arg
            .strip_prefix('-')
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'));
        if e.kind() == ErrorKind::UnknownArgument && number.is_some() {
            return Failure::usage(format!(
                "negative value '{arg}': counts, sizes and times are 0 or more {hint}"
            ));
        }
    }
    if e.kind() == ErrorKind::MissingRequiredArgument {
        let missing: Vec<String> = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(v)) => v.clone(),
            Some(ContextValue::String(v)) => vec![v.clone()],
            _ => Vec::new(),
        };
        let them = if missing.len() == 1 { "it" } else { "them" };
        return Failure::usage(format!(
            "missing {}: {command} needs {them} {hint}",
            missing.join(", ")
        ));
    }
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
    Failure::usage(format!("{first}{values} {hint}"))
}

/// The (sub)command an argument list names, e.g. `collbench gen slurm`,
/// whose help explains a mistake in it.
fn command_path(argv: &[String]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["collbench".to_string()];
    for arg in argv.iter().skip(1) {
        if arg == "--" {
            break;
        }
        if let Some(sub) = cmd.find_subcommand(arg).cloned() {
            path.push(arg.clone());
            cmd = sub;
        }
    }
    path.join(" ")
}

/// An error and its causes on one line, leaving out a cause whose text the
/// line already holds and Rust's "(os error N)" suffixes.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let text = match text.find(" (os error ") {
            Some(i) if text.ends_with(')') => text[..i].to_string(),
            _ => text,
        };
        if !out.contains(&text) {
            if !out.is_empty() {
                out += ": ";
            }
            out += &text;
        }
    }
    out
}

/// A library's error as a usage failure, its chain of causes on one line
/// (a crate's typed error, such as `collbench_gen::Error`, is converted
/// here, at the CLI's boundary).
fn usage(e: impl Into<anyhow::Error>) -> Failure {
    exit::library_failure(&e.into(), Outcome::Usage)
}

/// `<op>_perf`: `collbench run <op>` with nccl-tests' defaults.
fn alias_main(
    coll: collbench_core::Collective,
    argv_os: &[std::ffi::OsString],
    argv: &[String],
    prog: &str,
) -> Result<Outcome, Failure> {
    let mut cli = AliasCli::try_parse_from(argv_os).map_err(|e| clap_failure(e, prog))?;
    if let Some(extra) = cli.args.ops.first() {
        return Err(Failure::usage(format!(
            "{prog} runs {} only, so '{extra}' is not understood: use `collbench run {} {extra}` for more collectives (see '{prog} --help')",
            coll.name(),
            coll.name()
        )));
    }
    cli.args.ops = vec![coll.name().to_string()];
    cli.args.mode = Mode::Alias;
    cmd::run::run(&cli.args, argv)
}

fn real_main() -> Result<Outcome, Failure> {
    stdout::refuse_closed().map_err(Failure::usage)?;
    // File names are bytes: clap reads the arguments as the OS gives them
    // (a non-UTF-8 path works); `argv` is for messages and the record.
    let argv_os: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let argv: Vec<String> = argv_os
        .iter()
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
        return alias_main(coll, &argv_os, &argv, &prog);
    }
    aliases::refuse_unknown_perf_name(&prog)?;
    let cli = Cli::try_parse_from(&argv_os).map_err(|e| clap_failure(e, &command_path(&argv)))?;
    match cli.command {
        Command::Run(a) => cmd::run::run(&a, &argv),
        Command::Tune(a) => tune::tune(&a),
        Command::Preflight(a) => preflight::run(&a),
        Command::TunerPlugin(a) => tuner_plugin_cmd::run(&a),
        Command::Gen(a) => cmd::gen::run(&a),
        Command::Report { report, force } => cmd::report::run_report(&report, force),
        Command::Compare(a) => cmd::report::run_compare(&a),
        Command::Check {
            check,
            backend,
            watch,
            launch,
            force,
        } => cmd::check::run(&check, &backend, &watch, &launch, force),
        Command::Doctor(a) => cmd::doctor::run(&a),
        Command::Expect(a) => cmd::expect::run(&a),
        Command::Baselines(a) => cmd::check::run_baselines(&a),
        Command::InstallAliases { dir, force } => {
            aliases::install(&dir, force).map(|_| Outcome::Ok)
        }
    }
}

fn main() {
    stdout::install_console();
    let outcome = match real_main() {
        Ok(o) => o,
        Err(f) => {
            if !exit::already_said(f.outcome) {
                stdout::say(format!("collbench: {}", f.message.trim_end()));
            }
            f.outcome
        }
    };
    exit::terminate(outcome)
}
