//! Timing: warmup, the timed loop (bare, then a second pass with
//! per-iteration events, or events inline from 1 GiB), CUDA graphs (`-G`),
//! and waiting for the streams while watching NCCL's async errors, the
//! job's stop (the watchdog's, see `collbench_runner::watch`) and the `-T`
//! timeout. The loops publish where they are after each call: one relaxed
//! store per GPU, outside the per-iteration events.

use super::{debug, NcclBackend};
use crate::cuda::{Event, Graph};
use crate::ffi::RedOpId;
use crate::group::{self, Group};
use collbench_runner::{BackendError, Blocking, CaseSpec, Measurement, Timing};
use std::time::{Duration, Instant};

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

/// With a watchdog, `-T` here is only the fallback for a watchdog that
/// cannot decide (its own deadline is `-T` too, counted from the last
/// rank's last move, so it names the ranks behind first).
const WATCHED_FALLBACK: Duration = Duration::from_secs(15);

/// What the timed loop learns about the communicators as it goes: set in
/// this file alone; the backend's guard and drop read whether they were
/// aborted.
#[derive(Debug, Default)]
pub(crate) struct LoopState {
    /// Set after a timeout or async error: communicators were aborted.
    aborted: bool,
    /// A throwaway graph has been captured and replayed (`-G`).
    graphs_warmed: bool,
}

impl LoopState {
    /// Whether the communicators were aborted: nothing more runs on them.
    pub(crate) fn aborted(&self) -> bool {
        self.aborted
    }
}

impl NcclBackend {
    /// Seconds per operation of `iters` back-to-back iterations of `case`
    /// after `warmup` untimed ones: the timed loop alone, without the
    /// per-iteration pass (`collbench tune`'s repeats, which need only
    /// the mean). Buffers hold `span` bytes (at least `case`'s size), and
    /// operations rotate through them as in a sweep up to `span`.
    pub fn time_bare(
        &mut self,
        case: &CaseSpec,
        warmup: u32,
        iters: u32,
        span: u64,
    ) -> Result<f64, BackendError> {
        use collbench_runner::Backend;
        self.ensure_usable()?;
        self.supports(case)?;
        let max = span.max(case.size_bytes());
        self.ensure_buffers(max)?;
        let ops = self.make_ops(case)?;
        let result = (|| {
            for _ in 0..warmup {
                self.launch(case, 0, max, &ops)?;
            }
            self.wait_all()?;
            let iters = iters.max(1) as u64;
            let lp = Loop {
                iters,
                agg: 1,
                max,
                first: 0,
                first_iteration: warmup as u64,
            };
            let (total, _, _) = self.timed_loop(case, lp, &ops, Blocking::Off, false)?;
            Ok(total / iters as f64)
        })();
        self.free_ops(case, &ops);
        result
    }

    pub(crate) fn time_inner(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
        ops: &[RedOpId],
    ) -> Result<Measurement, BackendError> {
        let lp = Loop::new(case, timing);
        if self.opts.late_entry.is_some() {
            self.ensure_stamps()?;
        }
        self.at(0)?;
        for k in 0..timing.warmup_iters as u64 {
            self.calling(k)?;
            self.launch(case, 0, lp.max, ops)?;
            self.at(k + 1)?;
        }
        self.wait_all()?;
        if let collbench_runner::Graph::Launches(replays) = timing.graph {
            return self.time_graph(case, ops, lp, replays.get());
        }
        let setting = std::env::var("COLLBENCH_ITER_EVENTS").ok();
        let inline_events = inline_events(setting.as_deref(), case.size_bytes());
        let (total, cpu, mut iter_times_us) =
            self.timed_loop(case, lp, ops, timing.blocking, inline_events)?;
        // `-n auto`'s repeats skip the per-iteration pass (unless -I 1).
        if !inline_events && timing.iteration_pass {
            iter_times_us = self.timed_loop(case, lp, ops, timing.blocking, true)?.2;
        }
        let n = self.gpus.len();
        let mut m = per_operation(total, cpu, lp.iters * lp.agg, n, iter_times_us);
        if timing.arrival {
            m.arrival = Some(self.arrival_pass(case, lp, ops, timing.blocking)?);
        }
        Ok(m)
    }

    /// One timed iteration: `agg` collectives (`-m`), in one group when
    /// there are several.
    pub(super) fn launch_iteration(
        &self,
        case: &CaseSpec,
        it: u64,
        lp: Loop,
        ops: &[RedOpId],
    ) -> Result<(), BackendError> {
        let group = Group::start_if(lp.agg > 1, &self.nccl)?;
        for a in 0..lp.agg {
            self.launch(case, lp.first + it * lp.agg + a, lp.max, ops)?;
        }
        group::end_if(group)?;
        Ok(())
    }

    /// `-G`: captures the timed iterations in one CUDA graph per GPU and
    /// replays it `replays` times; time = wall clock of the replays /
    /// (iterations x aggregation x replays), as nccl-tests.
    fn time_graph(
        &mut self,
        case: &CaseSpec,
        ops: &[RedOpId],
        lp: Loop,
        replays: u32,
    ) -> Result<Measurement, BackendError> {
        if !self.loop_state.graphs_warmed {
            // The first graph of a process pays one-time costs when it is
            // captured and first replayed (measured: 0.2-0.9 us per
            // iteration more at the first size, in the C reference too);
            // a throwaway one-iteration graph takes them before any timing.
            let graphs = self.capture(case, Loop { iters: 1, ..lp }, ops)?;
            self.replay(&graphs, 1)?;
            self.wait_all()?;
            self.loop_state.graphs_warmed = true;
        }
        let graphs = self.capture(case, lp, ops)?;
        // Capture and instantiation take each process its own time; one
        // plain collective realigns the ranks before the timer starts
        // (nccl-tests puts a barrier there), so a late peer's setup is not
        // charged to the replays (measured: 3-5% at small sizes with two
        // processes).
        self.launch(case, 0, lp.max, ops)?;
        self.wait_all()?;
        debug("graph: launch");
        let start = Instant::now();
        self.replay(&graphs, replays)?;
        let cpu = start.elapsed().as_secs_f64();
        self.wait_all()?;
        let total = start.elapsed().as_secs_f64();
        let ops_done = lp.iters * lp.agg * replays as u64;
        let n = self.gpus.len();
        Ok(per_operation(total, cpu, ops_done, n, Vec::new()))
    }

    /// Captures the loop's iterations (each its collectives in one group) on
    /// every GPU's stream; returns the instantiated, uploaded graphs.
    fn capture(
        &mut self,
        case: &CaseSpec,
        lp: Loop,
        ops: &[RedOpId],
    ) -> Result<Vec<Graph>, BackendError> {
        debug("graph: capture");
        for g in &self.gpus {
            g.dev.bind()?;
            g.stream.begin_capture()?;
        }
        for it in 0..lp.iters {
            self.launch_iteration(case, it, lp, ops)?;
        }
        // Every capture ends before any graph is instantiated: a group over
        // several GPUs of one thread ties their captures together, and
        // instantiating the first while the second was still capturing
        // never returned (NCCL 2.28, H200).
        let mut graphs = Vec::new();
        for (i, g) in self.gpus.iter().enumerate() {
            debug(&format!("graph: end capture on GPU {i}"));
            g.dev.bind()?;
            graphs.push(g.stream.end_capture()?);
        }
        debug("graph: instantiate");
        for (g, graph) in self.gpus.iter().zip(&mut graphs) {
            g.dev.bind()?;
            graph.instantiate()?;
            graph.upload(&g.stream)?;
        }
        Ok(graphs)
    }

    /// Launches every GPU's graph `times` times.
    fn replay(&self, graphs: &[Graph], times: u32) -> Result<(), BackendError> {
        for _ in 0..times {
            for (g, graph) in self.gpus.iter().zip(graphs) {
                if self.gpus.len() > 1 {
                    g.dev.bind()?;
                }
                graph.launch(&g.stream)?;
            }
        }
        Ok(())
    }

    /// The timed loop: returns (wall seconds to completion, seconds to
    /// issue, per-iteration microseconds when `events`).
    fn timed_loop(
        &mut self,
        case: &CaseSpec,
        lp: Loop,
        ops: &[RedOpId],
        blocking: Blocking,
        events: bool,
    ) -> Result<(f64, f64, Vec<f64>), BackendError> {
        // Events belong to GPU 0's context, like the stream they time.
        self.gpus[0].dev.bind()?;
        if blocking == Blocking::BarrierEachIteration {
            return self.timed_loop_with_barriers(case, lp, ops, events);
        }
        let evs: Vec<Event> = if events {
            (0..=lp.iters)
                .map(|_| Event::new())
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let multi = self.gpus.len() > 1;
        let start = Instant::now();
        if events {
            evs[0].record(&self.gpus[0].stream)?;
        }
        for it in 0..lp.iters {
            self.hold_late()?;
            self.calling(lp.first_iteration + it)?;
            self.launch_iteration(case, it, lp, ops)?;
            self.at(lp.first_iteration + it + 1)?;
            if events {
                if multi {
                    self.gpus[0].dev.bind()?;
                }
                evs[it as usize + 1].record(&self.gpus[0].stream)?;
            }
            // -z 1 and 2 wait here. nccl-tests' -z 1 also meets at an MPI
            // barrier inside the time; a barrier of our own costs a network
            // round trip there (a one-byte all_reduce: 1.8x nccl-tests' time
            // at <= 64 KiB on two emulated hosts), so -z 1 waits only.
            if blocking.waits() {
                self.wait_all()?;
            }
        }
        let cpu = start.elapsed().as_secs_f64();
        self.wait_all()?;
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
        let multi = self.gpus.len() > 1;
        let (mut timed, mut issued) = (0.0, 0.0);
        for it in 0..lp.iters {
            let t0 = Instant::now();
            self.hold_late()?;
            if let Some((begin, _)) = pairs.get(it as usize) {
                begin.record(&self.gpus[0].stream)?;
            }
            self.calling(lp.first_iteration + it)?;
            self.launch_iteration(case, it, lp, ops)?;
            self.at(lp.first_iteration + it + 1)?;
            issued += t0.elapsed().as_secs_f64();
            self.wait_all()?;
            if let Some((_, end)) = pairs.get(it as usize) {
                if multi {
                    self.gpus[0].dev.bind()?;
                }
                end.record(&self.gpus[0].stream)?;
            }
            timed += t0.elapsed().as_secs_f64();
            self.barrier()?;
        }
        self.wait_all()?;
        let iter_us = pairs
            .iter()
            .map(|(b, e)| b.elapsed_ms(e))
            .map(|ms| ms.map(|ms| ms as f64 * 1000.0 / lp.agg as f64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((timed, issued, iter_us))
    }

    /// A barrier over every rank of the communicators, for `-z 3`: a
    /// one-byte all_reduce on each local GPU, waited for. No rank gets
    /// past it before every rank has reached it, as nccl-tests'
    /// MPI_Barrier, with no second channel between the processes.
    pub(super) fn barrier(&mut self) -> Result<(), BackendError> {
        let sum = crate::ffi::redop_id(collbench_core::ReduceOp::Sum);
        let group = Group::start_if(self.gpus.len() > 1, &self.nccl)?;
        for g in &self.gpus {
            let at = g.recv.as_ref().expect("buffers allocated").at(0);
            let int8 = collbench_core::DataType::Int8;
            self.nccl
                .all_reduce(at, at, 1, int8, sum, &g.comm, &g.stream)?;
        }
        group::end_if(group)?;
        self.wait_all()
    }

    /// Waits for every stream, polling NCCL's async errors and the `-T`
    /// timeout so a broken peer aborts the communicators instead of hanging.
    pub(crate) fn wait_all(&mut self) -> Result<(), BackendError> {
        let start = Instant::now();
        let fallback = if self.settings.watch.is_some() {
            WATCHED_FALLBACK
        } else {
            Duration::ZERO
        };
        let timeout =
            (self.opts.timeout_s > 0).then(|| Duration::from_secs(self.opts.timeout_s) + fallback);
        if let Some(w) = &self.settings.watch {
            w.completing_all();
        }
        let mut polls = 0u64;
        for i in 0..self.gpus.len() {
            if self.gpus.len() > 1 {
                self.gpus[i].dev.bind()?;
            }
            loop {
                if self.gpus[i].stream.query()? {
                    break;
                }
                polls += 1;
                if polls.is_multiple_of(1024) {
                    self.check_async()?;
                    if self.settings.watch.as_ref().is_some_and(|w| w.is_stopped()) {
                        self.abort();
                        return Err(self.stopped());
                    }
                    if let Some(t) = timeout {
                        if start.elapsed() > t {
                            self.abort();
                            return Err(BackendError::Timeout(format!(
                                "a collective did not finish within -T {} s: communicators aborted (a peer may be stuck or dead)",
                                (t - fallback).as_secs()
                            )));
                        }
                    }
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Publishes that every GPU has returned from the calls before
    /// `iteration` (and lets a fault hook act); once the job stops there,
    /// aborts the communicators (their streams hold calls that will never
    /// complete) and fails.
    pub(super) fn at(&mut self, iteration: u64) -> Result<(), BackendError> {
        let stopped = match &self.settings.watch {
            Some(w) => w.at_all(iteration as u32).is_err(),
            None => false,
        };
        self.abort_if(stopped)
    }

    /// Publishes that every GPU enters the call of `iteration` (a stall
    /// hook acts here); as [`NcclBackend::at`] once the job stops.
    pub(super) fn calling(&mut self, iteration: u64) -> Result<(), BackendError> {
        let stopped = match &self.settings.watch {
            Some(w) => w.calling_all(iteration as u32).is_err(),
            None => false,
        };
        self.abort_if(stopped)
    }

    fn abort_if(&mut self, stopped: bool) -> Result<(), BackendError> {
        if stopped {
            self.abort();
            return Err(self.stopped());
        }
        Ok(())
    }

    /// The error for a wait the job's stop ended (the runner reports the
    /// stop's reason).
    fn stopped(&self) -> BackendError {
        let why = self.settings.watch.as_ref().and_then(|w| w.reason());
        let why = why.map_or("the job stopped", |s| s.message());
        BackendError::Timeout(format!("{why}: communicators aborted"))
    }

    /// NCCL's asynchronous errors (a failed peer or network): abort the
    /// communicators and say so.
    fn check_async(&mut self) -> Result<(), BackendError> {
        let failed = self
            .gpus
            .iter()
            .find_map(|gpu| self.nccl.async_error(&gpu.comm).err());
        if let Some(e) = failed {
            self.abort();
            return Err(BackendError::Library(format!("{e}: communicators aborted")));
        }
        Ok(())
    }

    /// ncclCommAbort on every communicator, once.
    fn abort(&mut self) {
        if self.loop_state.aborted {
            return;
        }
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            let _ = self.nccl.comm_abort(&mut gpu.comm);
        }
        self.loop_state.aborted = true;
    }
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
