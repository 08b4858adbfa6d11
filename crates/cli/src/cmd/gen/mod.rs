//! `collbench gen`: its flags (`args.rs`, self-contained: the CLI's tests
//! of the launch files include it to parse command lines exactly as the
//! CLI does) and its body: the collbench arguments a launch file carries
//! checked now, then the file written.

mod args;

pub use args::*;

use crate::exit::{Failure, Outcome};
use clap::Parser;

/// `collbench gen`: the launch file, on stdout or in `-o`.
pub fn run(a: &GenArgs) -> Result<Outcome, Failure> {
    check_embedded_args(a)?;
    if let Some(path) = &a.output {
        crate::outputs::claim("-o", path, a.force, &[])?;
    }
    if let Some(text) = collbench_gen::run(&a.into()).map_err(crate::usage)? {
        crate::stdout::print(&text)?;
    }
    Ok(Outcome::Ok)
}

/// The collbench arguments a launch file will run, parsed by the same
/// parser (and, for `run`, the same sweep rules) now, not on the cluster.
fn check_embedded_args(a: &GenArgs) -> Result<(), Failure> {
    let a = collbench_gen::GenOptions::from(a);
    let bad =
        |m: String| Failure::usage(format!("the collbench arguments after -- are wrong: {m}"));
    let program = std::path::Path::new(a.target.collbench_program())
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args = a.target.collbench_args();
    if collbench_core::Collective::from_perf_name(&program).is_some() {
        // `--collbench all_reduce_perf`: the ranks run the alias form.
        let argv: Vec<String> = std::iter::once(program.clone()).chain(args).collect();
        let mut cli = match crate::AliasCli::try_parse_from(&argv) {
            Ok(cli) => cli,
            Err(e) if !e.use_stderr() => return Ok(()),
            Err(e) => return Err(bad(crate::clap_failure(e, &program).message)),
        };
        if let Some(extra) = cli.args.ops.first() {
            return Err(bad(format!(
                "{program} takes no collective name ('{extra}')"
            )));
        }
        cli.args.mode = crate::args::Mode::Alias;
        crate::cmd::run::checked_plan(&cli.args).map_err(|f| bad(f.message))?;
        return Ok(());
    }
    let argv: Vec<String> = std::iter::once("collbench".to_string())
        .chain(args.iter().cloned())
        .collect();
    let cli = match crate::Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        // `-- run --help` in a launch file prints help on the cluster.
        Err(e) if !e.use_stderr() => return Ok(()),
        Err(e) => {
            return Err(bad(
                crate::clap_failure(e, &crate::command_path(&argv)).message
            ))
        }
    };
    if let crate::Command::Run(r) = cli.command {
        crate::cmd::run::checked_plan(&r).map_err(|f| bad(f.message))?;
    }
    Ok(())
}
