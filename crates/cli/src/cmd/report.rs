//! `collbench report` and `collbench compare`: their flags, converted
//! into [`collbench_report::ReportOptions`] and
//! [`collbench_report::CompareOptions`], and their bodies.

use crate::exit::{Failure, Outcome};
use collbench_report::{CompareFormat as LibCompareFormat, CompareOptions, Format, ReportOptions};
use std::path::PathBuf;

/// `collbench report` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Logs or directories of logs (nccl-tests/rccl-tests text or JSON,
    /// nccom-test, OSU, NVSHMEM perftest, collbench JSON); none needed
    /// with --matrix.
    #[arg(required_unless_present = "matrix", value_name = "FILES|DIRS")]
    pub inputs: Vec<PathBuf>,
    /// Output file: `.md` for Markdown, `.html` for a self-contained page
    /// with charts. Markdown on stdout when absent.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Read every input as this format instead of detecting it.
    #[arg(
        long = "input-format",
        alias = "format",
        value_enum,
        value_name = "FORMAT"
    )]
    pub format: Option<InputFormat>,
    /// `collbench check --json` output whose pairwise bandwidth matrix the
    /// HTML report draws as a heatmap (repeatable).
    #[arg(long, value_name = "CHECK_JSON")]
    pub matrix: Vec<PathBuf>,
    /// Fail (exit 2) when a file in a folder cannot be read as a log, or a
    /// log holds a line its reader cannot place (a row of the wrong shape,
    /// a figure that is not a number), naming the file and line. Without
    /// it such files are listed and such lines skipped, counted in one
    /// line on stderr and in the report's "Data quality" section.
    #[arg(long)]
    pub strict: bool,
    /// The machine the logs ran on: a topology file or a built-in's name
    /// (as `expect --topology`). Logs without a topology of their own
    /// (nccl-tests and the other tools) get its ceilings: "% of ceiling"
    /// and the bottleneck beside each case.
    #[arg(long, value_name = "FILE|NAME")]
    pub topology: Option<PathBuf>,
}

impl ReportArgs {
    /// The options, or the one line that says what is wrong.
    pub fn options(&self) -> Result<ReportOptions, String> {
        Ok(ReportOptions {
            inputs: self.inputs.clone(),
            output: self.output.clone(),
            format: self.format.map(|f| f.0),
            matrix: self.matrix.clone(),
            strict: self.strict,
            topology: described(self.topology.as_deref())?,
        })
    }
}

/// The machine `--topology` describes, loaded and checked.
fn described(arg: Option<&std::path::Path>) -> Result<Option<collbench_core::Topology>, String> {
    arg.map(collbench_ceiling::builtin::load)
        .transpose()
        .map_err(|e| e.to_string())
}

/// `collbench compare` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The reference: a log, or a folder whose files are runs of the same
    /// sweep (each file one run).
    pub base: PathBuf,
    /// The run to judge against BASE: a log, or a folder of runs.
    pub new: PathBuf,
    /// Percent change that counts as a regression: busbw (algbw where the
    /// op has no bus factor) below BASE by more than PCT from 1 MiB, time
    /// slower by more than 2 x PCT and 5 µs below. A case regresses only
    /// when the 95% interval of its NEW/BASE ratio lies wholly beyond its
    /// cut (PCT, or twice BASE's iteration spread where larger)
    /// and an adjacent case (next size, other placement) does too; the
    /// interval comes from the inputs' own noise (see --base-run). Exit
    /// status: 0 no regression; 1 regression, or NEW has wrong results, an
    /// out-of-bounds FAILED line, an error or crash line, or fewer cases
    /// than BASE; 2 an input cannot be read, the two share no case, or
    /// BASE has wrong results (--trust-base); 3 cannot tell (an op drops
    /// beyond PCT within its noise).
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub threshold: f64,
    /// Another run of BASE (repeatable; a folder as BASE does the same).
    /// With several runs a side, each case's noise is its spread across
    /// runs, the best estimate; with one, per-iteration statistics
    /// (collbench JSON, nccl-tests -I or -J) or the log's scatter between
    /// neighbouring sizes and placements.
    #[arg(long = "base-run", value_name = "FILE")]
    pub base_runs: Vec<PathBuf>,
    /// Another run of NEW (repeatable; a folder as NEW does the same).
    #[arg(long = "new-run", value_name = "FILE")]
    pub new_runs: Vec<PathBuf>,
    /// Compare against a BASE that has wrong results or was cut short
    /// (otherwise exit 2: a reference that cannot be trusted).
    #[arg(long)]
    pub trust_base: bool,
    /// NEW measures fewer cases than BASE on purpose (otherwise a case of
    /// BASE missing from NEW means NEW was cut short: exit 1).
    #[arg(long)]
    pub subset: bool,
    /// What stdout carries: the tables and verdict line, or the same
    /// findings as JSON.
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Read both inputs as this format instead of detecting it.
    #[arg(long = "input-format", value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,
    /// Also write the comparison as a self-contained HTML page: BASE and
    /// NEW overlaid per op (bandwidth and time against size), NEW's 95%
    /// interval, regressions marked, then the per-case table.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Replace an existing --html file (never an input).
    #[arg(long)]
    pub force: bool,
    /// The machine both sides ran on: a topology file or a built-in's
    /// name (as `expect --topology`). Logs without a topology of their own
    /// get its ceilings: NEW's "% of ceiling" beside each case.
    #[arg(long, value_name = "FILE|NAME")]
    pub topology: Option<PathBuf>,
    /// Fail (exit 2) when an input holds a line its reader cannot place
    /// (a row of the wrong shape, a figure that is not a number), or a
    /// file of a folder cannot be read, naming the file and line. Without
    /// it such lines are skipped and counted in one line on stderr (and
    /// in the JSON's `skipped_lines`).
    #[arg(long)]
    pub strict: bool,
}

impl CompareArgs {
    /// The options, or the one line that says what is wrong.
    pub fn options(&self) -> Result<CompareOptions, String> {
        Ok(CompareOptions {
            base: self.base.clone(),
            new: self.new.clone(),
            base_runs: self.base_runs.clone(),
            new_runs: self.new_runs.clone(),
            threshold: self.threshold,
            format: self.format.into(),
            input_format: self.input_format.map(|f| f.0),
            trust_base: self.trust_base,
            subset: self.subset,
            html: self.html.clone(),
            topology: described(self.topology.as_deref())?,
            strict: self.strict,
        })
    }
}

value_enum! {
    /// What `compare` prints on stdout.
    pub enum CompareFormat => LibCompareFormat {
        /// The sides, the per-case table, regressions and the verdict line.
        Text,
        /// The same findings as one JSON object (`schema`: collbench-compare/1).
        Json,
    }
}

/// The log formats collbench reads, as clap values: the library names and
/// describes them ([`Format::ALL`], `name`, `about`), so a new format is
/// the library's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputFormat(pub Format);

const INPUT_FORMATS: [InputFormat; Format::ALL.len()] = {
    let mut all = [InputFormat(Format::NcclTests); Format::ALL.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = InputFormat(Format::ALL[i]);
        i += 1;
    }
    all
};

impl clap::ValueEnum for InputFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &INPUT_FORMATS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

/// `collbench report`: the inputs read, the report printed or written.
pub fn run_report(report: &ReportArgs, force: bool) -> Result<Outcome, Failure> {
    if let Some(path) = &report.output {
        let inputs: Vec<&std::path::Path> = report
            .inputs
            .iter()
            .chain(&report.matrix)
            .map(|p| p.as_path())
            .collect();
        crate::outputs::claim("-o", path, force, &inputs)?;
    }
    let options = report.options().map_err(Failure::usage)?;
    let (outcome, markdown) = collbench_report::report_main(&options)
        .map_err(|e| crate::exit::library_failure(&e.into(), Outcome::ReportUnusable))?;
    if let Some(markdown) = markdown {
        crate::stdout::print(&markdown)?;
    }
    Ok(Outcome::report(outcome))
}

/// `collbench compare`: two sides judged, the verdict printed.
pub fn run_compare(a: &CompareArgs) -> Result<Outcome, Failure> {
    if let Some(path) = &a.html {
        let inputs: Vec<&std::path::Path> = [&a.base, &a.new]
            .into_iter()
            .chain(a.base_runs.iter().chain(&a.new_runs))
            .map(|p| p.as_path())
            .collect();
        crate::outputs::claim("--html", path, a.force, &inputs)?;
    }
    let options = a.options().map_err(Failure::usage)?;
    let (outcome, text) = collbench_report::compare_main(&options).map_err(crate::usage)?;
    crate::stdout::print(&text)?;
    Ok(Outcome::compare(outcome))
}
