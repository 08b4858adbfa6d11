//! Adaptive sample counts: add samples to a series until the interval of
//! its mean is tight enough ([`AdaptiveStop`]), within a minimum and a
//! maximum count and a cap on cost. Shared by `run -n auto` (one series of
//! repeat times per placement, see [`crate::auto_iters`]) and `collbench tune`
//! (series of interleaved pairs; its gain rule lives in
//! `collbench_tune::stats`, which re-exports this module).
//!
//! # Why log values and a t-interval
//!
//! Timing noise on a GPU is multiplicative (a few percent of the time, not
//! a few microseconds), so the logarithm of a time, or of a ratio of two
//! times, is close to symmetric and normal, and a mean of logs is a
//! geometric mean, the right average for "x times faster". The Student
//! t-interval is exact for normal data at any sample count, which matters
//! at 3 to 40 samples. A percentile bootstrap needs no normality but covers
//! too little at 5-10 samples (its intervals are too narrow). The interval
//! of the mean log is mapped back with `exp`, so it is an interval of the
//! time (or ratio), never below zero.

use serde::{Deserialize, Serialize};

/// Running mean and variance of log values (Welford's update).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogSeries {
    n: u32,
    mean: f64,
    m2: f64,
}

impl LogSeries {
    /// Adds one log value.
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / f64::from(self.n);
        self.m2 += d * (x - self.mean);
    }

    /// Number of values.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// True before the first value.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The mean of the values (0 before the first).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The sample variance of the values; `None` below two.
    pub fn variance(&self) -> Option<f64> {
        (self.n >= 2).then(|| (self.m2 / f64::from(self.n - 1)).max(0.0))
    }

    /// The interval of `exp(mean)` at `confidence` (e.g. 0.95); `None`
    /// below two values.
    pub fn interval(&self, confidence: f64) -> Option<Interval> {
        if self.n < 2 {
            return None;
        }
        let df = self.n - 1;
        let sd = (self.m2 / f64::from(df)).max(0.0).sqrt();
        let half = student_t_quantile(0.5 + confidence / 2.0, df) * sd / f64::from(self.n).sqrt();
        Some(Interval {
            estimate: self.mean.exp(),
            lo: (self.mean - half).exp(),
            hi: (self.mean + half).exp(),
            n: self.n,
            confidence,
        })
    }
}

/// An interval of a ratio (or of a time), mapped back from log space.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Geometric mean.
    pub estimate: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Number of samples (pairs, for a ratio).
    pub n: u32,
    /// Confidence level (0.95).
    pub confidence: f64,
}

impl Interval {
    /// Half the width relative to the estimate, as a fraction (0.01 = ±1%).
    pub fn rel_half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0 / self.estimate
    }

    /// For a time ratio `candidate / default`: the gain in time saved,
    /// `1 - ratio`, as (estimate, lo, hi) fractions; lo comes from the
    /// ratio's upper end.
    pub fn gain(&self) -> (f64, f64, f64) {
        (1.0 - self.estimate, 1.0 - self.hi, 1.0 - self.lo)
    }
}

/// When to stop adding samples to one series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Confidence level of the interval (0.95).
    pub confidence: f64,
    /// Stop once the interval's relative half-width is at most this
    /// (0.01 = ±1%).
    pub rel_half_width: f64,
    /// Never stop before this many samples (the t-interval of very few
    /// samples is valid but wide; fewer than 3 says little about spread).
    pub min_samples: u32,
    /// Stop at this many samples whatever the width.
    pub max_samples: u32,
    /// Stop once the measurements cost this much time (us, wall).
    pub max_cost_us: f64,
}

impl Default for StopRule {
    fn default() -> StopRule {
        StopRule {
            confidence: 0.95,
            rel_half_width: 0.01,
            min_samples: 5,
            max_samples: 40,
            max_cost_us: f64::INFINITY,
        }
    }
}

/// Why a series stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The interval is as tight as asked.
    Tight,
    /// `max_samples` reached.
    MaxSamples,
    /// `max_cost_us` spent (for `-n auto`: the placement's time cap).
    Budget,
}

/// What [`AdaptiveStop`] says after each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Measure another sample.
    Continue,
    /// Enough: the interval is final.
    Stop(StopReason),
}

/// Adaptive sample count for one series: feed it samples, it says when to
/// stop, and gives the interval. One `AdaptiveStop` follows one series:
/// either pairs (`push_pair`, for tune) or single times (`push_time`, for
/// `run -n auto`), never both.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveStop {
    rule: StopRule,
    series: LogSeries,
    cost_us: f64,
}

impl AdaptiveStop {
    /// A fresh series under `rule`.
    pub fn new(rule: StopRule) -> AdaptiveStop {
        AdaptiveStop {
            rule,
            series: LogSeries::default(),
            cost_us: 0.0,
        }
    }

    /// Adds one interleaved pair: times per iteration of default and
    /// candidate, and what measuring the pair cost (us, wall).
    pub fn push_pair(&mut self, default_us: f64, candidate_us: f64, cost_us: f64) -> Decision {
        self.series.push((candidate_us / default_us).ln());
        self.cost_us += cost_us;
        self.decision()
    }

    /// Adds one time per iteration (a repeat of one setting) and its cost.
    pub fn push_time(&mut self, time_us: f64, cost_us: f64) -> Decision {
        self.series.push(time_us.ln());
        self.cost_us += cost_us;
        self.decision()
    }

    /// Changes the cap on cost (us) from now on.
    pub fn set_max_cost_us(&mut self, max_cost_us: f64) {
        self.rule.max_cost_us = max_cost_us;
    }

    /// Adds cost without a sample (a calibration run); the decision for
    /// the samples so far.
    pub fn add_cost(&mut self, cost_us: f64) -> Decision {
        self.cost_us += cost_us;
        self.decision()
    }

    /// The decision for the samples so far.
    pub fn decision(&self) -> Decision {
        let n = self.series.len();
        if self.cost_us >= self.rule.max_cost_us {
            return Decision::Stop(StopReason::Budget);
        }
        if n >= self.rule.max_samples {
            return Decision::Stop(StopReason::MaxSamples);
        }
        if n >= self.rule.min_samples.max(2) {
            if let Some(i) = self.interval() {
                if i.rel_half_width() <= self.rule.rel_half_width {
                    return Decision::Stop(StopReason::Tight);
                }
            }
        }
        Decision::Continue
    }

    /// The interval so far (`None` below two samples).
    pub fn interval(&self) -> Option<Interval> {
        self.series.interval(self.rule.confidence)
    }

    /// Samples so far.
    pub fn len(&self) -> u32 {
        self.series.len()
    }

    /// True before the first sample.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Wall time spent so far (us).
    pub fn cost_us(&self) -> f64 {
        self.cost_us
    }
}

/// Quantile of the standard normal distribution (Acklam's rational
/// approximation, relative error below 1.2e-9), for 0 < p < 1.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Quantile of Student's t distribution with `df` degrees of freedom, for
/// 0.5 <= p < 1. Exact for 1 and 2 degrees of freedom; from 3 on, the
/// Cornish-Fisher expansion around the normal quantile (four terms; within
/// 0.5% of the tables at p = 0.975 for df >= 3, closer as df grows).
pub fn student_t_quantile(p: f64, df: u32) -> f64 {
    match df {
        0 => f64::INFINITY,
        1 => (std::f64::consts::PI * (p - 0.5)).tan(),
        2 => (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt(),
        _ => {
            let z = normal_quantile(p);
            let v = f64::from(df);
            let z2 = z * z;
            let g1 = (z2 + 1.0) * z / 4.0;
            let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
            let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
            let g4 =
                ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
            z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95% critical values from standard t tables.
        let table = [
            (1, 12.706),
            (2, 4.303),
            (3, 3.182),
            (4, 2.776),
            (5, 2.571),
            (9, 2.262),
            (19, 2.093),
            (29, 2.045),
            (99, 1.984),
        ];
        for (df, t) in table {
            let got = student_t_quantile(0.975, df);
            assert!((got - t).abs() / t < 0.005, "df {df}: {got} vs {t}");
        }
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile(0.005) + 2.575_829).abs() < 1e-5);
    }

    #[test]
    fn stops_on_budget_and_on_max_samples() {
        let rule = StopRule {
            max_cost_us: 10.0,
            ..StopRule::default()
        };
        let mut a = AdaptiveStop::new(rule);
        assert_eq!(a.push_time(5.0, 6.0), Decision::Continue);
        assert_eq!(a.push_time(50.0, 6.0), Decision::Stop(StopReason::Budget));
        let rule = StopRule {
            max_samples: 3,
            ..StopRule::default()
        };
        let mut a = AdaptiveStop::new(rule);
        let mut last = Decision::Continue;
        for t in [1.0, 2.0, 4.0] {
            last = a.push_time(t, 0.0);
        }
        assert_eq!(last, Decision::Stop(StopReason::MaxSamples));
    }
}
