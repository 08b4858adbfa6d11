//! `collbench run` and the `<op>_perf` aliases: flags -> plan -> backend ->
//! runner -> printers and files.

use crate::args::{Iters, RunArgs};
use crate::backend_open::{self, Mode, Tuning};
use crate::exit::{Failure, Outcome};
use crate::interrupt::{Keeper, Keeping, OutputFile};
use crate::observer::TextObserver;
use crate::progress_line::Sweep;
use collbench_core::auto_iters::AutoIters;
use collbench_core::size::Step;
use collbench_core::Record;
use collbench_output::{text::TextOptions, Format};
use collbench_runner::{Average, Blocking, Plan, RootSel, Runner};

/// `-b`, `-e` and the step (`-f`, `-i`), with the defaults of `mode`.
fn sweep_of(a: &RunArgs, mode: Mode) -> (u64, u64, Step) {
    let (def_min, def_max, def_factor) = match mode {
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
pub fn plan_from_args(a: &RunArgs, mode: Mode) -> Result<Plan, Failure> {
    let u = |m: String| Failure::usage(m);
    let collectives = a.collectives().map_err(u)?;
    let dtypes = a.dtypes().map_err(u)?;
    let redops = a.redops().map_err(u)?;
    let (min_bytes, max_bytes, step) = sweep_of(a, mode);
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
    let blocking = Blocking::from_flag(a.blocking).ok_or_else(|| {
        u(format!(
            "-z/--blocking must be 0, 1, 2 or 3 (got {})",
            a.blocking
        ))
    })?;
    // nccl-tests' own rule and line: -z 3 waits between iterations, which
    // a captured graph cannot.
    let blocking = if blocking == Blocking::BarrierEachIteration && a.cudagraph >= 1 {
        crate::stdout::say(
            "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.",
        );
        Blocking::Off
    } else {
        blocking
    };
    let roots = roots_of(a.root).map_err(u)?;
    let (per_iter_timing, per_iter_skip) = per_iter(a);
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
        warmup_iters: a.warmup_iters,
        iters,
        auto_iters,
        agg_iters: a.agg_iters,
        cycles: a.run_cycles,
        check: a.check,
        graph: a.cudagraph,
        blocking,
        average,
        cputime: a.report_cputime > 0,
        timestamps: a.report_timestamps > 0,
        unalign: a.unalign,
        test_corrupt: a.test_corrupt,
        bitwise_repeats: a.bitwise,
        test_bitwise_flip: a.test_bitwise_flip,
        per_iter_timing,
        per_iter_skip,
        memory_report: a.memory != 0,
        arrival: a.arrival,
        ..Plan::default()
    })
}

/// `-r`: one root, or -1 for every root.
fn roots_of(root: i64) -> Result<RootSel, String> {
    match root {
        -1 => Ok(RootSel::All),
        r if r >= 0 => Ok(RootSel::Fixed(r as usize)),
        r => Err(format!(
            "-r/--root must be a rank or -1 for every root (got {r})"
        )),
    }
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
    let (timing, skip, warnings) =
        per_iter_settings(a.per_iter_timing, a.per_iter_skip, iters, a.cudagraph);
    for w in warnings {
        crate::stdout::say(&w);
    }
    (timing, skip)
}

/// The checks of [`per_iter`], in nccl-tests' order and words.
fn per_iter_settings(timing: i64, skip: i64, iters: u32, graph: u32) -> (bool, u32, Vec<String>) {
    let mut warnings = Vec::new();
    let mut timing = timing;
    let mut skip = skip;
    if timing != 0 && timing != 1 {
        warnings
            .push("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.".to_string());
        timing = 0;
    }
    if timing == 1 && graph >= 1 {
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
    path: &std::path::Path,
    format: Option<Format>,
    force: bool,
    inputs: &[&std::path::Path],
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

/// A failed write of the results to stdout: exit 2, one line.
fn stdout_failure(e: std::io::Error) -> Failure {
    collbench_core::stdout::StdoutError::from(e).into()
}

/// The output files (`--output`, `-J`), claimed before anything runs.
fn claim_files(a: &RunArgs) -> Result<Vec<OutputFile>, Failure> {
    let mut files = Vec::new();
    let (output, json) = a.output_paths().map_err(Failure::usage)?;
    if let (Some(o), Some(j)) = (output, json) {
        crate::outputs::distinct(("--output", o), ("-J", j))?;
    }
    // `--tuner-config` is the one file `run` reads.
    let inputs: Vec<&std::path::Path> = a.tuner_config.as_deref().into_iter().collect();
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

/// The record in the files, then on stdout (unless streamed as text; the
/// rest of it, after the first line written as the run began); the
/// outcome from its wrong elements. The files come first and are written
/// whatever `printed` (the text's own writes) says: a stdout that fails
/// at the end (`| head -1`, `> /dev/full`) once left neither file.
fn write_results(
    a: &RunArgs,
    stdout_format: Format,
    files: Vec<OutputFile>,
    record: &collbench_core::Record,
    (keeper, printed): (&Keeper, Result<(), Failure>),
) -> Result<Outcome, Failure> {
    for f in files {
        let bytes = f.format.exporter().serialize(record);
        std::fs::write(&f.path, bytes).map_err(|e| {
            Failure::usage(format!(
                "cannot write {} {}: {}",
                f.flag,
                f.path.display(),
                crate::outputs::io_reason(&e)
            ))
        })?;
    }
    printed?;
    if !a.quiet && stdout_format != Format::Text {
        let bytes = stdout_format.exporter().serialize(record);
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(keeper.stdout_rest(&bytes))
            .and_then(|_| out.flush())
            .map_err(stdout_failure)?;
    }
    let wrong = record.total_wrong();
    if wrong > 0 {
        crate::stdout::say(format!(
            "collbench: {wrong} wrong elements: results are NOT correct (exit {})",
            Outcome::Wrong.code()
        ));
        return Ok(Outcome::Wrong);
    }
    if let Some(n) = collbench_output::text::bitwise::mismatches(&record.results).filter(|n| *n > 0)
    {
        crate::stdout::say(format!(
            "collbench: {n} placement(s) returned different bits on repeats of the same input (-B): results are NOT repeatable (exit {})",
            Outcome::Wrong.code()
        ));
        return Ok(Outcome::Wrong);
    }
    Ok(Outcome::Ok)
}

/// The text's last lines (summary, `--ceiling`): how its writes went,
/// for [`write_results`] to say after the files are written.
fn finish_text(
    a: &RunArgs,
    obs: &mut TextObserver,
    record: &Record,
    print_text: bool,
) -> Result<(), Failure> {
    obs.finish(record);
    if let Some(e) = obs.write_error.take() {
        return Err(stdout_failure(e));
    }
    if a.ceiling && print_text {
        crate::stdout::print(&crate::run_ceiling::text_lines(record))?;
    }
    // After nccl-tests' own footer: the path NCCL took, where it is known.
    if let (true, Some(line)) = (print_text, crate::transport_gate::text_line(record)) {
        crate::stdout::print(&line)?;
    }
    Ok(())
}

/// Ceilings go in every record a file or stdout keeps (not -J's
/// nccl-tests layout, nor plain text unless --ceiling asks).
fn add_ceilings(a: &RunArgs, files: &[OutputFile], stdout_format: Format, record: &mut Record) {
    let keeps = |f: Format| matches!(f, Format::Json | Format::Csv | Format::Markdown);
    let kept = files.iter().map(|f| keeps(f.format));
    if crate::run_ceiling::wanted(a.ceiling, kept.chain([!a.quiet && keeps(stdout_format)])) {
        crate::run_ceiling::annotate(record);
    }
}

/// Runs the benchmark.
pub fn run(a: &RunArgs, argv: &[String], mode: Mode) -> Result<Outcome, Failure> {
    let mut plan = plan_from_args(a, mode)?;
    let sizes = plan.sizes().map_err(|e| Failure::usage(e.to_string()))?;
    let stdout_format = Format::from(a.format);
    let files = claim_files(a)?;
    // The explanation pass runs when the text asks for it or a record
    // (JSON, CSV) will carry it; plain text runs never load the plugin.
    plan.explain = a.explain
        || matches!(stdout_format, Format::Json | Format::Csv)
        || files
            .iter()
            .any(|f| matches!(f.format, Format::Json | Format::Csv));

    let tuning = Tuning {
        nccl_only: a.nccl_only(),
        timeout: a.timeout,
        stream_null: a.stream_null,
        explain: plan.explain,
    };
    // The tuner plugin goes in before the first communicator.
    let tuner = (a.tuner_config.as_ref())
        .map(|p| Ok::<_, Failure>((p, crate::tune::apply_tuner_config(p, &a.backend)?)))
        .transpose()?;
    let watchdog = a.watch.watchdog(a.timeout);
    // From here on Ctrl-C keeps the rows measured (written, marked
    // partial, exit 130).
    let streamed = a.quiet || stdout_format == Format::Text;
    let keeper = Keeper::install(files.clone(), (!streamed).then_some(stdout_format));
    let mut opened = backend_open::open(&a.backend, &a.launch, tuning, mode, &watchdog)?;
    if opened.control.rank() != 0 {
        keeper.not_root();
    }
    let world_size = opened.backend.world_size();
    let required = crate::transport_gate::required(a.require_transport.as_ref());
    crate::transport_gate::refuse_without_nccl(required, &opened.backend.info().name)?;
    // Before the header: a root no rank has is the user's mistake.
    plan.root_in_range(world_size).map_err(Failure::usage)?;

    let forever = plan.cycles == 0;
    let sweep = Sweep::new(
        &plan.collectives,
        &sizes,
        |c| plan.variants(c, world_size).len() * plan.cycles.max(1) as usize,
        forever,
    );
    let options = TextOptions {
        cputime: plan.cputime,
        timestamps: plan.timestamps,
        explain: a.explain,
        per_iter: plan.per_iter_timing.then_some(plan.per_iter_skip),
        bitwise: plan.bitwise_repeats,
    };
    let print_text = !a.quiet && stdout_format == Format::Text;
    let mut obs = TextObserver::new(print_text, options, sweep, a.quiet);
    obs.per_rank = a.per_rank;
    let record = crate::meta::new_record(argv);
    let mut runner =
        Runner::new(opened.backend.as_mut(), opened.control.as_ref(), plan).with_watchdog(watchdog);
    let ran = runner.run(
        record,
        &mut Keeping {
            inner: &mut obs,
            keeper: &keeper,
        },
    );
    keeper.done();
    let Some(mut record) = ran? else {
        return Ok(Outcome::Ok);
    };
    add_ceilings(a, &files, stdout_format, &mut record);
    let printed = finish_text(a, &mut obs, &record, print_text);
    if let Some((path, plugin)) = &tuner {
        crate::stdout::say(crate::tune::tuner_config_note(path, plugin));
    }
    match write_results(a, stdout_format, files, &record, (&keeper, printed))? {
        Outcome::Ok => crate::transport_gate::judge(&record, required).map(|()| Outcome::Ok),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::per_iter_settings;

    #[test]
    fn per_iter_values_nccl_tests_cannot_use_are_turned_off_with_its_warning() {
        assert_eq!(per_iter_settings(1, 3, 20, 0), (true, 3, vec![]));
        assert_eq!(per_iter_settings(0, 0, 20, 0), (false, 0, vec![]));
        let (on, _, w) = per_iter_settings(2, 0, 20, 0);
        assert!(!on);
        assert_eq!(
            w,
            ["per-iteration timing (-I) only supports 0=off or 1=on. Disabling."]
        );
        let (on, _, w) = per_iter_settings(1, 0, 20, 1);
        assert!(!on);
        assert_eq!(
            w,
            ["per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."]
        );
        let (on, skip, w) = per_iter_settings(1, 20, 20, 0);
        assert_eq!((on, skip), (true, 0));
        assert_eq!(
            w,
            ["per-iteration skip (-K) must be between 0 and 19. Disabling."]
        );
        let (_, skip, w) = per_iter_settings(1, -1, 20, 0);
        assert_eq!(skip, 0);
        assert_eq!(w.len(), 1);
        let (on, skip, w) = per_iter_settings(0, 2, 20, 0);
        assert_eq!((on, skip), (false, 0));
        assert_eq!(
            w,
            ["per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling."]
        );
    }
}
