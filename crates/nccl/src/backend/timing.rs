//! Timing: warmup, the timed loop (bare, then a second pass with
//! per-iteration events, or events inline from 1 GiB), CUDA graphs (`-G`),
//! and waiting for the streams while watching NCCL's async errors, the
//! job's stop (the watchdog's, see `collbench_runner::watch`) and the `-T`
//! timeout. The loops publish where they are after each call: one relaxed
//! store per GPU, outside the per-iteration events.

use super::buffers::Buffers;
use super::comms::Comms;
use super::debug;
use super::issue::Launcher;
use crate::cuda::{Event, Graph};
use crate::ffi::RedOpId;
use crate::group::{self, Group};
use crate::stamps::Stamps;
use collbench_runner::{BackendError, Blocking, CaseSpec, Measurement, Timing};
use std::time::Instant;

/// Whether the per-iteration events go in the timed loop itself:
/// COLLBENCH_ITER_EVENTS=inline|separate, else only from 1 GiB.
///
/// A timing event between two collectives on a stream costs a few
/// microseconds per iteration on the GPU (measured on H200: +2-4 us per
/// iteration from 4 MiB to 128 MiB against a bare loop), and host time at
/// small sizes. So the timed loop runs bare, as nccl-tests', and a second
/// pass of the same length takes the per-iteration times; only from
/// 1 GiB, where an iteration takes milliseconds and the gap is below 0.1%,
/// are the events recorded in the timed loop.
fn inline_events(setting: Option<&str>, size_bytes: u64) -> bool {
    match setting {
        Some("inline") => true,
        Some("separate") => false,
        _ => size_bytes >= 1 << 30,
    }
}

/// Per-operation seconds for each of `n` local ranks: the loop's wall
/// (`total`) and issue (`cpu`) times over `ops` operations.
fn per_operation(total: f64, cpu: f64, ops: u64, n: usize, iter_times_us: Vec<f64>) -> Measurement {
    let per = ops as f64;
    Measurement {
        rank_time_s: vec![total / per; n],
        rank_cputime_s: vec![cpu / per; n],
        iter_times_us,
        iter_stats: None,
        // Taken by the arrival pass (arrival.rs), set by the caller.
        arrival: None,
    }
}

/// The shape of a timed loop: `iters` iterations (`-n`) of `agg`
/// collectives each (`-m`), with buffers placed for `max` bytes (the
/// sweep's largest size).
#[derive(Clone, Copy)]
pub(super) struct Loop {
    pub(super) iters: u64,
    agg: u64,
    max: u64,
    /// Operation index of the first timed collective (`Timing::first_op`).
    first: u64,
    /// Number of the first timed iteration for progress (the warm-up ones
    /// come before).
    pub(super) first_iteration: u64,
}

impl Loop {
    fn new(case: &CaseSpec, timing: &Timing) -> Loop {
        Loop {
            iters: timing.iters.max(1) as u64,
            agg: timing.agg_iters.max(1) as u64,
            max: timing.max_bytes.max(case.size_bytes()),
            first: timing.first_op,
            first_iteration: timing.warmup_iters as u64,
        }
    }
}

/// What timing keeps between cases: set in this file and `arrival.rs`.
pub(crate) struct Timer {
    /// A throwaway graph has been captured and replayed (`-G`).
    graphs_warmed: bool,
    /// Arrival timing's stamp kernels and slots on each local GPU (loaded
    /// on first use).
    pub(super) stamps: Vec<Option<Stamps>>,
}

impl Timer {
    /// Nothing measured yet on `gpus` GPUs.
    pub(crate) fn new(gpus: usize) -> Timer {
        Timer {
            graphs_warmed: false,
            stamps: (0..gpus).map(|_| None).collect(),
        }
    }

    /// Seconds per operation of `iters` back-to-back iterations of `case`
    /// after `warmup` untimed ones, with buffers placed for `max` bytes:
    /// the timed loop alone, without the per-iteration pass (see
    /// `NcclBackend::time_bare`).
    pub(crate) fn bare(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        (warmup, iters): (u32, u32),
        max: u64,
        ops: &[RedOpId],
    ) -> Result<f64, BackendError> {
        for _ in 0..warmup {
            run.launch(comms, case, 0, max, ops)?;
        }
        comms.wait_all()?;
        let iters = iters.max(1) as u64;
        let lp = Loop {
            iters,
            agg: 1,
            max,
            first: 0,
            first_iteration: warmup as u64,
        };
        let (total, _, _) = self.timed_loop(comms, run, case, lp, ops, Blocking::Off, false)?;
        Ok(total / iters as f64)
    }

    /// The timed measurement of `case` (warm-up, the timed loop, the
    /// per-iteration pass, `-G`'s graphs and the arrival pass as `timing`
    /// asks).
    pub(crate) fn time(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        timing: &Timing,
        ops: &[RedOpId],
    ) -> Result<Measurement, BackendError> {
        let lp = Loop::new(case, timing);
        if comms.opts.late_entry.is_some() {
            self.ensure_stamps(comms)?;
        }
        comms.at(0)?;
        for k in 0..timing.warmup_iters as u64 {
            comms.calling(k)?;
            run.launch(comms, case, 0, lp.max, ops)?;
            comms.at(k + 1)?;
        }
        comms.wait_all()?;
        if let collbench_runner::Graph::Launches(replays) = timing.graph {
            return self.time_graph(comms, run, case, ops, lp, replays.get());
        }
        let setting = std::env::var("COLLBENCH_ITER_EVENTS").ok();
        let inline_events = inline_events(setting.as_deref(), case.size_bytes());
        let (total, cpu, mut iter_times_us) =
            self.timed_loop(comms, run, case, lp, ops, timing.blocking, inline_events)?;
        // `-n auto`'s repeats skip the per-iteration pass (unless -I 1).
        if !inline_events && timing.iteration_pass {
            iter_times_us = self
                .timed_loop(comms, run, case, lp, ops, timing.blocking, true)?
                .2;
        }
        let n = comms.gpus.len();
        let mut m = per_operation(total, cpu, lp.iters * lp.agg, n, iter_times_us);
        if timing.arrival {
            m.arrival = Some(self.arrival_pass(comms, run, case, lp, ops, timing.blocking)?);
        }
        Ok(m)
    }

    /// `-G`: captures the timed iterations in one CUDA graph per GPU and
    /// replays it `replays` times; time = wall clock of the replays /
    /// (iterations x aggregation x replays), as nccl-tests.
    fn time_graph(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        ops: &[RedOpId],
        lp: Loop,
        replays: u32,
    ) -> Result<Measurement, BackendError> {
        if !self.graphs_warmed {
            // The first graph of a process pays one-time costs when it is
            // captured and first replayed (measured: 0.2-0.9 us per
            // iteration more at the first size, in the C reference too);
            // a throwaway one-iteration graph takes them before any timing.
            let graphs = capture(comms, run, case, Loop { iters: 1, ..lp }, ops)?;
            replay(comms, &graphs, 1)?;
            comms.wait_all()?;
            self.graphs_warmed = true;
        }
        let graphs = capture(comms, run, case, lp, ops)?;
        // Capture and instantiation take each process its own time; one
        // plain collective realigns the ranks before the timer starts
        // (nccl-tests puts a barrier there), so a late peer's setup is not
        // charged to the replays (measured: 3-5% at small sizes with two
        // processes).
        run.launch(comms, case, 0, lp.max, ops)?;
        comms.wait_all()?;
        debug("graph: launch");
        let start = Instant::now();
        replay(comms, &graphs, replays)?;
        let cpu = start.elapsed().as_secs_f64();
        comms.wait_all()?;
        let total = start.elapsed().as_secs_f64();
        let ops_done = lp.iters * lp.agg * replays as u64;
        let n = comms.gpus.len();
        Ok(per_operation(total, cpu, ops_done, n, Vec::new()))
    }

    /// The timed loop: returns (wall seconds to completion, seconds to
    /// issue, per-iteration microseconds when `events`).
    #[allow(clippy::too_many_arguments)]
    fn timed_loop(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        lp: Loop,
        ops: &[RedOpId],
        blocking: Blocking,
        events: bool,
    ) -> Result<(f64, f64, Vec<f64>), BackendError> {
        // Events belong to GPU 0's context, like the stream they time.
        comms.gpus[0].dev.bind()?;
        if blocking == Blocking::BarrierEachIteration {
            return self.timed_loop_with_barriers(comms, run, case, lp, ops, events);
        }
        let evs: Vec<Event> = if events {
            (0..=lp.iters)
                .map(|_| Event::new())
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let multi = comms.gpus.len() > 1;
        let start = Instant::now();
        if events {
            evs[0].record(&comms.gpus[0].stream)?;
        }
        for it in 0..lp.iters {
            self.hold_late(comms)?;
            comms.calling(lp.first_iteration + it)?;
            launch_iteration(comms, run, case, it, lp, ops)?;
            comms.at(lp.first_iteration + it + 1)?;
            if events {
                if multi {
                    comms.gpus[0].dev.bind()?;
                }
                evs[it as usize + 1].record(&comms.gpus[0].stream)?;
            }
            // -z 1 and 2 wait here. nccl-tests' -z 1 also meets at an MPI
            // barrier inside the time; a barrier of our own costs a network
            // round trip there (a one-byte all_reduce: 1.8x nccl-tests' time
            // at <= 64 KiB on two emulated hosts), so -z 1 waits only.
            if blocking.waits() {
                comms.wait_all()?;
            }
        }
        let cpu = start.elapsed().as_secs_f64();
        comms.wait_all()?;
        let total = start.elapsed().as_secs_f64();
        let iter_us = evs
            .windows(2)
            .map(|w| w[0].elapsed_ms(&w[1]))
            .map(|ms| ms.map(|ms| ms as f64 * 1000.0 / lp.agg as f64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((total, cpu, iter_us))
    }

    /// `-z 3`, as nccl-tests 2.19.6: each iteration is launched, waited
    /// for and timed on its own, then every rank meets at a barrier that
    /// the time leaves out, so each iteration starts with the ranks
    /// aligned. Per-iteration events come in pairs around the iteration
    /// (not shared boundaries), so the barrier is outside them too.
    fn timed_loop_with_barriers(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        lp: Loop,
        ops: &[RedOpId],
        events: bool,
    ) -> Result<(f64, f64, Vec<f64>), BackendError> {
        let pairs: Vec<(Event, Event)> = if events {
            (0..lp.iters)
                .map(|_| Ok((Event::new()?, Event::new()?)))
                .collect::<Result<_, BackendError>>()?
        } else {
            Vec::new()
        };
        let multi = comms.gpus.len() > 1;
        let (mut timed, mut issued) = (0.0, 0.0);
        for it in 0..lp.iters {
            let t0 = Instant::now();
            self.hold_late(comms)?;
            if let Some((begin, _)) = pairs.get(it as usize) {
                begin.record(&comms.gpus[0].stream)?;
            }
            comms.calling(lp.first_iteration + it)?;
            launch_iteration(comms, run, case, it, lp, ops)?;
            comms.at(lp.first_iteration + it + 1)?;
            issued += t0.elapsed().as_secs_f64();
            comms.wait_all()?;
            if let Some((_, end)) = pairs.get(it as usize) {
                if multi {
                    comms.gpus[0].dev.bind()?;
                }
                end.record(&comms.gpus[0].stream)?;
            }
            timed += t0.elapsed().as_secs_f64();
            barrier(comms, run.buffers)?;
        }
        comms.wait_all()?;
        let iter_us = pairs
            .iter()
            .map(|(b, e)| b.elapsed_ms(e))
            .map(|ms| ms.map(|ms| ms as f64 * 1000.0 / lp.agg as f64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((timed, issued, iter_us))
    }
}

/// One timed iteration: `agg` collectives (`-m`), in one group when
/// there are several.
pub(super) fn launch_iteration(
    comms: &Comms,
    run: Launcher,
    case: &CaseSpec,
    it: u64,
    lp: Loop,
    ops: &[RedOpId],
) -> Result<(), BackendError> {
    let group = Group::start_if(lp.agg > 1, &comms.nccl)?;
    for a in 0..lp.agg {
        run.launch(comms, case, lp.first + it * lp.agg + a, lp.max, ops)?;
    }
    group::end_if(group)?;
    Ok(())
}

/// Captures the loop's iterations (each its collectives in one group) on
/// every GPU's stream; returns the instantiated, uploaded graphs.
fn capture(
    comms: &mut Comms,
    run: Launcher,
    case: &CaseSpec,
    lp: Loop,
    ops: &[RedOpId],
) -> Result<Vec<Graph>, BackendError> {
    debug("graph: capture");
    for g in &comms.gpus {
        g.dev.bind()?;
        g.stream.begin_capture()?;
    }
    for it in 0..lp.iters {
        launch_iteration(comms, run, case, it, lp, ops)?;
    }
    // Every capture ends before any graph is instantiated: a group over
    // several GPUs of one thread ties their captures together, and
    // instantiating the first while the second was still capturing
    // never returned (NCCL 2.28, H200).
    let mut graphs = Vec::new();
    for (i, g) in comms.gpus.iter().enumerate() {
        debug(&format!("graph: end capture on GPU {i}"));
        g.dev.bind()?;
        graphs.push(g.stream.end_capture()?);
    }
    debug("graph: instantiate");
    for (g, graph) in comms.gpus.iter().zip(&mut graphs) {
        g.dev.bind()?;
        graph.instantiate()?;
        graph.upload(&g.stream)?;
    }
    Ok(graphs)
}

/// Launches every GPU's graph `times` times.
fn replay(comms: &Comms, graphs: &[Graph], times: u32) -> Result<(), BackendError> {
    for _ in 0..times {
        for (g, graph) in comms.gpus.iter().zip(graphs) {
            if comms.gpus.len() > 1 {
                g.dev.bind()?;
            }
            graph.launch(&g.stream)?;
        }
    }
    Ok(())
}

/// A barrier over every rank of the communicators, for `-z 3`: a
/// one-byte all_reduce on each local GPU, waited for. No rank gets
/// past it before every rank has reached it, as nccl-tests'
/// MPI_Barrier, with no second channel between the processes.
pub(super) fn barrier(comms: &mut Comms, buffers: &Buffers) -> Result<(), BackendError> {
    let sum = crate::ffi::redop_id(collbench_core::ReduceOp::Sum);
    let group = Group::start_if(comms.gpus.len() > 1, &comms.nccl)?;
    for (g, b) in comms.gpus.iter().zip(&buffers.gpus) {
        let at = b.recv.as_ref().expect("buffers allocated").at(0);
        let int8 = collbench_core::DataType::Int8;
        comms
            .nccl
            .all_reduce(at, at, 1, int8, sum, &g.comm, &g.stream)?;
    }
    group::end_if(group)?;
    comms.wait_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_go_inline_from_one_gib_unless_told() {
        assert!(!inline_events(None, (1 << 30) - 1));
        assert!(inline_events(None, 1 << 30));
        assert!(inline_events(Some("inline"), 8));
        assert!(!inline_events(Some("separate"), 1 << 32));
        assert!(!inline_events(Some("other"), 8));
    }

    #[test]
    fn times_are_per_operation_for_every_local_rank() {
        let m = per_operation(2.0, 0.5, 100, 2, vec![1.0]);
        assert_eq!(m.rank_time_s, [0.02, 0.02]);
        assert_eq!(m.rank_cputime_s, [0.005, 0.005]);
        assert_eq!(m.iter_times_us, [1.0]);
    }
}
