//! What to run: collectives x types x operators x roots x sizes, and how.

use crate::error::PlanError;
use crate::timing::Timing;
use collbench_core::alltoallv::{self, Traffic, TrafficError, TrafficMatrix};
use collbench_core::auto_iters::AutoIters;
use collbench_core::read_limit;
use collbench_core::{size, Collective, Counts, DataType, ReduceOp, RunSettings};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;

/// How per-rank times are combined into the reported time (`-a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Average {
    /// Rank 0's time (`-a 0`).
    Rank0,
    /// Mean over ranks (`-a 1`, the default).
    Mean,
    /// Fastest rank (`-a 2`).
    Min,
    /// Slowest rank (`-a 3`).
    Max,
}

impl Average {
    /// From nccl-tests' `-a` number.
    pub fn from_flag(v: u32) -> Option<Average> {
        Some(match v {
            0 => Average::Rank0,
            1 => Average::Mean,
            2 => Average::Min,
            3 => Average::Max,
            _ => return None,
        })
    }

    /// Name used in records.
    pub fn name(self) -> &'static str {
        match self {
            Average::Rank0 => "rank0",
            Average::Mean => "mean",
            Average::Min => "min",
            Average::Max => "max",
        }
    }

    /// Combines per-rank times (index = rank).
    pub fn combine(self, times: &[f64]) -> f64 {
        if times.is_empty() {
            return 0.0;
        }
        match self {
            Average::Rank0 => times[0],
            Average::Mean => times.iter().sum::<f64>() / times.len() as f64,
            Average::Min => times.iter().copied().fold(f64::INFINITY, f64::min),
            Average::Max => times.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Which roots rooted collectives run with (`-r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootSel {
    /// One root.
    Fixed(usize),
    /// Every rank in turn (`-r -1`).
    All,
}

/// Everything that decides what runs and how it is measured.
#[derive(Debug, Clone)]
pub struct Plan {
    pub collectives: Vec<Collective>,
    pub dtypes: Vec<DataType>,
    pub redops: Vec<ReduceOp>,
    pub roots: RootSel,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub step: size::Step,
    /// How every case is timed (`-w -n -m -G -z -I --arrival`): the
    /// backend's timed loop reads it as it is here. Its `iters` is
    /// ignored under `auto_iters`.
    pub timing: Timing,
    /// `-n auto`: iterations per placement chosen by this rule (repeats
    /// until the mean time is tight enough) instead of `iters`.
    pub auto_iters: Option<AutoIters>,
    /// Repetitions of the whole sweep (`-N`); 0 repeats until the run is
    /// stopped (Ctrl-C, `-T`, the watchdog), as nccl-tests' `-N 0`.
    pub cycles: u32,
    /// Correctness passes per case (`-c`).
    pub check: Checks,
    pub average: Average,
    /// Report CPU-side launch time instead (`-C`).
    pub cputime: bool,
    /// Add a timestamp column (`-S`).
    pub timestamps: bool,
    /// Misalign buffers by this many elements (`-u`).
    pub unalign: u32,
    /// Test hook: corrupt one checked element (the fault a check must catch).
    pub test_corrupt: bool,
    /// Checks run on every placement after the `-c` passes, in order
    /// (placement extensions: `crate::placement_check`).
    pub placement_checks: Vec<std::sync::Arc<dyn crate::placement_check::PlacementCheck>>,
    /// Ask the backend what the library ran for every case (`--explain`),
    /// in a separate untimed pass after the timed loop.
    pub explain: bool,
    /// alltoallv's traffic (see [`traffic_from_env`]).
    pub traffic: Traffic,
    /// Leave this many leading iterations out of the per-iteration
    /// summary (`-K`).
    pub per_iter_skip: u32,
    /// Report GPU memory usage after each collective (`-M 1`).
    pub memory_report: bool,
}

impl Default for Plan {
    /// nccl-tests' defaults for one collective.
    fn default() -> Plan {
        Plan {
            collectives: vec![Collective::AllReduce],
            dtypes: vec![DataType::Float],
            redops: vec![ReduceOp::Sum],
            roots: RootSel::Fixed(0),
            min_bytes: 32 << 20,
            max_bytes: 32 << 20,
            step: size::Step::Bytes(1 << 20),
            timing: Timing::default(),
            auto_iters: None,
            cycles: 1,
            check: Checks::ONCE,
            average: Average::Mean,
            cputime: false,
            timestamps: false,
            unalign: 0,
            test_corrupt: false,
            placement_checks: Vec::new(),
            explain: false,
            traffic: Traffic::default(),
            per_iter_skip: 0,
            memory_report: false,
        }
    }
}

/// Correctness passes per case (`-c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// `-c 0`: results are not checked (printed as N/A).
    Off,
    /// `-c N`: each placement checked N times, each with its own seed.
    Passes(NonZeroU32),
}

impl Checks {
    /// One pass, the default.
    pub const ONCE: Checks = Checks::Passes(NonZeroU32::MIN);

    /// The passes of nccl-tests' `-c N` (0 is off).
    pub fn from_flag(n: u32) -> Checks {
        NonZeroU32::new(n).map_or(Checks::Off, Checks::Passes)
    }

    /// How many passes a placement gets (0 when off).
    pub fn passes(self) -> u32 {
        match self {
            Checks::Off => 0,
            Checks::Passes(n) => n.get(),
        }
    }
}

impl From<&Plan> for RunSettings {
    /// The settings a record states, as the plan decides them; the
    /// world's (`world_size`, `processes`, `gpus_per_thread`) are the
    /// runner's to fill.
    fn from(p: &Plan) -> RunSettings {
        let (step_factor, step_bytes) = match p.step {
            size::Step::Factor(f) => (Some(f), None),
            size::Step::Bytes(b) => (None, Some(b)),
        };
        let t = &p.timing;
        let mut settings = RunSettings {
            threads_per_process: 1,
            min_bytes: p.min_bytes,
            max_bytes: p.max_bytes,
            step_factor,
            step_bytes,
            warmup_iters: u64::from(t.warmup_iters),
            // 0: `-n auto`, each row's `iterations` says how many it took.
            iters: if p.auto_iters.is_some() {
                0
            } else {
                u64::from(t.iters)
            },
            agg_iters: u64::from(t.agg_iters),
            check: p.check != Checks::Off,
            graph: u64::from(t.graph.launches()),
            blocking: t.blocking.waits(),
            average: p.average.name().to_string(),
            unalign: u64::from(p.unalign),
            per_iter_timing: t.keep_iter_times,
            per_iter_skip: u64::from(p.per_iter_skip),
            ..RunSettings::default()
        };
        for check in &p.placement_checks {
            check.settings(&mut settings);
        }
        settings
    }
}

/// One (type, operator, root) combination of a collective; the runner
/// sweeps sizes for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub dtype: DataType,
    pub redop: ReduceOp,
    pub root: usize,
}

impl Plan {
    /// The sizes of one sweep.
    pub fn sizes(&self) -> Result<Vec<u64>, size::SweepError> {
        size::sweep(self.min_bytes, self.max_bytes, self.step)
    }

    /// Buffer counts of `coll` at `size_bytes`: the collectives table's,
    /// and for alltoallv the plan's traffic.
    pub fn counts(
        &self,
        coll: Collective,
        size_bytes: u64,
        dtype: DataType,
        world_size: usize,
    ) -> Counts {
        if coll == Collective::AllToAllV {
            self.traffic
                .counts(size_bytes, dtype.size_bytes(), world_size)
        } else {
            coll.counts(size_bytes, dtype.size_bytes(), world_size)
        }
    }

    /// The variants of `coll` in nccl-tests' order: types, then operators
    /// (for collectives that print one), then roots (for rooted ones).
    pub fn variants(&self, coll: Collective, world_size: usize) -> Vec<Variant> {
        use collbench_core::collective::RedopUse;
        let spec = coll.spec();
        let redops: Vec<ReduceOp> = match spec.redop {
            RedopUse::NoneColumn => vec![ReduceOp::Sum],
            _ => self.redops.clone(),
        };
        let roots: Vec<usize> = match (spec.has_root, self.roots) {
            (false, _) => vec![0],
            (true, RootSel::Fixed(r)) => vec![r],
            (true, RootSel::All) => (0..world_size).collect(),
        };
        let mut out = Vec::new();
        for &dtype in &self.dtypes {
            for &redop in &redops {
                for &root in &roots {
                    out.push(Variant { dtype, redop, root });
                }
            }
        }
        out
    }

    /// The fixed root is a rank of a world of `world_size` wherever a
    /// planned collective has a root; else why not, for the caller to
    /// refuse before anything runs.
    pub fn root_in_range(&self, world_size: usize) -> Result<(), PlanError> {
        let rooted = self.collectives.iter().any(|c| c.spec().has_root);
        match self.roots {
            RootSel::Fixed(root) if rooted && root >= world_size => {
                Err(PlanError::Root { root, world_size })
            }
            _ => Ok(()),
        }
    }
}

/// alltoallv's traffic from nccl-tests' environment variables:
/// `NCCL_TESTS_ALLTOALLV_MATRIX_FILE` (with `_MATRIX_SCALE`) if set, else
/// the generated pattern with `NCCL_TESTS_ALLTOALLV_SPREAD`. Errors are one
/// line naming the variable or file and the fix.
pub fn traffic_from_env() -> Result<Traffic, String> {
    let var = |name| std::env::var(name).ok();
    let e = |e: TrafficError| e.to_string();
    let Some(path) = var(alltoallv::ENV_MATRIX_FILE) else {
        return Traffic::generated(var(alltoallv::ENV_SPREAD).as_deref()).map_err(e);
    };
    // Bounded like every settings file: a matrix of 1024 ranks is a few
    // MiB of text, and a wrong path (`/dev/zero`) must not grow forever.
    let text =
        read_limit::read_to_string(std::path::Path::new(&path), 16 << 20, "a traffic matrix")
            .map_err(|err| format!("{}={path}: {err}", alltoallv::ENV_MATRIX_FILE))?;
    let scale = var(alltoallv::ENV_MATRIX_SCALE);
    TrafficMatrix::parse(&path, &text, scale.as_deref())
        .map(Traffic::Matrix)
        .map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_follow_nccl_tests_loops() {
        let plan = Plan {
            dtypes: vec![DataType::Float, DataType::Half],
            redops: vec![ReduceOp::Sum, ReduceOp::Max],
            roots: RootSel::All,
            ..Plan::default()
        };
        assert_eq!(plan.variants(Collective::AllGather, 3).len(), 2);
        assert_eq!(plan.variants(Collective::AllReduce, 3).len(), 4);
        assert_eq!(plan.variants(Collective::Broadcast, 3).len(), 6);
        assert_eq!(plan.variants(Collective::Reduce, 3).len(), 12);
        assert_eq!(plan.variants(Collective::SendRecv, 3).len(), 4);
    }

    #[test]
    fn averages() {
        let t = [1.0, 2.0, 6.0];
        assert_eq!(Average::Rank0.combine(&t), 1.0);
        assert_eq!(Average::Mean.combine(&t), 3.0);
        assert_eq!(Average::Min.combine(&t), 1.0);
        assert_eq!(Average::Max.combine(&t), 6.0);
    }
}
