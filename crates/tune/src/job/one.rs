//! `tune` in one process: environment candidates in child processes of
//! its own, everything else in process.

use super::budget::{all_candidates, charge_setup, config, teardown_us};
use super::{facts, Measurers, Note, Sink, Surroundings, TuneError, TuneOptions, CHILD_TIMEOUT};
use crate::child::{Children, EnvFallback};
use crate::measure::{Measurer, WallClock};
use crate::report::TuneReport;
use crate::search::TuneConfig;
use std::sync::atomic::AtomicBool;

/// The search's configuration for `world_size` ranks on one host.
fn config_for(o: &TuneOptions, world_size: usize) -> TuneConfig {
    config(o, world_size, 1, facts::plan(&o.plan, 1, world_size).space)
}

/// Runs the search in this process and its children.
pub fn run(
    o: &TuneOptions,
    at: &Surroundings,
    measurers: &mut dyn Measurers,
    sink: &mut dyn Sink,
) -> Result<TuneReport, TuneError> {
    measurers.install()?;
    // Before any thread NCCL starts: the handler thread never calls NCCL.
    let stop = sink.arm_stop();
    // Children before this process's communicators: NcclBackend pins the
    // launching thread to one CPU, and a child started from it would
    // inherit that one-CPU mask for all its threads, NCCL's included,
    // unlike this process. Their setup overlaps with ours.
    let mut children = start_children(o, at, sink, &config_for(o, 2))?;
    let opened = measurers.open(at.control, &|ranks| all_candidates(&config_for(o, ranks)))?;
    let cfg = config_for(o, opened.world_size);
    children
        .ready()
        .map_err(|e| TuneError::Failed(format!("collbench tune: {e}")))?;
    let setup_us = at.started.elapsed().as_secs_f64() * 1e6;
    let mut measurer = opened.measurer;
    search(
        measurer.as_mut(),
        children,
        setup_us,
        opened.communicators,
        cfg,
        &stop,
        sink,
    )
}

/// Starts, without waiting for them, the child processes that
/// environment-only candidates need (two per distinct environment: the
/// candidate's and its own default partner's).
fn start_children(
    o: &TuneOptions,
    at: &Surroundings,
    sink: &mut dyn Sink,
    cfg: &TuneConfig,
) -> Result<Children, TuneError> {
    let timeout = o.child_timeout.unwrap_or(CHILD_TIMEOUT);
    let mut children = Children::new((at.spawner)(Default::default())?, timeout);
    let in_children: Vec<_> = all_candidates(cfg)
        .into_iter()
        .filter(|s| !s.env.is_empty())
        .collect();
    children
        .start(&in_children)
        .map_err(|e| TuneError::Failed(format!("collbench tune: {e}")))?;
    if !children.is_empty() {
        sink.note(Note::ChildrenStarting {
            count: children.len(),
            processes: None,
        });
    }
    Ok(children)
}

/// Charges the setup and the end (the children and `communicators` of
/// `inner` to destroy) to the budget and runs the search (environment
/// candidates in the children).
fn search(
    inner: &mut dyn Measurer,
    children: Children,
    setup_us: f64,
    communicators: usize,
    mut cfg: TuneConfig,
    stop: &AtomicBool,
    sink: &mut dyn Sink,
) -> Result<TuneReport, TuneError> {
    charge_setup(&mut cfg, setup_us, teardown_us(&children, communicators))?;
    let mut measurer = EnvFallback::new(inner, children);
    let mut clock = WallClock::new(&mut measurer);
    Ok(crate::tune(&mut clock, &cfg, stop, &mut |p| {
        sink.progress(p)
    }))
}
