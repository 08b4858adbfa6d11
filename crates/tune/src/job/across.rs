//! `tune` under a launcher: every process measures its part of each
//! repeat (its GPUs of every communicator) and agrees on one result per
//! repeat with the others ([`crate::lockstep`]), so every process runs
//! the same search in lock step. Rank 0 decides the plan (hosts,
//! transport, candidates) and shares it, and says the job's lines.
//!
//! Environment candidates run in child jobs: every process starts the
//! same children, child `k` of every process forms child job `k` (at a
//! port rank 0 picked, [`super::ports`]), and each process drives its
//! own children as in one process ([`crate::child`]), one request per
//! repeat, all in lock step. A child that dies, hangs or disagrees on one
//! host fails that candidate on every host with the reasons of all (the
//! processes agree on every repeat, and on the children's setup), never
//! the search; rank 0 says one line per candidate so ended.

use super::budget::{all_candidates, charge_setup, config, teardown_us};
use super::ports::{agree_ports, child_timeout, PortBook};
use super::{facts, Measurers, Note, Sink, Surroundings, TuneError, TuneOptions};
use crate::child::{Children, EnvFallback};
use crate::lockstep::{agree_outcomes, Lockstep};
use crate::measure::{InPair, MeasureError, Measured, Measurer, WallClock};
use crate::report::TuneReport;
use crate::search::TuneConfig;
use crate::setting::{Case, Setting};
use crate::space::CandidateSpace;
use collbench_core::Bootstrap;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// What rank 0 decides for everyone before the search.
#[derive(Debug, Serialize, Deserialize)]
struct Shared {
    hosts: usize,
    space: CandidateSpace,
}

/// Every process gets rank 0's hosts and candidates.
fn share(o: &TuneOptions, at: &Surroundings) -> Result<Shared, TuneError> {
    let control = at.control;
    let mine = match control.rank() {
        0 => {
            let plan = facts::plan(&o.plan, at.hosts, control.world_size());
            let shared = Shared {
                hosts: plan.job.hosts,
                space: plan.search_space(),
            };
            let bytes = serde_json::to_vec(&shared)
                .map_err(|e| TuneError::Failed(format!("cannot encode the plan: {e}")))?;
            Some(bytes)
        }
        _ => None,
    };
    let bytes = control.broadcast(mine)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        TuneError::Peer(format!(
            "rank 0's plan is unreadable ({e}): every process must run the same collbench"
        ))
    })
}

/// Runs the search as one process of the job.
pub fn run(
    o: &TuneOptions,
    at: &Surroundings,
    measurers: &mut dyn Measurers,
    sink: &mut dyn Sink,
) -> Result<TuneReport, TuneError> {
    let control = at.control;
    let shared = share(o, at)?;
    let config = |ranks: usize| config(o, ranks, shared.hosts, shared.space.clone());
    measurers.install()?;
    // Before any thread NCCL starts: the handler thread never calls NCCL.
    let stop = sink.arm_stop();
    // Children before this process's communicators (see `one::run`): a
    // child started from the NCCL launching thread would inherit its
    // one-CPU mask. Their setup overlaps with ours.
    let children = start_child_jobs(o, at, sink, &config(control.world_size()))?;
    // The same communicators in the same order on every process: `open`
    // walks the shared candidates.
    let opened = measurers.open(control, &|ranks| all_candidates(&config(ranks)))?;
    let cfg = config(opened.world_size);
    let prepared = Prepared::when_ready(children, control, at.started, sink)?;
    let mut measurer = opened.measurer;
    search(
        measurer.as_mut(),
        at,
        cfg,
        prepared,
        opened.communicators,
        &stop,
        sink,
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
        control: &dyn Bootstrap,
        started: Instant,
        sink: &mut dyn Sink,
    ) -> Result<Prepared, TuneError> {
        let ended = children_ready(&mut children, control, sink)?;
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
    for s in all_candidates(cfg) {
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
    o: &TuneOptions,
    at: &Surroundings,
    sink: &mut dyn Sink,
    cfg: &TuneConfig,
) -> Result<(Children, PortBook), TuneError> {
    let control = at.control;
    let envs = env_candidates(cfg);
    let ports = PortBook::new(match envs.len() {
        0 => Vec::new(),
        n => agree_ports(control, &at.bind, 2 * n)?,
    });
    let timeout = o
        .child_timeout
        .unwrap_or_else(|| child_timeout(at.timeout_s));
    let mut children = Children::new((at.spawner)(ports.clone())?, timeout);
    children
        .start(&envs)
        .map_err(|e| TuneError::Failed(format!("collbench tune: {e}")))?;
    if control.rank() == 0 && !children.is_empty() {
        sink.note(Note::ChildrenStarting {
            count: children.len(),
            processes: Some(control.world_size()),
        });
    }
    Ok((children, ports))
}

/// Waits (one deadline) for every child to be ready; the processes agree
/// on each candidate, and one whose children failed anywhere is ended
/// everywhere (rank 0 says why). Returns the ended environments.
fn children_ready(
    children: &mut Children,
    control: &dyn Bootstrap,
    sink: &mut dyn Sink,
) -> Result<Vec<Vec<(String, String)>>, TuneError> {
    let each = children.ready_each(Instant::now() + children.timeout());
    let own: Vec<Option<String>> = each.iter().map(|r| r.failure.clone()).collect();
    let agreed = agree_outcomes(control, &own)?;
    let mut ended = Vec::new();
    for (r, why) in each.into_iter().zip(agreed) {
        if let Some(why) = why {
            if control.rank() == 0 {
                sink.note(Note::CandidateEnded {
                    env: &r.env,
                    why: &why,
                });
            }
            children.end(&r.env, &why);
            ended.push(r.env);
        }
    }
    Ok(ended)
}

/// The search in lock step. `communicators`: how many `inner` holds
/// (their end is charged too).
fn search(
    inner: &mut dyn Measurer,
    at: &Surroundings,
    mut cfg: TuneConfig,
    prepared: Prepared,
    communicators: usize,
    stop: &AtomicBool,
    sink: &mut dyn Sink,
) -> Result<TuneReport, TuneError> {
    let control = at.control;
    let root = control.rank() == 0;
    // The slowest setup and end, charged to everyone alike: the budgets
    // agree.
    let own = [
        prepared.setup_us,
        teardown_us(&prepared.children, communicators),
    ];
    let max = control.all_max(&own)?;
    charge_setup(&mut cfg, max[0], max[1])?;
    let agreed = AtomicBool::new(false);
    let mut both = EnvFallback::across(inner, prepared.children);
    // Inside the agreement: the dearest process's wall time is everyone's.
    let mut clock = WallClock::new(&mut both);
    // Rank 0 says once per candidate environment that it ended, and why
    // (those ended in the children's setup were told already).
    let mut told = prepared.ended;
    // The hook and the progress both speak through the sink, never at
    // once (the hook runs inside a measurement, progress between them).
    let sink = RefCell::new(sink);
    let mut lock = Lockstep::new(&mut clock, control, stop, &agreed).on_candidate_ended(Box::new(
        |candidate: &Setting, why: &str| {
            if !told.contains(&candidate.env) {
                told.push(candidate.env.clone());
                if root {
                    let env = &candidate.env;
                    if let Ok(mut sink) = sink.try_borrow_mut() {
                        sink.note(Note::CandidateEnded { env, why });
                    }
                }
            }
        },
    ));
    let mut fresh = FreshPorts {
        inner: &mut lock,
        control,
        bind: &at.bind,
        book: prepared.ports,
        failure: None,
    };
    let report = crate::tune(&mut fresh, &cfg, &agreed, &mut |p| {
        if root {
            if let Ok(mut sink) = sink.try_borrow_mut() {
                sink.progress(p)
            }
        }
    });
    let ports_failure = fresh.failure.take();
    let failure = lock.peer_failure().cloned();
    // The children end before the caller shares the outcome: a process
    // that exits leaves none behind.
    drop(lock);
    drop(both);
    if let Some(f) = failure {
        return Err(f.into());
    }
    if let Some(f) = ports_failure {
        return Err(f);
    }
    Ok(report)
}

/// Every process agrees on two fresh ports (rank 0's picks) before the
/// children of a candidate are renewed: the renewed pair's child jobs
/// meet there. A failure to agree (a peer gone) is kept for the usual
/// line, and ends the search as failed.
struct FreshPorts<'a> {
    inner: &'a mut dyn Measurer,
    control: &'a dyn Bootstrap,
    bind: &'a str,
    book: PortBook,
    failure: Option<TuneError>,
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
        match agree_ports(self.control, self.bind, 2) {
            Ok(ports) => self.book.add(&ports),
            Err(f) => {
                let why = f.to_string();
                self.failure = Some(f);
                return Err(MeasureError::Failed(why));
            }
        }
        self.inner.renew(candidate)
    }
}
