//! `-n auto`: one placement timed in repeats until the interval of its
//! mean time is tight enough ([`collbench_core::auto_iters::AutoSeries`]).
//!
//! Every process must run the same repeats (a collective left unmatched on
//! one rank hangs the others), so after each repeat the processes share
//! their slowest local time and wall cost through the job's [`Bootstrap`]
//! (an [`Bootstrap::all_max`] of 16 bytes) and each feeds the same maxima
//! to its own series: same numbers, same rule, same decisions. The reported time is, as with `-n N`, the total
//! time of the counted repeats over their total iterations (the
//! arithmetic mean nccl-tests prints), so rows compare with `-n 20`.

use crate::backend::{Backend, CaseSpec, Measurement};
use crate::error::RunError;
use crate::timing::Timing;
use collbench_core::auto_iters::{AutoIters, AutoSeries, RepeatUse};
use collbench_core::{AutoPrecision, Bootstrap};
use std::time::Instant;

/// A placement timed under `-n auto`.
pub(crate) struct AutoMeasured {
    /// The counted repeats combined.
    pub measurement: Measurement,
    /// Timed iterations it covers (not counting `-m` aggregation).
    pub iters: u64,
    /// What the series reached (the same on every process).
    pub precision: Option<AutoPrecision>,
}

/// Times `case` under `rule`.
pub(crate) fn measure(
    backend: &mut dyn Backend,
    control: &dyn Bootstrap,
    case: &CaseSpec,
    timing: &Timing,
    rule: AutoIters,
) -> Result<AutoMeasured, RunError> {
    let agg = f64::from(timing.agg_iters.max(1));
    let mut series = AutoSeries::new(rule);
    let mut sum = Sum::default();
    let mut warmup_iters = timing.warmup_iters;
    let mut first_op = 0;
    while let Some(iters) = series.next_iters() {
        let repeat = Timing {
            warmup_iters,
            iters,
            first_op,
            ..*timing
        };
        warmup_iters = 0;
        first_op += u64::from(iters) * u64::from(timing.agg_iters.max(1));
        let start = Instant::now();
        let m = backend.time(case, &repeat)?;
        let cost_us = start.elapsed().as_secs_f64() * 1e6;
        // Seconds per operation -> microseconds per iteration.
        let local_us = m.rank_time_s.iter().copied().fold(0.0, f64::max) * 1e6 * agg;
        let (time_us, cost_us) = slowest(control, local_us, cost_us)?;
        if series.push(time_us, cost_us) == RepeatUse::Sample {
            sum.add(m, iters);
        }
    }
    let (measurement, iters) = sum.finish();
    Ok(AutoMeasured {
        measurement,
        iters,
        precision: series.precision(),
    })
}

/// The largest time and cost over the job's processes (once per repeat:
/// an all_max, whose traffic grows with the world, not its square).
fn slowest(control: &dyn Bootstrap, time_us: f64, cost_us: f64) -> Result<(f64, f64), RunError> {
    match control.all_max(&[time_us, cost_us])?[..] {
        [time_us, cost_us] => Ok((time_us, cost_us)),
        _ => unreachable!("all_max answers as many values as it is given"),
    }
}

/// Counted repeats, weighted by their iterations.
#[derive(Default)]
struct Sum {
    iters: u64,
    rank_time_s: Vec<f64>,
    rank_cputime_s: Vec<f64>,
    m: Measurement,
}

impl Sum {
    fn add(&mut self, m: Measurement, iters: u32) {
        let k = f64::from(iters);
        let weigh = |sum: &mut Vec<f64>, per: &[f64]| {
            sum.resize(sum.len().max(per.len()), 0.0);
            for (s, t) in sum.iter_mut().zip(per) {
                *s += t * k;
            }
        };
        weigh(&mut self.rank_time_s, &m.rank_time_s);
        weigh(&mut self.rank_cputime_s, &m.rank_cputime_s);
        self.iters += u64::from(iters);
        self.m.iter_times_us.extend(m.iter_times_us);
        if let Some(a) = m.arrival {
            self.m
                .arrival
                .get_or_insert_with(Default::default)
                .append(a);
        }
        if let Some(s) = &m.iter_stats {
            self.m
                .iter_stats
                .get_or_insert_with(Default::default)
                .merge(s);
        }
    }

    fn finish(mut self) -> (Measurement, u64) {
        let n = self.iters.max(1) as f64;
        self.m.rank_time_s = self.rank_time_s.iter().map(|t| t / n).collect();
        self.m.rank_cputime_s = self.rank_cputime_s.iter().map(|t| t / n).collect();
        (self.m, self.iters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuBackend;
    use collbench_core::adaptive::StopReason;
    use collbench_core::bootstrap::TwoProcesses;
    use collbench_core::{Collective, DataType, ReduceOp, SingleProcess};

    /// Rank 0 of two processes whose peer reports `time_us` and `cost_us`
    /// for every repeat.
    fn slow_peer(time_us: f64, cost_us: f64) -> TwoProcesses {
        let mut peer = time_us.to_le_bytes().to_vec();
        peer.extend_from_slice(&cost_us.to_le_bytes());
        TwoProcesses {
            peer: Some(peer),
            failure: None,
        }
    }

    fn case() -> (CaseSpec, Timing) {
        let case = CaseSpec {
            collective: Collective::AllReduce,
            dtype: DataType::Float,
            redop: ReduceOp::Sum,
            root: 0,
            counts: Collective::AllReduce.counts(64, 4, 2),
            in_place: false,
            world_size: 2,
        };
        let timing = Timing {
            max_bytes: 64,
            iteration_pass: false,
            ..Timing::default()
        };
        (case, timing)
    }

    #[test]
    fn a_short_case_alone_sums_its_repeats() {
        let (case, timing) = case();
        let mut b = CpuBackend::new(2, "h");
        let AutoMeasured {
            measurement: m,
            iters,
            ..
        } = measure(&mut b, &SingleProcess, &case, &timing, AutoIters::default()).unwrap();
        // One repeat or more (the 2 ms cap), the probe left out.
        assert!(iters >= 1, "{iters}");
        assert_eq!(m.rank_time_s.len(), 2);
        assert!(m.rank_time_s.iter().all(|t| *t > 0.0 && *t < 1e-3));
        assert_eq!(m.iter_stats.unwrap().count(), iters);
    }

    /// A backend that takes 10 us per operation and writes down how it
    /// was asked.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<Timing>,
    }

    impl Backend for Recorder {
        fn info(&self) -> crate::BackendInfo {
            crate::BackendInfo::default()
        }
        fn local_ranks(&self) -> usize {
            1
        }
        fn world_size(&self) -> usize {
            1
        }
        fn supports(&self, _: &CaseSpec) -> Result<(), crate::BackendError> {
            Ok(())
        }
        fn time(&mut self, _: &CaseSpec, t: &Timing) -> Result<Measurement, crate::BackendError> {
            self.calls.push(*t);
            Ok(Measurement {
                rank_time_s: vec![10e-6],
                rank_cputime_s: vec![1e-6],
                ..Measurement::default()
            })
        }
        fn check(&mut self, _: &CaseSpec, _: u64, _: bool) -> Result<u64, crate::BackendError> {
            Ok(0)
        }
    }

    #[test]
    fn repeats_warm_up_once_and_rotate_buffers_as_one_loop_would() {
        let (case, mut timing) = case();
        timing.agg_iters = 2;
        let mut b = Recorder::default();
        let AutoMeasured {
            measurement: m,
            iters,
            precision,
        } = measure(&mut b, &SingleProcess, &case, &timing, AutoIters::default()).unwrap();
        // 20 us per iteration (2 operations): 100-iteration repeats (2 ms) after
        // the probe, and a perfectly steady time stops at 3 samples.
        let asked: Vec<(u32, u32, u64)> = b
            .calls
            .iter()
            .map(|t| (t.warmup_iters, t.iters, t.first_op))
            .collect();
        assert_eq!(
            asked,
            [(1, 1, 0), (0, 100, 2), (0, 100, 202), (0, 100, 402)]
        );
        assert_eq!(iters, 300, "the probe is left out");
        let precision = precision.unwrap();
        assert_eq!(
            (precision.repeats, precision.stopped),
            (3, StopReason::Tight)
        );
        assert!(precision.rel_half_width.unwrap() < 1e-9, "{precision:?}");
        assert!((m.rank_time_s[0] - 10e-6).abs() < 1e-12);
        assert!((m.rank_cputime_s[0] - 1e-6).abs() < 1e-12);
    }

    #[test]
    fn every_process_follows_the_slowest_process_s_numbers() {
        // The peer's repeat took 0.9 s for one iteration: one iteration
        // per repeat, and the 1 s cap ends the placement after two.
        let (case, timing) = case();
        let mut b = CpuBackend::new(2, "h");
        let peer = slow_peer(9e5, 9e5);
        let a = measure(&mut b, &peer, &case, &timing, AutoIters::default()).unwrap();
        assert_eq!(a.iters, 2);
        // Cut short by the cap, and said so.
        let precision = a.precision.unwrap();
        assert_eq!(
            (precision.repeats, precision.stopped),
            (2, StopReason::Budget)
        );
    }
}
