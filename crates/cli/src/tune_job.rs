//! `collbench tune` under a launcher (torchrun variables, srun, mpirun,
//! the explicit flags): every process joins the control plane, measures
//! its part of each repeat (its GPUs of every communicator) and agrees on
//! one result per repeat with the others (`collbench_tune::lockstep`), so
//! every process runs the same search in lock step. Rank 0 decides the
//! plan (hosts, transport, candidates) and shares it, prints the progress,
//! the table and the files; the others print nothing on stdout, and every
//! process exits with rank 0's code.
//!
//! Environment candidates are not measured across processes yet: each
//! would need a child job on every host (docs/tune.md, section 3).

use crate::exit::{Failure, Outcome};
use crate::tune_cmd::{self, TuneArgs};
use crate::{tune_child, tune_plan};
use collbench_core::{Bootstrap, PeerFailure};
use collbench_launch::{Control, LaunchOptions, World};
use collbench_nccl::tune::NcclMeasurer;
use collbench_nccl::tuner::{TunerError, TunerPlugin};
use collbench_tune::lockstep::Lockstep;
use collbench_tune::plan::distinct_hosts;
use collbench_tune::{CandidateSpace, Measurer, TuneConfig};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Why a job of several processes leaves the environment candidates out.
const ENV_ACROSS: &str = "environment candidates across processes need a child job on every host (not built yet); run them with one process per host";

/// What rank 0 decides for everyone before the search.
#[derive(Debug, Serialize, Deserialize)]
struct Shared {
    hosts: usize,
    space: CandidateSpace,
}

/// A job failure: the usual one line, exit 3.
fn peer(f: PeerFailure) -> Failure {
    Failure::new(Outcome::Launch, f.message)
}

/// This process's host as NCCL tells hosts apart: `NCCL_HOSTID` where set
/// (emulated hosts on one machine), else the host name.
fn host_id(world: &World) -> String {
    std::env::var("NCCL_HOSTID")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| world.hostname.clone())
}

/// Joins the job, telling rank 0 this process's host identity.
fn join(world: &World, launch: &LaunchOptions) -> Result<Control, Failure> {
    Ok(Control::connect_with_info(
        world,
        launch,
        host_id(world).into_bytes(),
    )?)
}

/// Rank 0's count of distinct hosts (from every rank's hello).
fn hosts_of(control: &Control) -> usize {
    let ids: Vec<String> = control
        .hellos()
        .into_iter()
        .map(|h| String::from_utf8_lossy(&h.info).into_owned())
        .collect();
    distinct_hosts(ids.iter().map(String::as_str))
}

/// Rank 0's plan for `ranks` ranks, environment candidates left out.
fn root_plan(a: &TuneArgs, control: &Control, ranks: usize) -> collbench_tune::plan::Plan {
    let mut plan = tune_plan::plan(a, hosts_of(control), ranks);
    plan.env_not_measured = Some(ENV_ACROSS.into());
    plan
}

/// `--list-candidates` under a launcher: rank 0 prints the plan for the
/// job's hosts, every process exits with its code.
pub fn list_across(
    a: &TuneArgs,
    world: &World,
    launch: &LaunchOptions,
) -> Result<Outcome, Failure> {
    let control = join(world, launch)?;
    let code = if world.rank == 0 {
        let plan = root_plan(a, &control, world.world_size);
        let out = tune_plan::print_plan(a, &plan);
        let code = out.as_ref().map_or_else(|f| f.outcome.code(), |o| o.code());
        control.broadcast(Some(vec![code as u8]))?;
        return out;
    } else {
        control.broadcast(None)?
    };
    Ok(outcome_of(code.first().copied()))
}

/// Rank 0's exit code as another process's outcome.
fn outcome_of(code: Option<u8>) -> Outcome {
    match code.map(i32::from) {
        Some(0) => Outcome::TuneComplete,
        Some(2) => Outcome::TuneRefused,
        Some(3) => Outcome::Launch,
        Some(130) => Outcome::TuneInterrupted,
        _ => Outcome::TuneFailed,
    }
}

/// Every process gets rank 0's hosts and candidates.
fn share(a: &TuneArgs, control: &Control, ranks: usize) -> Result<Shared, Failure> {
    let mine = (control.rank() == 0).then(|| {
        let plan = root_plan(a, control, ranks);
        let dropped = plan.space.extra.len() - plan.search_space().extra.len();
        if dropped > 0 {
            eprintln!(
                "collbench tune: {dropped} environment candidates not measured: {ENV_ACROSS}"
            );
        }
        let shared = Shared {
            hosts: plan.job.hosts,
            space: plan.search_space(),
        };
        serde_json::to_vec(&shared).expect("the plan serializes")
    });
    let bytes = control.broadcast(mine)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::new(
            Outcome::Launch,
            format!("rank 0's plan is unreadable ({e}): every process must run the same collbench"),
        )
    })
}

/// Runs `collbench tune` as one process of a job.
pub fn tune_across(
    a: &TuneArgs,
    world: &World,
    launch: &LaunchOptions,
) -> Result<Outcome, Failure> {
    let control = join(world, launch)?;
    let shared = share(a, &control, world.world_size)?;
    let config = |ranks: usize| {
        tune_cmd::tune_config(a, ranks, shared.hosts)
            .map(|mut c| {
                c.space = shared.space.clone();
                c
            })
            .map_err(|m| Failure::new(Outcome::TuneRefused, m))
    };
    if let Some(mode) = &a.test_fake {
        let stop = tune_cmd::stop_on_ctrl_c();
        let mut fake = Paced {
            inner: tune_child::fake_parent(mode)?,
            pause: Duration::from_millis(a.test_repeat_ms.unwrap_or(0)),
        };
        return search(
            a,
            &mut fake,
            &control,
            config(world.world_size)?,
            0.0,
            &stop,
        );
    }
    let plugin = TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => Failure::new(Outcome::TuneRefused, e.to_string()),
        e => Failure::new(Outcome::TuneFailed, e.to_string()),
    })?;
    // Before any thread NCCL starts: the handler thread never calls NCCL.
    let stop = tune_cmd::stop_on_ctrl_c();
    let started = Instant::now();
    let opts = tune_cmd::nccl_options(a, world.hostname.clone());
    let mut measurer = NcclMeasurer::new(&opts, &control, plugin)
        .map_err(|e| Failure::new(Outcome::TuneFailed, e.to_string()))?;
    let cfg = config(measurer.world_size())?;
    if control.rank() == 0 {
        eprintln!("collbench tune: creating the candidates' communicators");
    }
    // The same communicators in the same order on every process: `prepare`
    // walks the shared candidates.
    measurer.prepare(&tune_cmd::all_candidates(&cfg));
    let setup_us = started.elapsed().as_secs_f64() * 1e6;
    search(a, &mut measurer, &control, cfg, setup_us, &stop)
}

/// The search in lock step; rank 0 prints, everyone exits with its code.
fn search(
    a: &TuneArgs,
    inner: &mut dyn Measurer,
    control: &Control,
    mut cfg: TuneConfig,
    setup_us: f64,
    stop: &AtomicBool,
) -> Result<Outcome, Failure> {
    let root = control.rank() == 0;
    // The slowest setup, charged to everyone alike: the budgets agree.
    let setup_us = control.all_max(&[setup_us]).map_err(peer)?[0];
    tune_cmd::charge_setup(&mut cfg, setup_us)?;
    let agreed = AtomicBool::new(false);
    let mut lock = Lockstep::new(inner, control, stop, &agreed);
    let mut lines = tune_cmd::ProgressLines::default();
    let report = collbench_tune::tune(&mut lock, &cfg, &agreed, &mut |p| {
        if root {
            lines.hear(p)
        }
    });
    if let Some(f) = lock.peer_failure() {
        return Err(peer(f.clone()));
    }
    if !root {
        let code = control.broadcast(None)?;
        return Ok(outcome_of(code.first().copied()));
    }
    let out = tune_cmd::report_outcome(a, &report);
    let code = out.as_ref().map_or_else(|f| f.outcome.code(), |o| o.code());
    control.broadcast(Some(vec![code as u8]))?;
    out
}

/// Test hook (`--test-repeat-ms`): the fake takes wall time per repeat,
/// so a test can kill a process mid-search.
struct Paced<M> {
    inner: M,
    pause: Duration,
}

impl<M: Measurer> Measurer for Paced<M> {
    fn measure(
        &mut self,
        setting: &collbench_tune::Setting,
        case: &collbench_tune::Case,
        iters: u32,
    ) -> Result<collbench_tune::Sample, collbench_tune::MeasureError> {
        std::thread::sleep(self.pause);
        self.inner.measure(setting, case, iters)
    }
}
