//! `run`'s flags into a typed [`RunRequest`], once: every check of a flag
//! is here, and what leaves is typed (`-z` a [`Blocking`], `-G` a
//! [`Graph`], `-c` [`Checks`], the output files claimed, the watchdog, the
//! one [`collbench_nccl::NcclOptions`]). Nothing after this file reads a
//! flag.

use super::{Iters, RunArgs};
use crate::args::{BackendArgs, Mode};
use crate::exit::Failure;
use crate::interrupt::OutputFile;
use crate::launch_args::LaunchArgs;
use collbench_core::auto_iters::AutoIters;
use collbench_core::nccl_path::gate::Required;
use collbench_core::size::Step;
use collbench_output::Format;
use collbench_runner::{Average, Blocking, Checks, Graph, Plan, RootSel, Timing, Watchdog};
use std::path::Path;

/// What `run` (or an `<op>_perf` alias) is asked to do, typed.
pub struct RunRequest<'a> {
    /// What runs and how it is measured, `Timing` included.
    pub plan: Plan,
    /// The sizes of one sweep (checked: a bad `-b/-e/-f/-i` is refused).
    pub sizes: Vec<u64>,
    /// Where results go.
    pub outputs: Outputs,
    /// How the run is watched (`-T`, else `--watchdog`; the test hooks).
    pub watchdog: Watchdog,
    /// The NCCL backend's options (the process's place on its host is
    /// filled in when the world is known).
    pub nccl: collbench_nccl::NcclOptions,
    /// `--tuner-config`: the one file `run` reads.
    pub tuner_config: Option<&'a Path>,
    /// `--require-transport`: the paths NCCL must take.
    pub required: &'a [Required],
    /// Which backend and how many ranks.
    pub backend: &'a BackendArgs,
    /// The launcher's flags.
    pub launch: &'a LaunchArgs,
    /// `run` or an alias (nccl-tests' defaults).
    pub mode: Mode,
}

/// Where `run`'s results go and what its text shows.
pub struct Outputs {
    /// The format of stdout (`--format`).
    pub stdout: Format,
    /// `--output` and `-J`, claimed before anything runs.
    pub files: Vec<OutputFile>,
    /// `-q`: nothing on stdout.
    pub quiet: bool,
    /// `--per-rank`: the slowest ranks after each row.
    pub per_rank: bool,
    /// `--ceiling`: the ceilings after the rows.
    pub ceiling: bool,
    /// `--explain`: the explanation's columns in the text.
    pub explain_columns: bool,
}

impl Outputs {
    /// Whether the text streams to stdout as rows are measured.
    pub fn prints_text(&self) -> bool {
        !self.quiet && self.stdout == Format::Text
    }
}

impl<'a> TryFrom<&'a RunArgs> for RunRequest<'a> {
    type Error = Failure;

    /// Every mistake is a usage failure, in the order a run meets them:
    /// the plan, its sizes, then the output files.
    fn try_from(a: &'a RunArgs) -> Result<RunRequest<'a>, Failure> {
        let (mut plan, sizes) = checked_plan(a)?;
        let stdout = Format::from(a.format);
        let files = claim_files(a)?;
        // The explanation pass runs when the text asks for it or a record
        // (JSON, CSV) will carry it; plain text runs never load the plugin.
        let records = |f: Format| matches!(f, Format::Json | Format::Csv);
        plan.explain = a.explain || records(stdout) || files.iter().any(|f| records(f.format));
        let nccl = collbench_nccl::NcclOptions {
            nccl_only: a.nccl_only(),
            timeout_s: a.timeout,
            stream_null: a.stream_null > 0,
            explain: plan.explain,
            ..a.backend.nccl_options(a.mode)
        };
        Ok(RunRequest {
            outputs: Outputs {
                stdout,
                files,
                quiet: a.quiet,
                per_rank: a.per_rank,
                ceiling: a.ceiling,
                explain_columns: a.explain,
            },
            watchdog: a.watch.watchdog(a.timeout),
            nccl,
            tuner_config: a.tuner_config.as_deref(),
            required: crate::transport_gate::required(a.require_transport.as_ref()),
            backend: &a.backend,
            launch: &a.launch,
            mode: a.mode,
            plan,
            sizes,
        })
    }
}

/// The plan of the flags and the sizes of its sweep, checked (what a
/// launch file's arguments are held to by `gen` as well).
pub fn checked_plan(a: &RunArgs) -> Result<(Plan, Vec<u64>), Failure> {
    let plan = plan_of(a)?;
    let sizes = plan
        .sizes()
        .map_err(|e| super::plan_words::plan_failure(e.into()))?;
    Ok((plan, sizes))
}

/// `-b`, `-e` and the step (`-f`, `-i`), with the defaults of `mode`.
fn sweep_of(a: &RunArgs) -> (u64, u64, Step) {
    let (def_min, def_max, def_factor) = match a.mode {
        Mode::Alias => (32 << 20, 32 << 20, None),
        Mode::Native => (8, 128 << 20, Some(2)),
    };
    let min_bytes = a.minbytes.unwrap_or(def_min);
    let max_bytes = a
        .maxbytes
        .unwrap_or(if a.minbytes.is_some() && a.maxbytes.is_none() {
            min_bytes.max(def_max)
        } else {
            def_max
        });
    // Factor and step limits, and -b <= -e, are checked once, by the
    // sweep (`collbench_core::size::sweep`), when `run` asks for the sizes.
    let step = match (a.stepfactor, a.stepbytes) {
        (Some(f), _) => Step::Factor(f),
        (None, Some(b)) => Step::Bytes(b),
        (None, None) => def_factor.map(Step::Factor).unwrap_or(Step::Bytes(1 << 20)),
    };
    (min_bytes, max_bytes, step)
}

/// Builds the plan from the flags; every mistake is a usage failure.
fn plan_of(a: &RunArgs) -> Result<Plan, Failure> {
    let u = |m: String| Failure::usage(m);
    let collectives = a.collectives().map_err(u)?;
    let dtypes = a.dtypes().map_err(u)?;
    let redops = a.redops().map_err(u)?;
    let (min_bytes, max_bytes, step) = sweep_of(a);
    let average = Average::from_flag(a.average).ok_or_else(|| {
        u(format!(
            "-a/--average must be 0, 1, 2 or 3 (got {})",
            a.average
        ))
    })?;
    let (iters, auto_iters) = match a.iters {
        Iters::Fixed(n) => (n, None),
        Iters::Auto => (20, Some(AutoIters::default())),
    };
    if a.agg_iters == 0 {
        return Err(u("-m/--agg_iters must be at least 1".into()));
    }
    let blocking = blocking_of(a)?;
    let roots = match a.root {
        -1 => RootSel::All,
        r if r >= 0 => RootSel::Fixed(r as usize),
        r => {
            return Err(u(format!(
                "-r/--root must be a rank or -1 for every root (got {r})"
            )))
        }
    };
    let (keep_iter_times, per_iter_skip) = per_iter(a);
    // alltoallv's traffic comes from nccl-tests' environment variables.
    let traffic = if collectives.contains(&collbench_core::Collective::AllToAllV) {
        collbench_runner::plan::traffic_from_env().map_err(u)?
    } else {
        Default::default()
    };
    Ok(Plan {
        traffic,
        collectives,
        dtypes,
        redops,
        roots,
        min_bytes,
        max_bytes,
        step,
        timing: Timing {
            warmup_iters: a.warmup_iters,
            iters,
            agg_iters: a.agg_iters,
            graph: Graph::from_flag(a.cudagraph),
            blocking,
            keep_iter_times,
            arrival: a.arrival,
            ..Timing::default()
        },
        auto_iters,
        cycles: a.run_cycles,
        check: Checks::from_flag(a.check),
        average,
        cputime: a.report_cputime > 0,
        timestamps: a.report_timestamps > 0,
        unalign: a.unalign,
        test_corrupt: a.test_corrupt,
        placement_checks: a.placement_checks(),
        per_iter_skip,
        memory_report: a.memory != 0,
        ..Plan::default()
    })
}

/// `-z` as nccl-tests settles it with `-G`.
fn blocking_of(a: &RunArgs) -> Result<Blocking, Failure> {
    let blocking = Blocking::from_flag(a.blocking).ok_or_else(|| {
        Failure::usage(format!(
            "-z/--blocking must be 0, 1, 2 or 3 (got {})",
            a.blocking
        ))
    })?;
    // nccl-tests' own rule and line: -z 3 waits between iterations, which
    // a captured graph cannot.
    if blocking == Blocking::BarrierEachIteration && Graph::from_flag(a.cudagraph).is_on() {
        crate::stdout::say(
            "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.",
        );
        return Ok(Blocking::Off);
    }
    Ok(blocking)
}

/// -I and -K as nccl-tests settles them: a value it cannot use is turned
/// off with its warning on stderr, and the run goes on.
fn per_iter(a: &RunArgs) -> (bool, u32) {
    // Under -n auto a row takes at least one iteration and often many: any
    // -K stands, and the runner never skips a row's every iteration.
    let iters = match a.iters {
        Iters::Fixed(n) => n,
        Iters::Auto => u32::MAX,
    };
    let graph = Graph::from_flag(a.cudagraph);
    let (timing, skip, warnings) =
        per_iter_settings(a.per_iter_timing, a.per_iter_skip, iters, graph);
    for w in warnings {
        crate::stdout::say(&w);
    }
    (timing, skip)
}

/// The checks of [`per_iter`], in nccl-tests' order and words.
fn per_iter_settings(timing: i64, skip: i64, iters: u32, graph: Graph) -> (bool, u32, Vec<String>) {
    let mut warnings = Vec::new();
    let mut timing = timing;
    let mut skip = skip;
    if timing != 0 && timing != 1 {
        warnings
            .push("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.".to_string());
        timing = 0;
    }
    if timing == 1 && graph.is_on() {
        warnings.push(
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."
                .to_string(),
        );
        timing = 0;
    }
    if skip < 0 || skip >= i64::from(iters) {
        warnings.push(format!(
            "per-iteration skip (-K) must be between 0 and {}. Disabling.",
            i64::from(iters) - 1
        ));
        skip = 0;
    }
    if skip != 0 && timing == 0 {
        warnings.push(
            "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.".to_string(),
        );
        skip = 0;
    }
    (timing == 1, skip as u32, warnings)
}

/// An output file, checked (see `outputs`) before anything runs so a long
/// run never ends in "cannot write" or replaces a file by surprise.
fn output_file(
    flag: &'static str,
    path: &Path,
    format: Option<Format>,
    force: bool,
    inputs: &[&Path],
) -> Result<OutputFile, Failure> {
    let format = format.or_else(|| Format::from_path(path)).ok_or_else(|| {
        Failure::usage(format!(
            "cannot tell the format of --output {}: use a .txt, .json, .csv or .md file name (for results on standard output, use --format)",
            path.display()
        ))
    })?;
    crate::outputs::claim(flag, path, force, inputs)?;
    Ok(OutputFile {
        flag,
        path: path.to_path_buf(),
        format,
    })
}

/// The output files (`--output`, `-J`), claimed before anything runs.
fn claim_files(a: &RunArgs) -> Result<Vec<OutputFile>, Failure> {
    let mut files = Vec::new();
    let (output, json) = a.output_paths().map_err(Failure::usage)?;
    if let (Some(o), Some(j)) = (output, json) {
        crate::outputs::distinct(("--output", o), ("-J", j))?;
    }
    // `--tuner-config` is the one file `run` reads.
    let inputs: Vec<&Path> = a.tuner_config.as_deref().into_iter().collect();
    if let Some(p) = output {
        files.push(output_file("--output", p, None, a.force, &inputs)?);
    }
    if let Some(p) = json {
        files.push(output_file(
            "-J",
            p,
            Some(Format::NcclTestsJson),
            a.force,
            &inputs,
        )?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::per_iter_settings;
    use collbench_runner::Graph;

    #[test]
    fn per_iter_values_nccl_tests_cannot_use_are_turned_off_with_its_warning() {
        let (off, on) = (Graph::Off, Graph::from_flag(1));
        assert_eq!(per_iter_settings(1, 3, 20, off), (true, 3, vec![]));
        assert_eq!(per_iter_settings(0, 0, 20, off), (false, 0, vec![]));
        let (on_, _, w) = per_iter_settings(2, 0, 20, off);
        assert!(!on_);
        assert_eq!(
            w,
            ["per-iteration timing (-I) only supports 0=off or 1=on. Disabling."]
        );
        let (on_, _, w) = per_iter_settings(1, 0, 20, on);
        assert!(!on_);
        assert_eq!(
            w,
            ["per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."]
        );
        let (on_, skip, w) = per_iter_settings(1, 20, 20, off);
        assert_eq!((on_, skip), (true, 0));
        assert_eq!(
            w,
            ["per-iteration skip (-K) must be between 0 and 19. Disabling."]
        );
        let (_, skip, w) = per_iter_settings(1, -1, 20, off);
        assert_eq!(skip, 0);
        assert_eq!(w.len(), 1);
        let (on_, skip, w) = per_iter_settings(0, 2, 20, off);
        assert_eq!((on_, skip), (false, 0));
        assert_eq!(
            w,
            ["per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling."]
        );
    }
}
