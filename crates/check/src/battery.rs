//! Runs single cases of the check battery through the runner, so every
//! backend (and the multi-process launch) is driven exactly as `collbench
//! run` drives it, with result checking on.

use collbench_core::arrival::Arrival;
use collbench_core::Bootstrap;
use collbench_core::{Collective, DataType, Explanation, ReduceOp};
use collbench_runner::{
    Average, Backend, Checks, Plan, RootSel, RunError, RunObserver, Runner, Timing, Watchdog,
};
use serde::Serialize;

/// How each case is run: its iterations, and whether to ask the backend
/// what the library ran for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iterations {
    pub warmup: u32,
    pub timed: u32,
    /// Ask what the library ran (NCCL: algorithm, protocol, channels), in
    /// a separate untimed pass after the timed loop and the check, as
    /// `collbench run` does (docs/explain.md).
    pub explain: bool,
}

/// One case to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseRequest {
    pub collective: Collective,
    pub dtype: DataType,
    pub size_bytes: u64,
}

/// What one case measured (rank 0's view of the whole job).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub op: String,
    pub dtype: String,
    /// Size actually run (the collective may round the request down).
    pub size_bytes: u64,
    /// Out-of-place bus bandwidth: what baselines state.
    pub busbw_gbps: f64,
    /// In-place bus bandwidth.
    pub busbw_in_place_gbps: f64,
    /// Out-of-place time per operation, microseconds.
    pub time_us: f64,
    /// Wrong elements over both placements.
    pub wrong: u64,
    /// What the library reported it ran (out-of-place, else in-place);
    /// `None` where the backend cannot say (CPU, MPI) or it was not asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
    /// Out-of-place arrival figures (who entered last, by how much): every
    /// battery case takes them; `None` where the backend takes none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Box<Arrival>>,
    /// The path NCCL took, joined over the processes (rank 0); `None`
    /// where the backend does not use NCCL or NCCL printed no path.
    #[serde(skip)]
    pub nccl_path: Option<Box<collbench_core::nccl_path::NcclPath>>,
}

impl Measured {
    /// The better of the two placements: pairwise tests use it so that
    /// one hiccup on a shared machine does not read as a slow link.
    pub fn best_busbw_gbps(&self) -> f64 {
        self.busbw_gbps.max(self.busbw_in_place_gbps)
    }
}

/// The outcome of one case on rank 0: measured, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOutcome {
    Measured(Measured),
    /// The backend or the runner skipped it (e.g. unsupported type).
    Skipped(String),
}

/// Collects the runner's notes (skips) instead of printing them.
#[derive(Default)]
struct Notes(Vec<String>);

impl RunObserver for Notes {
    fn note(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
}

/// Runs one case on every rank, watched by `watchdog` (a stuck collective
/// ends the check as it ends `run`). Returns the outcome on rank 0 and
/// `None` on the other processes.
pub fn run_case(
    backend: &mut dyn Backend,
    control: &dyn Bootstrap,
    req: CaseRequest,
    iters: Iterations,
    watchdog: &Watchdog,
) -> Result<Option<CaseOutcome>, RunError> {
    let plan = Plan {
        collectives: vec![req.collective],
        dtypes: vec![req.dtype],
        redops: vec![ReduceOp::Sum],
        roots: RootSel::Fixed(0),
        min_bytes: req.size_bytes,
        max_bytes: req.size_bytes,
        step: collbench_core::size::Step::Factor(2),
        timing: Timing {
            warmup_iters: iters.warmup,
            iters: iters.timed.max(1),
            // Who arrives last: the battery names a straggler on its own.
            arrival: true,
            ..Timing::default()
        },
        // Checks on: a fast wrong answer must never pass.
        check: Checks::ONCE,
        explain: iters.explain,
        average: Average::Mean,
        ..Plan::default()
    };
    let mut notes = Notes::default();
    let record = collbench_core::Record::new("collbench");
    let Some(record) = Runner::new(backend, control, plan)
        .with_watchdog(watchdog.clone())
        .run(record, &mut notes)?
    else {
        return Ok(None);
    };
    let Some(row) = record.results.first() else {
        let why = notes
            .0
            .pop()
            .unwrap_or_else(|| format!("{} was not run", req.collective));
        return Ok(Some(CaseOutcome::Skipped(why)));
    };
    let oop = row.out_of_place.clone().unwrap_or_default();
    let ip = row.in_place.clone().unwrap_or_default();
    let explain = oop
        .explain
        .clone()
        .or_else(|| ip.explain.clone())
        .map(|e| *e);
    Ok(Some(CaseOutcome::Measured(Measured {
        op: row.op.clone(),
        dtype: row.dtype.clone(),
        size_bytes: row.size_bytes,
        busbw_gbps: oop.busbw_gbps,
        busbw_in_place_gbps: ip.busbw_gbps,
        time_us: oop.time_us,
        wrong: row.total_wrong(),
        explain,
        arrival: oop.arrival,
        nccl_path: record.nccl_path.map(Box::new),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::SingleProcess;
    use collbench_runner::cpu::CpuBackend;

    #[test]
    fn measures_a_checked_case_on_the_cpu_backend() {
        let mut b = CpuBackend::new(2, "h");
        let req = CaseRequest {
            collective: Collective::AllReduce,
            dtype: DataType::Float,
            size_bytes: 1 << 16,
        };
        let it = Iterations {
            warmup: 1,
            timed: 2,
            explain: true,
        };
        let Some(CaseOutcome::Measured(m)) =
            run_case(&mut b, &SingleProcess, req, it, &Watchdog::default()).unwrap()
        else {
            panic!("expected a measurement");
        };
        assert_eq!(m.op, "all_reduce");
        assert_eq!(m.size_bytes, 1 << 16);
        assert!(m.busbw_gbps > 0.0 && m.time_us > 0.0, "{m:?}");
        assert_eq!(m.wrong, 0);
        // Asked, the CPU backend cannot say what it ran: no explanation.
        assert_eq!(m.explain, None);
    }
}
