//! `collbench run` and the `<op>_perf` aliases: flags -> plan -> backend ->
//! runner -> printers and files.

use crate::args::RunArgs;
use crate::backend_open::{self, Mode, Tuning};
use crate::exit::{Failure, Outcome};
use crate::observer::TextObserver;
use collbench_core::size::Step;
use collbench_output::{text::TextOptions, Format};
use collbench_runner::{Average, Plan, RootSel, Runner};
use std::path::PathBuf;

/// Builds the plan from the flags; every mistake is a usage failure.
pub fn plan_from_args(a: &RunArgs, mode: Mode) -> Result<Plan, Failure> {
    let u = |m: String| Failure::usage(m);
    let collectives = a.collectives().map_err(u)?;
    let dtypes = a.dtypes().map_err(u)?;
    let redops = a.redops().map_err(u)?;
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
    let average = Average::from_flag(a.average).ok_or_else(|| {
        u(format!(
            "-a/--average must be 0, 1, 2 or 3 (got {})",
            a.average
        ))
    })?;
    if a.local_register > 2 {
        return Err(u(format!(
            "-R/--local_register must be 0 (off), 1 (ncclCommRegister) or 2 (symmetric windows) (got {})",
            a.local_register
        )));
    }
    if a.iters == 0 {
        return Err(u("-n/--iters must be at least 1".into()));
    }
    if a.agg_iters == 0 {
        return Err(u("-m/--agg_iters must be at least 1".into()));
    }
    if a.blocking > 2 {
        return Err(u(format!(
            "-z/--blocking must be 0, 1 or 2 (got {})",
            a.blocking
        )));
    }
    let roots = match a.root {
        -1 => RootSel::All,
        r if r >= 0 => RootSel::Fixed(r as usize),
        r => {
            return Err(u(format!(
                "-r/--root must be a rank or -1 for every root (got {r})"
            )))
        }
    };
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
        iters: a.iters,
        agg_iters: a.agg_iters,
        cycles: a.run_cycles.max(1),
        check: a.check,
        graph: a.cudagraph,
        blocking: a.blocking,
        average,
        cputime: a.report_cputime > 0,
        timestamps: a.report_timestamps > 0,
        unalign: a.unalign,
        test_corrupt: a.test_corrupt,
        ..Plan::default()
    })
}

/// An output file, checked for writability before anything runs so a long
/// run never ends in "cannot write".
struct OutputFile {
    path: PathBuf,
    format: Format,
}

fn output_file(path: &PathBuf, format: Option<Format>) -> Result<OutputFile, Failure> {
    let format = format.or_else(|| Format::from_path(path)).ok_or_else(|| {
        Failure::usage(format!(
            "cannot tell the format of --output {}: use a .txt, .json, .csv or .md file name",
            path.display()
        ))
    })?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            Failure::usage(format!(
                "cannot write output file {}: {e}; choose a writable path",
                path.display()
            ))
        })?;
    Ok(OutputFile {
        path: path.clone(),
        format,
    })
}

/// Runs the benchmark.
pub fn run(a: &RunArgs, argv: &[String], mode: Mode) -> Result<Outcome, Failure> {
    let mut plan = plan_from_args(a, mode)?;
    let sizes = plan.sizes().map_err(|e| Failure::usage(e.to_string()))?;
    let stdout_format = a.format;
    let mut files = Vec::new();
    if let Some(p) = &a.output {
        files.push(output_file(p, None)?);
    }
    if let Some(p) = &a.output_file {
        files.push(output_file(p, Some(Format::NcclTestsJson))?);
    }
    // The explanation pass runs when the text asks for it or a record
    // (JSON, CSV) will carry it; plain text runs never load the plugin.
    plan.explain = a.explain
        || matches!(stdout_format, Format::Json | Format::Csv)
        || files
            .iter()
            .any(|f| matches!(f.format, Format::Json | Format::Csv));

    let tuning = Tuning {
        local_register: a.local_register,
        timeout: a.timeout,
        stream_null: a.stream_null,
        explain: plan.explain,
    };
    // The tuner plugin goes in before the first communicator.
    let tuner = match &a.tuner_config {
        Some(p) => Some((p, crate::tune_cmd::apply_tuner_config(p, &a.backend)?)),
        None => None,
    };
    let mut opened = backend_open::open(&a.backend, &a.launch, tuning, mode)?;
    let world_size = opened.backend.world_size();

    let total: u64 = plan
        .collectives
        .iter()
        .map(|c| {
            plan.variants(*c, world_size).len() as u64 * sizes.len() as u64 * plan.cycles as u64
        })
        .sum();
    let options = TextOptions {
        cputime: plan.cputime,
        timestamps: plan.timestamps,
        explain: a.explain,
    };
    let print_text = !a.quiet && stdout_format == Format::Text;
    let mut obs = TextObserver::new(print_text, options, total);
    obs.per_rank = a.per_rank;
    let record = crate::meta::new_record(argv);
    let mut runner = Runner::new(opened.backend.as_mut(), &opened.control, plan);
    let Some(record) = runner.run(record, &mut obs)? else {
        return Ok(Outcome::Ok);
    };
    obs.finish(&record);
    if let Some((path, plugin)) = &tuner {
        eprintln!("{}", crate::tune_cmd::tuner_config_note(path, plugin));
    }
    if !a.quiet && stdout_format != Format::Text {
        let bytes = stdout_format.exporter().serialize(&record);
        use std::io::Write;
        let _ = std::io::stdout().write_all(&bytes);
    }
    for f in files {
        let bytes = f.format.exporter().serialize(&record);
        std::fs::write(&f.path, bytes).map_err(|e| {
            Failure::usage(format!(
                "cannot write output file {}: {e}",
                f.path.display()
            ))
        })?;
    }
    let wrong = record.total_wrong();
    if wrong > 0 {
        eprintln!(
            "collbench: {wrong} wrong elements: results are NOT correct (exit {})",
            Outcome::Wrong.code()
        );
        return Ok(Outcome::Wrong);
    }
    Ok(Outcome::Ok)
}
