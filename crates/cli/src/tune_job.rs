//! `collbench tune` under a launcher (torchrun variables, srun, mpirun,
//! the explicit flags): every process joins the control plane, measures
//! its part of each repeat (its GPUs of every communicator) and agrees on
//! one result per repeat with the others (`collbench_tune::lockstep`), so
//! every process runs the same search in lock step. Rank 0 decides the
//! plan (hosts, transport, candidates) and shares it, prints the progress,
//! the table and the files; the others print nothing on stdout, and every
//! process exits with rank 0's code.
//!
//! Environment candidates run in child jobs (`tune_job_child`): every
//! process starts the same children, child `k` of every process forms
//! child job `k`, and each process drives its own children as in one
//! process (`collbench_tune::child`), one request per repeat, all in lock
//! step. A child that dies, hangs or disagrees on one host fails that
//! candidate on every host with the reasons of all (the processes agree
//! on every repeat, and on the children's setup), never the search; rank
//! 0 prints one line per candidate so ended.

use crate::exit::{Failure, Outcome};
use crate::tune_cmd::{self, TuneArgs};
use crate::tune_job_child::PortBook;
use crate::{tune_child, tune_job_child, tune_plan};
use collbench_core::{Bootstrap, PeerFailure};
use collbench_launch::{Control, LaunchOptions, World};
use collbench_nccl::tune::NcclMeasurer;
use collbench_nccl::tuner::{TunerError, TunerPlugin};
use collbench_tune::child::{Children, EnvFallback};
use collbench_tune::lockstep::{agree_outcomes, Lockstep};
use collbench_tune::plan::distinct_hosts;
use collbench_tune::{
    CandidateSpace, Case, InPair, MeasureError, Measured, Measurer, Setting, TuneConfig, WallClock,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

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

/// Rank 0's plan for `ranks` ranks.
fn root_plan(a: &TuneArgs, control: &Control, ranks: usize) -> collbench_tune::plan::Plan {
    tune_plan::plan(a, hosts_of(control), ranks)
}

/// Rank 0 runs `root_work` (which prints); every process exits with its
/// code, the others learning it from rank 0.
fn rank_0_decides(
    control: &Control,
    root_work: impl FnOnce() -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    if control.rank() != 0 {
        let code = control.broadcast(None)?;
        return Ok(outcome_of(code.first().copied()));
    }
    let out = root_work();
    let code = out.as_ref().map_or_else(|f| f.outcome.code(), |o| o.code());
    control.broadcast(Some(vec![code as u8]))?;
    out
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

/// Runs `collbench tune` as one process of a job; with
/// `--list-candidates`, rank 0 prints the plan for the job's hosts.
pub fn tune_across(
    a: &TuneArgs,
    world: &World,
    launch: &LaunchOptions,
) -> Result<Outcome, Failure> {
    // The budget is the command's wall time: joining the job counts too.
    let started = Instant::now();
    let control = join(world, launch)?;
    if a.list_candidates {
        return rank_0_decides(&control, || {
            tune_plan::print_plan(a, &root_plan(a, &control, world.world_size))
        });
    }
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
        let cfg = config(world.world_size)?;
        let children = start_child_jobs(a, world, &control, &cfg)?;
        let mut fake = Paced {
            inner: tune_child::fake_parent(mode)?,
            pause: Duration::from_millis(a.test_repeat_ms.unwrap_or(0)),
        };
        let prepared = Prepared::when_ready(children, &control, started)?;
        return search(a, &mut fake, &control, cfg, prepared, 0, &stop);
    }
    let plugin = TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => Failure::new(Outcome::TuneRefused, e.to_string()),
        e => Failure::new(Outcome::TuneFailed, e.to_string()),
    })?;
    // Before any thread NCCL starts: the handler thread never calls NCCL.
    let stop = tune_cmd::stop_on_ctrl_c();
    // Children before this process's communicators (see tune_cmd::tune):
    // a child started from the NCCL launching thread would inherit its
    // one-CPU mask. Their setup overlaps with ours.
    let children = start_child_jobs(a, world, &control, &config(world.world_size)?)?;
    let opts = tune_cmd::nccl_options(a, tune_cmd::Place::of(world));
    let mut measurer = NcclMeasurer::new(&opts, &control, plugin)
        .map_err(|e| Failure::new(Outcome::TuneFailed, e.to_string()))?;
    let cfg = config(measurer.world_size())?;
    if control.rank() == 0 {
        eprintln!("collbench tune: creating the candidates' communicators");
    }
    // The same communicators in the same order on every process: `prepare`
    // walks the shared candidates.
    measurer.prepare(&tune_cmd::all_candidates(&cfg));
    let prepared = Prepared::when_ready(children, &control, started)?;
    let communicators = measurer.communicators();
    search(
        a,
        &mut measurer,
        &control,
        cfg,
        prepared,
        communicators,
        &stop,
    )
}

/// The children (and their child jobs' ports), the candidate
/// environments that failed in their setup, and the setup's wall time
/// (us).
struct Prepared {
    children: Children,
    ports: PortBook,
    ended: Vec<Vec<(String, String)>>,
    setup_us: f64,
}

impl Prepared {
    /// Once every child is ready (or ended everywhere): the setup, started
    /// at `started`, is done.
    fn when_ready(
        (mut children, ports): (Children, PortBook),
        control: &Control,
        started: Instant,
    ) -> Result<Prepared, Failure> {
        let ended = children_ready(&mut children, control)?;
        Ok(Prepared {
            children,
            ports,
            ended,
            setup_us: started.elapsed().as_secs_f64() * 1e6,
        })
    }
}

/// The distinct environments of the environment candidates, in the
/// search's order (the same in every process).
fn env_candidates(cfg: &TuneConfig) -> Vec<Setting> {
    let mut out: Vec<Setting> = Vec::new();
    for s in tune_cmd::all_candidates(cfg) {
        if !s.env.is_empty() && !out.iter().any(|o| o.env == s.env) {
            out.push(s);
        }
    }
    out
}

/// Starts, in every process at once and without waiting for them, the
/// children of the environment candidates (two per candidate: its own and
/// its default partner's), each in its own child job at a port rank 0
/// picked.
fn start_child_jobs(
    a: &TuneArgs,
    world: &World,
    control: &Control,
    cfg: &TuneConfig,
) -> Result<(Children, PortBook), Failure> {
    let envs = env_candidates(cfg);
    let ports = PortBook::new(match envs.len() {
        0 => Vec::new(),
        n => tune_job_child::agree_ports(control, 2 * n)?,
    });
    let timeout = a
        .test_child_timeout_s
        .map(Duration::from_secs)
        .unwrap_or_else(|| tune_job_child::child_timeout(a.launch.timeout_s));
    let mut children = Children::new(
        tune_job_child::spawner(world, a.launch.timeout_s, ports.clone())?,
        timeout,
    );
    children
        .start(&envs)
        .map_err(|e| Failure::new(Outcome::TuneFailed, format!("collbench tune: {e}")))?;
    if control.rank() == 0 && !children.is_empty() {
        eprintln!(
            "collbench tune: starting {} child processes in each of the {} processes for candidates NCCL reads only from its environment (each with a default-environment partner; child job k joins the children k of every process)",
            children.len(),
            control.world_size()
        );
    }
    Ok((children, ports))
}

/// Waits (one deadline) for every child to be ready; the processes agree
/// on each candidate, and one whose children failed anywhere is ended
/// everywhere (rank 0 says why). Returns the ended environments.
fn children_ready(
    children: &mut Children,
    control: &Control,
) -> Result<Vec<Vec<(String, String)>>, Failure> {
    let each = children.ready_each(Instant::now() + children.timeout());
    let own: Vec<Option<String>> = each.iter().map(|r| r.failure.clone()).collect();
    let agreed = agree_outcomes(control, &own).map_err(peer)?;
    let mut ended = Vec::new();
    for (r, why) in each.into_iter().zip(agreed) {
        if let Some(why) = why {
            if control.rank() == 0 {
                say_ended(&r.env, &why);
            }
            children.end(&r.env, &why);
            ended.push(r.env);
        }
    }
    Ok(ended)
}

/// Rank 0's line for a candidate that failed where only it is at fault.
fn say_ended(env: &[(String, String)], why: &str) {
    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!(
        "collbench tune: candidate {} ended (the search goes on): {why}",
        vars.join(" ")
    );
}

/// The search in lock step; rank 0 prints, everyone exits with its code.
/// `communicators`: how many `inner` holds (their end is charged too).
fn search(
    a: &TuneArgs,
    inner: &mut dyn Measurer,
    control: &Control,
    mut cfg: TuneConfig,
    prepared: Prepared,
    communicators: usize,
    stop: &AtomicBool,
) -> Result<Outcome, Failure> {
    let root = control.rank() == 0;
    // The slowest setup and end, charged to everyone alike: the budgets
    // agree.
    let own = [
        prepared.setup_us,
        tune_cmd::teardown_us(&prepared.children, communicators),
    ];
    let max = control.all_max(&own).map_err(peer)?;
    tune_cmd::charge_setup(&mut cfg, max[0], max[1])?;
    let agreed = AtomicBool::new(false);
    let mut both = EnvFallback::across(inner, prepared.children);
    // Inside the agreement: the dearest process's wall time is everyone's.
    let mut clock = WallClock::new(&mut both);
    // Rank 0 says once per candidate environment that it ended, and why
    // (those ended in the children's setup were told already).
    let mut told = prepared.ended;
    let mut lock = Lockstep::new(&mut clock, control, stop, &agreed).on_candidate_ended(Box::new(
        move |candidate: &Setting, why: &str| {
            if !told.contains(&candidate.env) {
                told.push(candidate.env.clone());
                if root {
                    say_ended(&candidate.env, why);
                }
            }
        },
    ));
    let mut fresh = FreshPorts {
        inner: &mut lock,
        control,
        book: prepared.ports,
        failure: None,
    };
    let mut lines = tune_cmd::ProgressLines::default();
    let report = collbench_tune::tune(&mut fresh, &cfg, &agreed, &mut |p| {
        if root {
            lines.hear(p)
        }
    });
    let ports_failure = fresh.failure.take();
    let failure = lock.peer_failure().cloned();
    // The children end before the exit code is shared: a process that
    // exits leaves none behind.
    drop(lock);
    drop(both);
    if let Some(f) = failure {
        return Err(peer(f));
    }
    if let Some(f) = ports_failure {
        return Err(f);
    }
    rank_0_decides(control, || tune_cmd::report_outcome(a, &report))
}

/// Every process agrees on two fresh ports (rank 0's picks) before the
/// children of a candidate are renewed: the renewed pair's child jobs
/// meet there. A failure to agree (a peer gone) is kept for the usual
/// line, and ends the search as failed.
struct FreshPorts<'a> {
    inner: &'a mut dyn Measurer,
    control: &'a Control,
    book: PortBook,
    failure: Option<Failure>,
}

impl Measurer for FreshPorts<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        self.inner.measure(setting, case, iters)
    }

    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        self.inner.measure_in_pair(pair, case, iters)
    }

    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        self.inner.candidate_ended(candidate, reason);
    }

    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        if candidate.env.is_empty() {
            return self.inner.renew(candidate);
        }
        match tune_job_child::agree_ports(self.control, 2) {
            Ok(ports) => self.book.add(&ports),
            Err(f) => {
                let why = f.message.clone();
                self.failure = Some(f);
                return Err(MeasureError::Failed(why));
            }
        }
        self.inner.renew(candidate)
    }
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
    ) -> Measured {
        std::thread::sleep(self.pause);
        self.inner.measure(setting, case, iters)
    }
}
