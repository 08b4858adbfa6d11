//! What `tune` shows: progress and the job's lines on stderr (the
//! [`Terminal`] sink), the plan, the report on stdout and its files.

use crate::cmd::tune::{TuneArgs, TuneFormat};
use crate::exit::{Failure, Outcome};
use collbench_tune::job::{Note, PlanOptions, Sink};
use collbench_tune::plan::Plan;
use collbench_tune::{render, End, Phase, Progress, TuneReport, TunerConfig};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a progress line names: band, candidate, phase, process pair.
type Shown = (usize, String, Phase, Option<(u32, u32)>);

/// The job's lines on stderr: a progress line when the band, candidate,
/// phase or fresh process pair changes, and the job's notes.
#[derive(Default)]
pub struct Terminal {
    last: Option<Shown>,
}

impl Sink for Terminal {
    fn arm_stop(&mut self) -> Arc<AtomicBool> {
        stop_on_ctrl_c()
    }

    fn progress(&mut self, p: &Progress) {
        // The default's repeats come between every candidate's: a line for
        // each would say nothing new.
        if p.setting.is_default() && p.phase != Phase::Calibrate {
            return;
        }
        let key = (p.band_index, p.setting.to_string(), p.phase, p.process_pair);
        if self.last.as_ref() == Some(&key) {
            return;
        }
        let (what, phase) = match p.phase {
            Phase::Calibrate => ("band", "calibrate"),
            Phase::Screen => ("band", "screen"),
            Phase::Confirm => ("band", "confirm"),
            Phase::ProcessWide => ("process-wide setting, band", "in a band it did not win"),
            Phase::Refine => ("process-wide setting, figure", "refine"),
        };
        let fresh = p.process_pair.map_or(String::new(), |(k, n)| {
            format!(", fresh process pair {k} of {n}")
        });
        crate::stdout::say(format!(
            "collbench tune: {what} {}/{} {} {} B: {} ({phase}{fresh}), {:.0} s of budget left",
            p.band_index + 1,
            p.bands_total,
            p.band.op,
            p.band.probe_bytes,
            p.setting,
            p.budget_left_us / 1e6
        ));
        self.last = Some(key);
    }

    fn note(&mut self, note: Note<'_>) {
        crate::stdout::say(match note {
            Note::ChildrenStarting { count, processes: None } => format!(
                "collbench tune: starting {count} child processes for candidates NCCL reads only from its environment (each with a default-environment partner)"
            ),
            Note::ChildrenStarting { count, processes: Some(n) } => format!(
                "collbench tune: starting {count} child processes in each of the {n} processes for candidates NCCL reads only from its environment (each with a default-environment partner; child job k joins the children k of every process)"
            ),
            Note::CandidateEnded { env, why } => {
                let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "collbench tune: candidate {} ended (the search goes on): {why}",
                    vars.join(" ")
                )
            }
        });
    }
}

/// Sets the flag on Ctrl-C; a second Ctrl-C ends the process at once.
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let installed = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            crate::exit::terminate(Outcome::TuneInterrupted);
        }
        crate::stdout::say(
            "collbench tune: stopping after this repeat (Ctrl-C again to quit at once)",
        );
    });
    if let Err(e) = installed {
        crate::stdout::say(format!(
            "collbench tune: Ctrl-C will end the process without a report ({e})"
        ));
    }
    stop
}

/// Checks that an output file can be written before anything runs.
/// Before any measuring: `--csv` and `--json` name two different files
/// this process may write, neither already there unless `--force`.
/// Nothing is created yet: a search that fails leaves no empty file.
pub fn claim_outputs(a: &TuneArgs) -> Result<(), Failure> {
    if let (Some(csv), Some(json)) = (&a.csv, &a.json) {
        crate::outputs::distinct(("--csv", csv), ("--json", json))?;
    }
    for (flag, path) in [("--csv", &a.csv), ("--json", &a.json)] {
        if let Some(path) = path {
            crate::outputs::claim(flag, path, a.force, &[])?;
        }
    }
    Ok(())
}

/// `--list-candidates`: `plan`'s rows for the ops of the command line on
/// stdout.
pub fn plan(o: &PlanOptions, plan: &Plan) -> Result<Outcome, Failure> {
    let rows = plan.rows(&o.ops, o.max_channels);
    crate::stdout::print(&render::plan(plan, &rows)).map_err(Failure::from)?;
    Ok(Outcome::TuneComplete)
}

/// Prints the report and its files; the outcome from how the search ended.
pub fn report_outcome(a: &TuneArgs, report: &TuneReport) -> Result<Outcome, Failure> {
    print_report(a, report)?;
    if let End::Failed(why) = &report.end {
        crate::stdout::say(format!("collbench tune: stopped: {why}"));
    }
    Ok(Outcome::tune(&report.end))
}

/// The table on stdout, the shell lines, the CSV file.
fn print_report(a: &TuneArgs, report: &TuneReport) -> Result<(), Failure> {
    let table = match a.format {
        TuneFormat::Text => render::text(report),
        TuneFormat::Json => render::json(report),
        TuneFormat::Md => render::markdown(report),
    };
    let mut text = table;
    if a.shell {
        text += &format!("\n{}", render::shell(report));
    }
    // The CSV file is written even when stdout fails; the failure is the
    // command's end (exit 2) once it is.
    let printed = crate::stdout::print(&text).map_err(Failure::from);
    let write = |flag: &str, path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| {
            Failure::new(
                Outcome::TuneFailed,
                format!(
                    "cannot write {flag} {}: {}",
                    path.display(),
                    crate::outputs::io_reason(&e)
                ),
            )
        })
    };
    if let Some(path) = &a.json {
        write("--json", path, &(render::json(report) + "\n"))?;
    }
    if let Some(path) = &a.csv {
        let (csv, notes) = TunerConfig::from_report(report);
        write("--csv", path, &csv.to_csv(&notes))?;
        crate::stdout::say(format!(
            "collbench tune: wrote {} ({} rules); check it with: collbench run --tuner-config {} ...",
            path.display(),
            csv.rows.len(),
            path.display()
        ));
    }
    printed
}
