//! `run -n auto`: the rule ([`AutoIters`]) and one placement's series of
//! repeats ([`AutoSeries`]) on top of [`crate::adaptive::AdaptiveStop`].
//! The runner (`collbench-runner`) drives it; every process of a job feeds
//! it the same numbers.

use crate::adaptive::{AdaptiveStop, Decision, Interval, StopReason, StopRule};
use crate::record::AutoPrecision;
use serde::{Deserialize, Serialize};

/// The rule of `run -n auto`: per placement (a row's out-of-place or
/// in-place half), repeats of about `repeat_us` each until the 95%
/// interval of the mean time per iteration is within `rel_half_width`,
/// between `min_repeats` and `max_repeats` repeats, and within a cap on
/// the placement's wall time: `cap_iters` iterations at the probe's time,
/// at least `min_placement_us`, at most `max_placement_us`.
///
/// Why these defaults: at large sizes an iteration lasts milliseconds and
/// varies by well under 1%, so three one-iteration repeats pin the mean
/// where `-n 20` spends twenty. A repeat is one call of the backend's
/// timed loop, whose time carries one launch and completion latency
/// (about 10 us on NCCL) that `-n 20` spreads over twenty iterations; a
/// repeat of at least 2 ms keeps that bias below about 0.5%. At small
/// sizes an iteration lasts microseconds and a row's cost is fixed
/// overhead (warm-up, verification, gathering results); there the cap
/// (2 ms) allows one repeat of about 2 ms, a mean over more iterations
/// than `-n 20` takes, at a cost of about 2 ms a placement. The cap keeps
/// a noisy placement from costing more than `-n 20` would (its timed
/// work, or 2 ms where that is less): where the interval never gets
/// tight, `auto` gives `-n 20`'s precision at `-n 20`'s price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AutoIters {
    /// Target wall time of one repeat (us): iterations per repeat are
    /// chosen from a one-iteration probe so that a repeat lasts about this.
    pub repeat_us: f64,
    /// Stop once the interval's relative half-width is at most this.
    pub rel_half_width: f64,
    /// Never fewer repeats (counting a probe that lasted a whole repeat).
    pub min_repeats: u32,
    /// Never more repeats.
    pub max_repeats: u32,
    /// Cap on a placement's wall time (the probe's timed iteration, then
    /// each repeat's whole call), in
    /// iterations at the probe's time per iteration.
    pub cap_iters: f64,
    /// The cap is never below this (us).
    pub min_placement_us: f64,
    /// The cap is never above this (us).
    pub max_placement_us: f64,
}

impl Default for AutoIters {
    fn default() -> AutoIters {
        AutoIters {
            repeat_us: 2000.0,
            rel_half_width: 0.01,
            min_repeats: 3,
            max_repeats: 20,
            cap_iters: 20.0,
            min_placement_us: 2e3,
            max_placement_us: 1e6,
        }
    }
}

/// Most iterations one repeat may take (a sub-nanosecond probe must not
/// ask for billions).
pub const MAX_ITERS_PER_REPEAT: u32 = 100_000;

impl AutoIters {
    /// The stopping rule for the repeats of one placement.
    pub fn stop_rule(&self) -> StopRule {
        StopRule {
            confidence: 0.95,
            rel_half_width: self.rel_half_width,
            min_samples: self.min_repeats,
            max_samples: self.max_repeats,
            max_cost_us: self.max_placement_us,
        }
    }

    /// The cap on a placement's wall time (us) after a probe that took
    /// `probe_us` per iteration.
    pub fn placement_cap_us(&self, probe_us: f64) -> f64 {
        (self.cap_iters * probe_us)
            .max(self.min_placement_us)
            .min(self.max_placement_us)
    }

    /// Iterations per repeat after a probe that took `probe_us` per
    /// iteration: enough to last `repeat_us`, at least 1.
    pub fn iters_per_repeat(&self, probe_us: f64) -> u32 {
        // Zero, negative or NaN: the probe said nothing usable.
        if probe_us.is_nan() || probe_us <= 0.0 {
            return MAX_ITERS_PER_REPEAT;
        }
        let k = (self.repeat_us / probe_us).ceil();
        k.clamp(1.0, f64::from(MAX_ITERS_PER_REPEAT)) as u32
    }
}

/// One placement's `-n auto` series: says how many iterations the next
/// repeat takes, and when to stop. Every process of a job must feed it the
/// same numbers (the slowest process's time and cost of each repeat, shared
/// through the job's control plane), so that all ranks run the same
/// repeats.
///
/// The first repeat is a one-iteration probe (after the warm-up). When it
/// lasts at least a whole repeat, it is the first sample; otherwise it only
/// sets the iterations per repeat and is left out of the result, since a
/// single short iteration carries the launch and completion latency that
/// longer repeats spread out.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoSeries {
    rule: AutoIters,
    stop: AdaptiveStop,
    iters: Option<u32>,
    done: bool,
}

/// What a repeat fed to [`AutoSeries::push`] was used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatUse {
    /// A sample: it counts in the reported mean.
    Sample,
    /// The probe, used only to choose iterations per repeat.
    Probe,
}

impl AutoSeries {
    /// A series under `rule`, before its probe.
    pub fn new(rule: AutoIters) -> AutoSeries {
        AutoSeries {
            rule,
            stop: AdaptiveStop::new(rule.stop_rule()),
            iters: None,
            done: false,
        }
    }

    /// Iterations of the next repeat; `None` when the series is finished.
    pub fn next_iters(&self) -> Option<u32> {
        if self.done {
            None
        } else {
            Some(self.iters.unwrap_or(1))
        }
    }

    /// Adds the repeat just run (as asked by [`AutoSeries::next_iters`]):
    /// its time per iteration and its wall cost (us; for the probe, only
    /// its timed iteration counts).
    pub fn push(&mut self, time_us: f64, cost_us: f64) -> RepeatUse {
        let (used, decision) = match self.iters {
            None => {
                let k = self.rule.iters_per_repeat(time_us);
                self.iters = Some(k);
                self.stop
                    .set_max_cost_us(self.rule.placement_cap_us(time_us));
                // The probe's call carries the warm-up and the case's
                // setup (buffers, first touch), which `-n N` pays too:
                // only its one timed iteration counts against the cap.
                if k == 1 {
                    (RepeatUse::Sample, self.stop.push_time(time_us, time_us))
                } else {
                    (RepeatUse::Probe, self.stop.add_cost(time_us))
                }
            }
            Some(_) => (RepeatUse::Sample, self.stop.push_time(time_us, cost_us)),
        };
        // The cap on cost ends the series only once it has a sample.
        if let Decision::Stop(_) = decision {
            self.done = !self.stop.is_empty();
        }
        used
    }

    /// Why the series stopped (`None` while it runs).
    pub fn reason(&self) -> Option<StopReason> {
        match (self.done, self.stop.decision()) {
            (true, Decision::Stop(r)) => Some(r),
            _ => None,
        }
    }

    /// The interval of the time per iteration so far.
    pub fn interval(&self) -> Option<Interval> {
        self.stop.interval()
    }

    /// Samples so far (repeats that count).
    pub fn samples(&self) -> u32 {
        self.stop.len()
    }

    /// What the finished series reached (`None` while it runs).
    pub fn precision(&self) -> Option<AutoPrecision> {
        Some(AutoPrecision {
            repeats: self.samples(),
            rel_half_width: self.interval().map(|i| i.rel_half_width()),
            stopped: self.reason()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::mix;

    /// Scripted noise: a standard normal draw per (seed, index), from the
    /// crate's hash (Box-Muller), so every run sees the same numbers.
    fn normal(seed: u64, i: u64) -> f64 {
        let u = |k: u64| {
            ((mix(seed.wrapping_mul(0x9e37) ^ (2 * i + k)) >> 11) as f64 + 0.5)
                / (1u64 << 53) as f64
        };
        (-2.0 * u(0).ln()).sqrt() * (2.0 * std::f64::consts::PI * u(1)).cos()
    }

    /// Runs one placement's series against a backend whose time per
    /// iteration is `true_us` with multiplicative noise `noise` per repeat
    /// (log-normal, its spread divided by sqrt(iterations): longer repeats
    /// average it), and whose
    /// wall cost is `iterations x time + overhead_us`. Returns the series
    /// and the iterations of every repeat, probe first.
    fn drive(
        rule: AutoIters,
        true_us: f64,
        noise: f64,
        overhead_us: f64,
        seed: u64,
    ) -> (AutoSeries, Vec<u32>, Vec<RepeatUse>) {
        let mut s = AutoSeries::new(rule);
        let (mut iters, mut uses) = (Vec::new(), Vec::new());
        while let Some(k) = s.next_iters() {
            assert!(iters.len() < 1000, "the series must end");
            let i = iters.len() as u64;
            let t = true_us * (noise / f64::from(k).sqrt() * normal(seed, i)).exp();
            iters.push(k);
            uses.push(s.push(t, f64::from(k) * t + overhead_us));
        }
        (s, iters, uses)
    }
    #[test]
    fn a_long_stable_iteration_stops_after_three_single_iteration_repeats() {
        // 8 GiB on a GPU: 50 ms per iteration, 0.2% spread.
        let (s, iters, uses) = drive(AutoIters::default(), 50_000.0, 0.002, 20.0, 1);
        assert_eq!(iters, vec![1, 1, 1], "the probe counts as the first sample");
        assert!(uses.iter().all(|u| *u == RepeatUse::Sample));
        assert_eq!(s.reason(), Some(StopReason::Tight));
        assert!(s.interval().unwrap().rel_half_width() <= 0.01);
    }

    #[test]
    fn a_short_iteration_gets_about_two_milliseconds() {
        // 8 B: 10 us per iteration, 20% spread per iteration.
        for seed in 0..50 {
            let (s, iters, uses) = drive(AutoIters::default(), 10.0, 0.2, 30.0, seed);
            assert_eq!(uses[0], RepeatUse::Probe);
            // Iterations for 2 ms at the probe's time (about 200): one
            // repeat, or two when the probe was slow.
            assert!((80..=600).contains(&iters[1]), "{iters:?}");
            assert!((2..=3).contains(&iters.len()), "{iters:?}");
            assert_eq!(s.reason(), Some(StopReason::Budget));
        }
    }

    #[test]
    fn a_short_iteration_with_room_is_repeated_until_tight() {
        // As above with a larger cap: the interval decides.
        let rule = AutoIters {
            min_placement_us: 1e5,
            ..AutoIters::default()
        };
        for seed in 0..50 {
            let (s, iters, uses) = drive(rule, 10.0, 0.2, 30.0, seed);
            assert_eq!(iters[0], 1);
            assert_eq!(uses[0], RepeatUse::Probe, "a 10 us probe is not a sample");
            assert!((80..=600).contains(&iters[1]), "{iters:?}");
            assert!(iters[1..].iter().all(|&k| k == iters[1]), "{iters:?}");
            let n = s.samples();
            assert_eq!(n as usize, iters.len() - 1);
            assert!(
                (rule.min_repeats..=rule.max_repeats).contains(&n),
                "seed {seed}: {n}"
            );
            let i = s.interval().unwrap();
            if s.reason() == Some(StopReason::Tight) {
                assert!(i.rel_half_width() <= 0.01);
            }
            assert!(i.lo < 10.5 && i.hi > 9.5, "seed {seed}: {i:?}");
        }
    }

    #[test]
    fn the_interval_covers_the_true_time_about_95_percent_of_the_time() {
        // With a fixed count (no early stop), the t-interval's coverage is
        // the nominal one; 400 seeds of 5% noise, 5 samples each.
        let rule = AutoIters {
            min_repeats: 5,
            max_repeats: 5,
            min_placement_us: 1e9,
            max_placement_us: 1e9,
            ..AutoIters::default()
        };
        let covered = (0..400)
            .filter(|&seed| {
                let mut s = AutoSeries::new(rule);
                let mut i = 0;
                while s.next_iters().is_some() {
                    let t = 1000.0 * (0.05 * normal(seed, i)).exp();
                    s.push(t, t);
                    i += 1;
                }
                let iv = s.interval().unwrap();
                iv.lo <= 1000.0 && 1000.0 <= iv.hi
            })
            .count();
        assert!((360..=395).contains(&covered), "{covered} of 400");
    }

    #[test]
    fn noise_that_never_settles_stops_at_max_repeats_or_at_the_cap() {
        let rule = AutoIters {
            min_placement_us: 1e6,
            ..AutoIters::default()
        };
        let (s, iters, _) = drive(rule, 10.0, 3.0, 0.0, 7);
        assert_eq!(s.reason(), Some(StopReason::MaxSamples));
        assert_eq!(iters.len() as u32, rule.max_repeats + 1, "probe + max");
        // With the default cap, 10 us iterations get 2 ms: the probe and
        // one repeat (2% spread per repeat would need more
        // within 1%).
        let rule = AutoIters::default();
        for seed in 0..20 {
            let (s, iters, _) = drive(rule, 10.0, 0.3, 0.0, seed);
            assert_eq!(s.reason(), Some(StopReason::Budget), "{iters:?}");
            let work_us: f64 = iters.iter().map(|&k| f64::from(k) * 10.0).sum();
            // The last repeat may cross the cap.
            let repeat_us = f64::from(iters[1]) * 10.0;
            assert!(work_us >= 1.5e3, "seed {seed}: {iters:?}");
            assert!(work_us <= 2e3 + 1.5 * repeat_us, "seed {seed}: {iters:?}");
        }
        // 1 ms iterations with 20% spread: two per repeat, about 20 in
        // all, what -n 20 takes, never much more.
        let (s, iters, _) = drive(rule, 1000.0, 0.2, 0.0, 7);
        assert_eq!(s.reason(), Some(StopReason::Budget));
        let n: u32 = iters[1..].iter().sum();
        assert!((16..=24).contains(&n), "{iters:?}");
        assert_eq!(rule.placement_cap_us(1000.0), 20e3);
        assert_eq!(rule.placement_cap_us(10.0), 2e3);
        assert_eq!(rule.placement_cap_us(1e5), 1e6);
        // 400 ms per iteration with 5% spread: the 1 s cap ends it after 3
        // repeats, whatever the width.
        let (s, iters, _) = drive(rule, 400_000.0, 0.05, 0.0, 3);
        assert_eq!(s.reason(), Some(StopReason::Budget));
        assert_eq!(iters, vec![1, 1, 1]);
    }

    #[test]
    fn a_probe_that_eats_the_whole_cap_still_leaves_one_sample() {
        let rule = AutoIters {
            max_placement_us: 100.0,
            ..AutoIters::default()
        };
        let mut s = AutoSeries::new(rule);
        assert_eq!(s.push(10.0, 500.0), RepeatUse::Probe);
        assert_eq!(s.next_iters(), Some(200));
        assert_eq!(s.push(10.0, 500.0), RepeatUse::Sample);
        assert_eq!(s.next_iters(), None);
        assert_eq!(s.reason(), Some(StopReason::Budget));
    }

    #[test]
    fn iterations_per_repeat_are_bounded() {
        let rule = AutoIters::default();
        assert_eq!(rule.iters_per_repeat(1e6), 1);
        assert_eq!(rule.iters_per_repeat(1999.0), 2);
        assert_eq!(rule.iters_per_repeat(0.0), MAX_ITERS_PER_REPEAT);
        assert_eq!(rule.iters_per_repeat(1e-9), MAX_ITERS_PER_REPEAT);
    }
}
