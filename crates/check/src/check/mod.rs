//! `collbench check`: baseline -> battery -> verdicts -> localisation ->
//! table, JSON and Prometheus files, exit code.
//!
//! Files, each importing only those before it: `cases` (the battery:
//! which cases, their iterations, each run and judged), `pairs` (the pair
//! tests after it), `straggler` (who the battery's arrival skew names,
//! and the pair tests' word on it, issue #53), `summary` (what stdout
//! shows), `nodes` (each node's verdict and what Slurm does with it),
//! `variants` (the path measured, the transport gate and the fabric
//! variants, issue #50).
//! This file runs the
//! steps in order, writes the files and shares rank 0's verdict.

mod cases;
mod nodes;
mod pairs;
mod straggler;
mod summary;
mod variants;

use crate::baseline::{self, Baseline};
use crate::error::CheckError;
use crate::host_tests::HostReport;
use crate::localize::Localization;
use crate::prometheus;
use crate::verdict::{self, Fractions, Line, Status};
use crate::CheckOptions;
use cases::Job;
use collbench_core::Bootstrap;
use collbench_runner::Backend;
use serde::Serialize;

/// The JSON document of `--json FILE`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    /// `collbench-check/1`.
    pub schema: &'static str,
    /// PASS, WARN or FAIL.
    pub status: Status,
    pub exit_code: i32,
    /// Baseline name, `null` when none was used.
    pub baseline: Option<String>,
    pub baseline_source: Option<String>,
    /// True when no baseline was given: only self-consistency was judged.
    pub no_baseline: bool,
    pub backend: String,
    pub world_size: usize,
    pub processes: usize,
    pub lines: Vec<Line>,
    /// Pairwise tests, when they ran; `matrix` draws the heatmap.
    pub localization: Option<Localization>,
    /// Host-pair tests of a job of several processes, when they ran
    /// (`verdict.matrix` is the host-pair matrix).
    pub hosts: Option<HostReport>,
    /// The straggler the battery's arrival skew named, and the pair
    /// tests' word on it (issue #53).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub straggler: Option<straggler::BatteryStraggler>,
    pub notes: Vec<String>,
    /// Each node's verdict and the cluster's actions, when asked
    /// (`--slurm`, `--events`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<nodes::NodeReport>,
    /// The path the battery took, the transport gate and the fabric
    /// variants (docs/transport.md).
    pub transport: Option<crate::transport::TransportReport>,
}

/// The options no run can use, refused before anything runs.
fn validate(args: &CheckOptions) -> Result<(), CheckError> {
    if !(0.0 < args.pair_fraction && args.pair_fraction < 1.0) {
        return Err(CheckError::PairFraction(args.pair_fraction));
    }
    Ok(())
}

/// Runs the battery and writes the verdict table to `out` (the CLI's
/// stdout; a failed write is a [`collbench_core::stdout::StdoutError`]);
/// progress lines go to [`collbench_core::diag`]. Returns rank 0's verdict
/// (Pass, Warn or Fail: the CLI maps it to the exit code) on every rank.
pub fn check_main(
    args: &CheckOptions,
    backend: &mut dyn Backend,
    control: &dyn Bootstrap,
    watchdog: &collbench_runner::Watchdog,
    out: &mut dyn std::io::Write,
) -> Result<Status, CheckError> {
    validate(args)?;
    let baseline = args.baseline.as_deref().map(baseline::load).transpose()?;
    let root = control.rank() == 0;
    let info = backend.info();
    let is_cpu = info.name == "cpu";
    cases::refuse_gpu_baseline(baseline.as_ref(), is_cpu)?;
    let world_size = backend.world_size();
    let processes = control.world_size();
    let fractions = fractions(baseline.as_ref());
    let mut notes: Vec<String> = ranks_note(baseline.as_ref(), world_size)
        .into_iter()
        .collect();
    let mut job = Job::new(backend, control, watchdog, root);
    let mut lines = cases::run_battery(&mut job, args, baseline.as_ref(), is_cpu, fractions)?;
    let transport = variants::transport(&mut job, args, &lines, is_cpu)?;
    let straggler = straggler::said(straggler::suspect(&job.seen), root);
    let pairs = pairs::pair_tests(&mut job, args, baseline.is_none(), &lines, fractions)?;
    let straggler = straggler::judged(straggler, &pairs, &mut notes);
    lines.extend(pairs.line);
    notes.extend(pairs.note);

    let status = overall(&lines, transport.as_ref());
    // Every process says where it runs, before rank 0 alone goes on.
    let hostname = info.devices.first().map_or("", |d| d.host.as_str());
    let placements = nodes::placements(&args.node_state, control, hostname)?;
    // A failed write to stdout ends the check with its error, but only
    // after the files monitoring reads are written and every rank has the
    // verdict (so no rank waits for it).
    let mut printed = Ok(());
    if root {
        let text = summary::summary(
            &lines,
            pairs.localization.as_ref(),
            pairs.hosts.as_ref(),
            &notes,
            baseline.as_ref(),
            status,
        );
        let mut text = summary::with_transport(text, transport.as_ref(), status);
        let v = nodes::Verdict {
            status,
            lines: &lines,
            hosts: pairs.hosts.as_ref(),
            fractions,
        };
        let (node_report, said) = nodes::if_asked(&args.node_state, &v, placements.as_deref())?;
        text += &said;
        printed = collbench_core::stdout::write(out, &text);
        let report = CheckReport {
            schema: "collbench-check/1",
            status,
            exit_code: status.exit_code(),
            baseline: baseline.as_ref().map(|b| b.name.clone()),
            baseline_source: baseline.as_ref().map(|b| b.source.clone()),
            no_baseline: baseline.is_none(),
            backend: info.name.clone(),
            world_size,
            processes,
            lines,
            localization: pairs.localization,
            hosts: pairs.hosts,
            straggler,
            notes,
            nodes: node_report,
            transport,
        };
        write_files(args, &report, fractions)?;
    }
    let status = share_verdict(control, root, status)?;
    printed?;
    Ok(status)
}

/// The worst of the table's lines and the transport's gate and variants.
fn overall(lines: &[Line], transport: Option<&crate::transport::TransportReport>) -> Status {
    verdict::overall(lines).max(transport.map_or(Status::Info, |t| t.status()))
}

/// Rank 0's verdict on every process, so a launcher that looks at any
/// rank's exit code sees the same answer. It travels as its exit code's
/// byte.
fn share_verdict(
    control: &dyn Bootstrap,
    root: bool,
    status: Status,
) -> Result<Status, CheckError> {
    let code = control.broadcast(root.then(|| vec![status.exit_code() as u8]))?;
    Ok(Status::from_exit_code(
        code.first().copied().unwrap_or(2) as i32
    ))
}

/// The baseline's WARN and FAIL fractions, else 0.9 and 0.75.
fn fractions(baseline: Option<&Baseline>) -> Fractions {
    baseline
        .map(|b| Fractions {
            warn: b.warn_fraction,
            fail: b.fail_fraction,
        })
        .unwrap_or(Fractions {
            warn: 0.9,
            fail: 0.75,
        })
}

/// A note when the baseline was measured with another number of ranks
/// than this job has.
fn ranks_note(baseline: Option<&Baseline>, world_size: usize) -> Option<String> {
    let b = baseline.filter(|b| b.world_size() != world_size as u64)?;
    Some(format!(
        "baseline '{}' was measured with {} ranks ({} node(s) x {}), this run has {world_size}: busbw is meant to compare across sizes of job, but expect differences",
        b.name,
        b.world_size(),
        b.nodes,
        b.gpus_per_node
    ))
}

/// Rank 0's files: the JSON document (`--json`) and the node_exporter
/// textfile metrics (`--prometheus`, replaced atomically).
fn write_files(
    args: &CheckOptions,
    report: &CheckReport,
    fractions: Fractions,
) -> Result<(), CheckError> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report)? + "\n";
        std::fs::write(path, text).map_err(|error| CheckError::JsonUnwritable {
            path: path.clone(),
            error,
        })?;
    }
    if let Some(path) = &args.prometheus {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut text = prometheus::render(&report.lines, report.status, now);
        if let Some(h) = &report.hosts {
            text += &prometheus::render_hosts(h, fractions);
        }
        prometheus::write_atomic(path, &text)?;
    }
    Ok(())
}
