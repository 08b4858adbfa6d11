//! Helpers shared by the integration tests: parse a `collbench gen` command
//! line exactly as the CLI does and render it.

#![allow(dead_code)]

use clap::Parser;

#[path = "../../src/cmd/value_enum.rs"]
#[macro_use]
mod value_enum;
#[path = "../../src/cmd/gen/args.rs"]
mod gen_cmd;
use gen_cmd::GenArgs;

#[derive(Parser)]
#[command(name = "gen")]
struct Cli {
    #[command(flatten)]
    gen: GenArgs,
}

/// Parses `argv` (without the program name) and renders the launch file.
pub fn gen(argv: &[&str]) -> anyhow::Result<String> {
    let cli = Cli::try_parse_from(std::iter::once("gen").chain(argv.iter().copied()))?;
    Ok(collbench_gen::render(&(&cli.gen).into())?)
}

/// [`gen`] of a command line written as one string (words split on white
/// space; no quoting).
pub fn gen_line(line: &str) -> anyhow::Result<String> {
    gen(&line.split_whitespace().collect::<Vec<_>>())
}

/// The error line of a refused command line.
pub fn gen_err(argv: &[&str]) -> String {
    match gen(argv) {
        Ok(text) => panic!("{argv:?} was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}
