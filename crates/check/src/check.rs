//! `collbench check`: baseline -> battery -> verdicts -> localisation ->
//! table, JSON and Prometheus files, exit code.

use crate::baseline::{self, Baseline};
use crate::battery::{run_case, CaseOutcome, CaseRequest, Iterations};
use crate::error::{self, CheckError};
use crate::host_tests::{self, HostReport};
use crate::hosts;
use crate::localize::{self, Localization};
use crate::prometheus;
use crate::verdict::{self, Fractions, Line, Metric, Status};
use crate::CheckOptions;
use collbench_core::{diag, Bootstrap};
use collbench_core::{size::format_size, Collective, DataType};
use collbench_runner::Backend;
use serde::Serialize;

/// The five collectives every check runs.
const BATTERY: [Collective; 5] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::AllToAll,
    Collective::SendRecv,
];

/// Size of the latency line when the baseline states none.
const SMALL_SIZE: u64 = 8;

/// Sizes when neither `--size` nor a baseline says: the CPU backend copies
/// through memory at a few GB/s, GPUs need large buffers to reach peak.
const DEFAULT_SIZE_CPU: u64 = 64 << 20;
const DEFAULT_SIZE_GPU: u64 = 1 << 30;

/// Fewest warm-up and timed iterations of a host-pair test.
const HOST_WARMUP: u32 = 2;
const HOST_ITERS: u32 = 10;

/// Largest pair-test size: enough to reach a link's bandwidth.
const MAX_PAIR_SIZE: u64 = 256 << 20;

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
    pub notes: Vec<String>,
}

/// Case to run and its expected figure.
struct Planned {
    req: CaseRequest,
    metric: Metric,
    expected: Option<f64>,
}

fn plan_cases(
    args: &CheckOptions,
    baseline: Option<&Baseline>,
    is_cpu: bool,
) -> Result<Vec<Planned>, CheckError> {
    let (busbw, latency) = match baseline {
        Some(b) => (b.busbw()?, b.latency()?),
        None => (Vec::new(), Vec::new()),
    };
    let default_size = args
        .size
        .or_else(|| baseline.and_then(Baseline::stated_size))
        .unwrap_or(if is_cpu {
            DEFAULT_SIZE_CPU
        } else {
            DEFAULT_SIZE_GPU
        });
    let mut ops: Vec<(Collective, DataType)> = Vec::new();
    // --quick with a baseline runs only what it states figures for.
    if !(args.quick && baseline.is_some()) {
        ops.extend(BATTERY.iter().map(|&c| (c, DataType::Float)));
    }
    for e in &busbw {
        if !ops.contains(&(e.collective, e.dtype)) {
            ops.push((e.collective, e.dtype));
        }
    }
    let mut out = Vec::new();
    for (c, d) in ops {
        let e = busbw.iter().find(|e| e.collective == c && e.dtype == d);
        out.push(Planned {
            req: CaseRequest {
                collective: c,
                dtype: d,
                size_bytes: args
                    .size
                    .or(e.map(|e| e.size_bytes))
                    .unwrap_or(default_size),
            },
            metric: Metric::BusbwGbps,
            expected: e.map(|e| e.busbw_gbps),
        });
    }
    if latency.is_empty() {
        out.push(Planned {
            req: CaseRequest {
                collective: Collective::AllReduce,
                dtype: DataType::Float,
                size_bytes: SMALL_SIZE,
            },
            metric: Metric::TimeUs,
            expected: None,
        });
    }
    for l in latency {
        out.push(Planned {
            req: CaseRequest {
                collective: l.collective,
                dtype: l.dtype,
                size_bytes: l.size_bytes,
            },
            metric: Metric::TimeUs,
            expected: Some(l.max_time_us),
        });
    }
    Ok(out)
}

fn iterations(args: &CheckOptions, metric: Metric) -> Iterations {
    let (warmup, timed) = match (args.quick, metric) {
        (true, Metric::TimeUs) => (2, 20),
        (true, _) => (1, 3),
        (false, Metric::TimeUs) => (5, 100),
        (false, _) => (2, 10),
    };
    Iterations {
        warmup,
        timed: args.iters.unwrap_or(timed).max(1),
        // Every line says what NCCL ran (the pairwise tests turn it off).
        explain: true,
    }
}

/// Whether `b` is one of the built-in baselines of GPU (or other
/// accelerator) systems: all but the `cpu-*` ones. Judged against rank
/// threads it would fail every line, after sizing its 8G cases against
/// host memory.
fn is_gpu_built_in(b: &Baseline) -> bool {
    !b.name.starts_with("cpu")
        && baseline::find_built_in(&b.name).is_ok_and(|(built_in, _)| built_in == *b)
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
    if !(0.0 < args.pair_fraction && args.pair_fraction < 1.0) {
        return Err(CheckError::PairFraction(args.pair_fraction));
    }
    let baseline = args.baseline.as_deref().map(baseline::load).transpose()?;
    let root = control.rank() == 0;
    let info = backend.info();
    let is_cpu = info.name == "cpu";
    if let Some(b) = baseline.as_ref().filter(|b| is_cpu && is_gpu_built_in(b)) {
        return Err(CheckError::BaselineNotForCpu {
            name: b.name.clone(),
            description: b.description.clone(),
        });
    }
    let world_size = backend.world_size();
    let processes = control.world_size();
    let fractions = baseline
        .as_ref()
        .map(|b| Fractions {
            warn: b.warn_fraction,
            fail: b.fail_fraction,
        })
        .unwrap_or(Fractions {
            warn: 0.9,
            fail: 0.75,
        });
    let mut notes = Vec::new();
    if let Some(b) = &baseline {
        if b.world_size() != world_size as u64 {
            notes.push(format!(
                "baseline '{}' was measured with {} ranks ({} node(s) x {}), this run has {world_size}: busbw is meant to compare across sizes of job, but expect differences",
                b.name,
                b.world_size(),
                b.nodes,
                b.gpus_per_node
            ));
        }
    }

    let mut lines = Vec::new();
    for p in plan_cases(args, baseline.as_ref(), is_cpu)? {
        let it = iterations(args, p.metric);
        if root {
            diag::line(&format!(
                "collbench check: {} {} ...",
                p.req.collective,
                format_size(p.req.size_bytes)
            ));
        }
        let outcome = run_case(backend, control, p.req, it, watchdog)?;
        let line = match outcome {
            None => continue,
            Some(CaseOutcome::Measured(m)) => match p.metric {
                Metric::TimeUs => verdict::judge_latency(&m, p.expected, fractions),
                _ => verdict::judge_busbw(&m, p.expected, fractions),
            },
            Some(CaseOutcome::Skipped(why)) => verdict::not_measured(
                p.req.collective.name(),
                p.req.dtype.name(),
                p.req.size_bytes,
                p.metric,
                p.expected,
                &why,
            ),
        };
        lines.push(crate::ceiling_warn::judge(line, args.topology.as_ref()));
    }

    // Localise when a multi-rank result is short, when asked, and always
    // without a baseline (then it is the check: self-consistency).
    let short = verdict::overall(&lines) >= Status::Warn;
    let want = args.localize || baseline.is_none() || short;
    let size = lines
        .iter()
        .filter(|l| l.metric == Metric::BusbwGbps)
        .map(|l| l.size_bytes)
        .max()
        .unwrap_or(DEFAULT_SIZE_CPU)
        .min(MAX_PAIR_SIZE);
    // Only rank 0 has the lines: every process takes its word for both,
    // or processes would test pairs at different sizes (or not at all).
    let (want, size) = agree_on_pairs(control, want, size)?;
    let mut localization = None;
    let mut host_report = None;
    if want && (world_size >= 2 || processes > 1) {
        // Pairs need only their bandwidth: no explanation pass.
        let it = Iterations {
            explain: false,
            ..iterations(args, Metric::BusbwGbps)
        };
        if processes > 1 {
            if root {
                diag::line(&format!(
                    "collbench check: host pairs (sendrecv and all_reduce) between the hosts of {processes} processes at {} ...",
                    format_size(size)
                ));
            }
            let mut progress = |s: &str| {
                if root {
                    diag::line(&format!("collbench check:   {s}"))
                }
            };
            // The verdict weighs pairs against the job's own noise: a pair
            // test of three iterations (--quick) is itself noise (quiet
            // emulated hosts spread +-62% at 4 MiB, WARN in 1 of 5 runs).
            // Ten at least, after two warm-ups (a new communicator
            // connects on its first calls).
            let host_it = Iterations {
                warmup: it.warmup.max(HOST_WARMUP),
                timed: it.timed.max(HOST_ITERS),
                ..it
            };
            match host_tests::run_host_tests(
                backend,
                control,
                watchdog,
                size,
                host_it,
                fractions,
                &mut progress,
            ) {
                Ok(h) => {
                    lines.push(hosts_line(&h, fractions));
                    host_report = Some(h);
                }
                // The job's failure ends the check as any case's does.
                Err(e) if control.failure().is_some() => return Err(e),
                Err(e) => notes.push(format!("host tests skipped: {}", error::chain(&e))),
            }
        } else {
            diag::line(&format!(
                "collbench check: pairwise sendrecv between {world_size} ranks at {} ...",
                format_size(size)
            ));
            let mut progress = |s: &str| diag::line(&format!("collbench check:   {s}"));
            match localize::localize(
                backend,
                control,
                size,
                it,
                args.pair_fraction,
                &mut progress,
            ) {
                Ok(loc) => {
                    lines.push(pairs_line(&loc));
                    localization = Some(loc);
                }
                Err(e) => notes.push(format!("pairwise tests skipped: {}", error::chain(&e))),
            }
        }
    }

    let status = verdict::overall(&lines);
    // A failed write to stdout ends the check with its error, but only
    // after the files monitoring reads are written and every rank has the
    // verdict (so no rank waits for it).
    let mut printed = Ok(());
    if root {
        printed = collbench_core::stdout::write(
            out,
            &summary(
                &lines,
                localization.as_ref(),
                host_report.as_ref(),
                &notes,
                baseline.as_ref(),
                status,
            ),
        );
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
            lines: lines.clone(),
            localization,
            hosts: host_report,
            notes,
        };
        if let Some(path) = &args.json {
            let text = serde_json::to_string_pretty(&report)? + "\n";
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
            let mut text = prometheus::render(&lines, status, now);
            if let Some(h) = &report.hosts {
                text += &prometheus::render_hosts(h, fractions);
            }
            prometheus::write_atomic(path, &text)?;
        }
    }
    // Every process exits with rank 0's verdict, so a launcher that looks
    // at any rank's exit code sees the same answer. The verdict travels as
    // its exit code's byte.
    let code = control.broadcast(root.then(|| vec![status.exit_code() as u8]))?;
    printed?;
    Ok(Status::from_exit_code(
        code.first().copied().unwrap_or(2) as i32
    ))
}

/// The self-consistency line from the pairwise tests.
fn pairs_line(loc: &Localization) -> Line {
    let measured = loc.matrix.pairs().len();
    let slow = loc.slow_pairs.len();
    let mut who: Vec<String> = loc
        .culprits
        .iter()
        .map(|c| format!("slow rank r{}", c.rank))
        .collect();
    who.extend(
        loc.slow_links
            .iter()
            .map(|l| format!("slow link r{}<->r{}", l.a, l.b)),
    );
    Line {
        op: "sendrecv pairs".into(),
        dtype: "float".into(),
        size_bytes: loc.size_bytes,
        metric: Metric::SlowPairs,
        measured: Some(slow as f64),
        expected: Some(0.0),
        ratio: None,
        wrong: 0,
        // Without absolute figures, an outlier pair is a warning: the
        // operator decides whether a rank at 70% of its peers is broken.
        // Too noisy to judge is a warning too, naming nobody.
        status: if slow == 0 && loc.too_noisy.is_none() {
            Status::Pass
        } else {
            Status::Warn
        },
        note: if let Some(spread) = loc.too_noisy {
            Some(format!(
                "pairs spread by +-{:.0}%: too noisy to name a rank or link",
                spread * 100.0
            ))
        } else {
            (slow > 0).then(|| {
                format!(
                    "{slow} of {measured} pairs below {:.0}% of {:.2} GB/s: {}",
                    loc.fraction * 100.0,
                    loc.reference_gbps,
                    if who.is_empty() {
                        "no single culprit".into()
                    } else {
                        who.join(", ")
                    }
                )
            })
        },
        explain: None,
    }
}

/// Rank 0's decision whether to test pairs, and at which size, on every
/// process (a world of one keeps its own).
fn agree_on_pairs(
    control: &dyn Bootstrap,
    want: bool,
    size: u64,
) -> Result<(bool, u64), CheckError> {
    if control.world_size() == 1 {
        return Ok((want, size));
    }
    let mine = (control.rank() == 0).then(|| {
        let mut b = vec![want as u8];
        b.extend(size.to_le_bytes());
        b
    });
    let word = control.broadcast(mine)?;
    match word.as_slice() {
        [w, rest @ ..] if rest.len() == 8 => {
            let size = u64::from_le_bytes(rest.try_into().unwrap_or_default());
            Ok((*w != 0, size))
        }
        _ => Err(CheckError::Malformed(
            "malformed pair-test size from rank 0 (a different collbench version?)".into(),
        )),
    }
}

/// The line of the host tests: the hosts and links named, and the
/// verdict's status (a confirmed slow host below the FAIL fraction of the
/// job median fails; suspects and a job too noisy to judge warn). Pair
/// tests that failed warn too, naming no host: they are not judged.
fn hosts_line(h: &HostReport, fractions: Fractions) -> Line {
    let mut notes: Vec<String> = h
        .verdict
        .findings
        .iter()
        .filter(|f| f.status(fractions) >= Status::Warn)
        .map(|f| hosts::finding_line(f, &h.hosts))
        .collect();
    let named = notes.len();
    let mut status = h.verdict.status;
    if !h.failures.is_empty() {
        status = status.max(Status::Warn);
        notes.push(format!(
            "{} pair test(s) failed (listed below, not judged)",
            h.failures.len()
        ));
    }
    Line {
        op: "host pairs".into(),
        dtype: "float".into(),
        size_bytes: h.size_bytes,
        metric: Metric::SlowPairs,
        measured: Some(named as f64),
        expected: Some(0.0),
        ratio: None,
        wrong: 0,
        status,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        explain: None,
    }
}

/// The table and verdict lines `check` prints on stdout.
fn summary(
    lines: &[Line],
    loc: Option<&Localization>,
    host_report: Option<&HostReport>,
    notes: &[String],
    baseline: Option<&Baseline>,
    status: Status,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = match baseline {
        Some(b) if b.description.is_empty() => writeln!(
            out,
            "# collbench check against baseline '{}': {}",
            b.name, b.source
        ),
        Some(b) => writeln!(
            out,
            "# collbench check against baseline '{}' ({}): {}",
            b.name, b.description, b.source
        ),
        None => writeln!(
            out,
            "# collbench check WITHOUT a baseline: figures are not compared with expected ones, only ranks with each other (pass --baseline NAME|FILE; see `collbench baselines list`)"
        ),
    };
    out += &verdict::render_table(lines);
    for l in lines.iter().filter(|l| l.note.is_some()) {
        let _ = writeln!(
            out,
            "# {} {}: {}",
            l.status.label(),
            l.op,
            l.note.as_deref().unwrap_or_default()
        );
    }
    if let Some(loc) = loc {
        out += "#\n";
        out += &localize::heatmap_text(loc);
        for f in localize::findings(loc) {
            let _ = writeln!(out, "# {f}");
        }
    }
    if let Some(h) = host_report {
        out += "#\n";
        for l in h.verdict.matrix.text(&h.hosts).lines() {
            let _ = writeln!(out, "# {l}");
        }
        for f in hosts::finding_lines(&h.verdict, &h.hosts) {
            let _ = writeln!(out, "# {f}");
        }
        for f in &h.failures {
            let name = |x: usize| h.hosts.get(x).map_or("?", |i| i.name.as_str());
            let _ = writeln!(
                out,
                "# failed pair test {} <-> {} (round {}, not judged): {}",
                name(f.a),
                name(f.b),
                f.round + 1,
                f.failure
            );
        }
    }
    for n in notes {
        let _ = writeln!(out, "# note: {n}");
    }
    let failing: Vec<String> = lines
        .iter()
        .filter(|l| l.status == status && status >= Status::Warn)
        .map(|l| l.op.clone())
        .collect();
    let basis = match baseline {
        Some(b) => format!("baseline '{}'", b.name),
        None => "no baseline used: self-consistency only".into(),
    };
    let _ = if failing.is_empty() {
        writeln!(out, "collbench check: {} ({basis})", status.label())
    } else {
        writeln!(
            out,
            "collbench check: {} ({basis}): {}",
            status.label(),
            failing.join(", ")
        )
    };
    out
}
