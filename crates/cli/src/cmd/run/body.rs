//! `run`'s body: its [`RunRequest`] -> backend -> runner -> printers and
//! files. It reads no flag: what it needs is typed in the request.

use super::request::{Outputs, RunRequest};
use super::RunArgs;
use crate::backend_open;
use crate::exit::{Failure, Outcome};
use crate::interrupt::{Keeper, Keeping};
use crate::observer::TextObserver;
use crate::progress_line::Sweep;
use collbench_core::Record;
use collbench_output::{text::TextOptions, Format};
use collbench_runner::Runner;

/// A failed write of the results to stdout: exit 2, one line.
fn stdout_failure(e: std::io::Error) -> Failure {
    collbench_core::stdout::StdoutError::from(e).into()
}

/// The record in the files, then on stdout (unless streamed as text; the
/// rest of it, after the first line written as the run began); the
/// outcome from its wrong elements. The files come first and are written
/// whatever `printed` (the text's own writes) says: a stdout that fails
/// at the end (`| head -1`, `> /dev/full`) once left neither file.
fn write_results(
    out: &Outputs,
    record: &collbench_core::Record,
    (keeper, printed): (&Keeper, Result<(), Failure>),
) -> Result<Outcome, Failure> {
    for f in &out.files {
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
    if !out.quiet && out.stdout != Format::Text {
        let bytes = out.stdout.exporter().serialize(record);
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(keeper.stdout_rest(&bytes))
            .and_then(|_| stdout.flush())
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
    // A placement that failed a placement check (core::extension) fails
    // the run as wrong results do.
    for ext in collbench_core::extension_list::extensions() {
        if let Some(n) = ext.failures(&record.results).filter(|n| *n > 0) {
            crate::stdout::say(format!(
                "collbench: {} (exit {})",
                ext.failure_line(n),
                Outcome::Wrong.code()
            ));
            return Ok(Outcome::Wrong);
        }
    }
    Ok(Outcome::Ok)
}

/// The text's last lines (summary, `--ceiling`): how its writes went,
/// for [`write_results`] to say after the files are written.
fn finish_text(out: &Outputs, obs: &mut TextObserver, record: &Record) -> Result<(), Failure> {
    obs.finish(record);
    if let Some(e) = obs.write_error.take() {
        return Err(stdout_failure(e));
    }
    let print_text = out.prints_text();
    if out.ceiling && print_text {
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
fn add_ceilings(out: &Outputs, record: &mut Record) {
    let keeps = |f: Format| matches!(f, Format::Json | Format::Csv | Format::Markdown);
    let kept = out.files.iter().map(|f| keeps(f.format));
    if crate::run_ceiling::wanted(out.ceiling, kept.chain([!out.quiet && keeps(out.stdout)])) {
        crate::run_ceiling::annotate(record);
    }
}

/// The text printer of a run, its progress line sized to the sweep.
fn text_observer(req: &RunRequest, world_size: usize) -> TextObserver {
    let plan = &req.plan;
    let out = &req.outputs;
    let sweep = Sweep::new(
        &plan.collectives,
        &req.sizes,
        |c| plan.variants(c, world_size).len() * plan.cycles.max(1) as usize,
        plan.cycles == 0,
    );
    let options = TextOptions {
        cputime: plan.cputime,
        timestamps: plan.timestamps,
        explain: out.explain_columns,
        per_iter: plan.timing.keep_iter_times.then_some(plan.per_iter_skip),
        extensions: collbench_core::extension_list::Active::of(
            &collbench_core::record::RunSettings::from(plan),
        ),
    };
    let mut obs = TextObserver::new(out.prints_text(), options, sweep, out.quiet);
    obs.per_rank = out.per_rank;
    obs
}

/// Runs the benchmark: `run`'s flags (or an alias's) checked into a
/// [`RunRequest`], then measured.
pub fn run(a: &RunArgs, argv: &[String]) -> Result<Outcome, Failure> {
    let req = RunRequest::try_from(a)?;
    // The tuner plugin goes in before the first communicator.
    let tuner = (req.tuner_config)
        .map(|p| Ok::<_, Failure>((p, crate::tune::apply_tuner_config(p, req.backend)?)))
        .transpose()?;
    // From here on Ctrl-C keeps the rows measured (written, marked
    // partial, exit 130).
    let out = &req.outputs;
    let streamed = out.quiet || out.stdout == Format::Text;
    let keeper = Keeper::install(out.files.clone(), (!streamed).then_some(out.stdout));
    let mut opened =
        backend_open::open(req.backend, req.launch, &req.nccl, req.mode, &req.watchdog)?;
    if opened.control.rank() != 0 {
        keeper.not_root();
    }
    let world_size = opened.backend.world_size();
    crate::transport_gate::refuse_without_nccl(req.required, &opened.backend.info().name)?;
    // Before the header: a root no rank has is the user's mistake.
    req.plan
        .root_in_range(world_size)
        .map_err(super::plan_words::plan_failure)?;
    let mut obs = text_observer(&req, world_size);
    let record = crate::meta::new_record(argv);
    let mut runner = Runner::new(opened.backend.as_mut(), opened.control.as_ref(), req.plan)
        .with_watchdog(req.watchdog);
    let ran = runner.run(
        record,
        &mut Keeping {
            inner: &mut obs,
            keeper: &keeper,
        },
    );
    keeper.done();
    let judged = ran
        .map_err(super::plan_words::run_failure)?
        .map(|mut record| {
            add_ceilings(out, &mut record);
            let printed = finish_text(out, &mut obs, &record);
            if let Some((path, plugin)) = &tuner {
                crate::stdout::say(crate::tune::tuner_config_note(path, plugin));
            }
            match write_results(out, &record, (&keeper, printed))? {
                Outcome::Ok => {
                    crate::transport_gate::judge(&record, req.required).map(|()| Outcome::Ok)
                }
                other => Ok(other),
            }
        });
    share_outcome(opened.control.as_ref(), judged)
}

/// Rank 0's outcome on every process (#wrong, a placement check, the
/// transport gate, a write that failed), so a launcher or a pod that
/// reads any rank's exit code sees the same answer, as nccl-tests'
/// processes all fail together.
/// Only rank 0 says why; the others exit with its code. It travels as the
/// code's byte; a rank 0 gone before sending is the control plane's
/// failure, as for any peer.
fn share_outcome(
    control: &dyn collbench_core::Bootstrap,
    mine: Option<Result<Outcome, Failure>>,
) -> Result<Outcome, Failure> {
    if control.world_size() == 1 {
        return mine.unwrap_or(Ok(Outcome::Ok));
    }
    let code = |o: &Result<Outcome, Failure>| match o {
        Ok(outcome) => outcome.code(),
        Err(f) => f.outcome.code(),
    };
    let root = control.rank() == 0;
    let sent = root.then(|| vec![mine.as_ref().map_or(0, code).clamp(0, 255) as u8]);
    let word = control
        .broadcast(sent)
        .map_err(|e| Failure::new(Outcome::Launch, e.to_string()))?;
    if let Some(mine) = mine.filter(|_| root) {
        return mine;
    }
    Ok(match word.first().copied().map_or(0, i32::from) {
        0 => Outcome::Ok,
        1 => Outcome::Wrong,
        7 => Outcome::TransportMismatch,
        2 => Outcome::Usage,
        // Rank 0 sends only the codes above after a run.
        _ => Outcome::Launch,
    })
}
