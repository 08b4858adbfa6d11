//! The battery of `check`: which cases run (the five collectives, the
//! baseline's own, a latency line), with how many iterations, and each
//! one run and judged into its line.

use crate::baseline::{self, Baseline};
use crate::battery::{run_case, CaseOutcome, CaseRequest, Iterations, Measured};
use crate::error::CheckError;
use crate::verdict::{self, Fractions, Line, Metric};
use crate::CheckOptions;
use collbench_core::arrival::Straggler;
use collbench_core::{diag, Bootstrap};
use collbench_core::{size::format_size, Collective, DataType};
use collbench_runner::{Backend, Watchdog};

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
pub(super) const DEFAULT_SIZE_CPU: u64 = 64 << 20;
const DEFAULT_SIZE_GPU: u64 = 1 << 30;

/// The job a check runs on, as each of its steps takes it.
pub(super) struct Job<'a> {
    pub backend: &'a mut dyn Backend,
    pub control: &'a dyn Bootstrap,
    /// Watches every case: a stuck collective ends the check as it ends
    /// `run`.
    pub watchdog: &'a Watchdog,
    /// Whether this process is rank 0, the one that prints.
    pub root: bool,
    /// Every battery case's straggler (or none), of those measured with
    /// arrival figures, for the battery's verdict.
    pub seen: Vec<Option<Straggler>>,
    /// The path NCCL took over the battery's cases, joined (rank 0).
    pub path: Option<collbench_core::nccl_path::NcclPath>,
}

impl<'a> Job<'a> {
    /// A job that has seen no case yet.
    pub fn new(
        backend: &'a mut dyn Backend,
        control: &'a dyn Bootstrap,
        watchdog: &'a Watchdog,
        root: bool,
    ) -> Job<'a> {
        Job {
            backend,
            control,
            watchdog,
            root,
            seen: Vec::new(),
            path: None,
        }
    }
}

/// Case to run and its expected figure.
struct Planned {
    req: CaseRequest,
    metric: Metric,
    expected: Option<f64>,
}

/// The cases to run, in order: the battery (unless `--quick` with a
/// baseline), the baseline's other bandwidth figures, then the latency
/// lines (the baseline's, else all_reduce at 8 bytes).
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

/// Warm-up and timed iterations of a case judged by `metric`: fewer with
/// `--quick`, more for latency; `--iters` sets the timed ones.
pub(super) fn iterations(args: &CheckOptions, metric: Metric) -> Iterations {
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

/// Refuses a built-in baseline of GPU systems on the CPU backend
/// ([`is_gpu_built_in`]), before anything runs.
pub(super) fn refuse_gpu_baseline(
    baseline: Option<&Baseline>,
    is_cpu: bool,
) -> Result<(), CheckError> {
    match baseline.filter(|b| is_cpu && is_gpu_built_in(b)) {
        Some(b) => Err(CheckError::BaselineNotForCpu {
            name: b.name.clone(),
            description: b.description.clone(),
        }),
        None => Ok(()),
    }
}

/// Runs the planned cases one after the other on every rank and judges
/// each into its line (rank 0 says which case runs): against the
/// baseline's figure where it states one, and against the hardware's
/// ceiling where that is known (`args.topology`). A case that fails ends
/// the check.
pub(super) fn run_battery(
    job: &mut Job,
    args: &CheckOptions,
    baseline: Option<&Baseline>,
    is_cpu: bool,
    fractions: Fractions,
) -> Result<Vec<Line>, CheckError> {
    let mut lines = Vec::new();
    for p in plan_cases(args, baseline, is_cpu)? {
        let it = iterations(args, p.metric);
        if job.root {
            diag::line(&format!(
                "collbench check: {} {} ...",
                p.req.collective,
                format_size(p.req.size_bytes)
            ));
        }
        let outcome = run_case(&mut *job.backend, job.control, p.req, it, job.watchdog)?;
        if let Some(CaseOutcome::Measured(Measured {
            arrival: Some(a), ..
        })) = &outcome
        {
            job.seen.push(a.straggler.clone());
        }
        if let Some(CaseOutcome::Measured(Measured {
            nccl_path: Some(p), ..
        })) = &outcome
        {
            let p = (**p).clone();
            match job.path.as_mut() {
                Some(seen) => seen.merge(p),
                None => job.path = Some(p),
            }
        }
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
    Ok(lines)
}
