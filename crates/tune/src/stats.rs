//! The statistics engine: when to stop measuring, and when a difference is
//! a gain. The stopping part (log series, t-intervals, [`AdaptiveStop`])
//! lives in `collbench_core::adaptive`, shared with `run -n auto` (one
//! series of times per placement), and is re-exported here; the gain rule
//! is `tune`'s own.
//!
//! # Why a t-interval on log ratios of interleaved pairs
//!
//! Each repeat measures the default and the candidate back to back
//! (A B A B ...), so both see the same clock boost, temperature and
//! neighbour load: the pair's ratio `candidate / default` cancels slow drift
//! that would swamp a comparison of two separate series. Timing noise on a
//! GPU is multiplicative (a few percent of the time, not a few
//! microseconds), so the logarithm of the ratio is close to symmetric and
//! normal, and a mean of log ratios is a geometric mean ratio, which is the
//! right average for "x times faster". The Student t-interval is exact for
//! normal data at any sample count, which matters because a band gets 5 to
//! 30 pairs. A percentile bootstrap was the other choice: it needs no
//! normality, but at 5-10 pairs it is known to cover too little (its
//! intervals are too narrow), which is the one error a gain rule must not
//! make; and it costs a random generator and thousands of resamples per
//! decision. The interval of the mean log ratio is mapped back with `exp`,
//! so it is an interval of the time ratio, never below zero.
//!
//! # The gain rule
//!
//! A candidate is a **gain** when, from its own confirmation pairs (fresh
//! ones, measured after it was picked, so the pick's luck does not count),
//! the whole 95% interval of the time ratio lies at or below
//! `1 - min_gain` (default 0.98: at least 2% less time). So the interval
//! excludes 1 *and* the gain is at least 2% even at the interval's
//! unfavourable end. A candidate whose interval lies above 1 is
//! **slower**; anything else is **no gain**.
//!
//! Why the whole interval, not just its estimate: "interval excludes 1 and
//! estimate >= 2%" calls noise a gain in up to 2.5% of bands (the
//! interval's one-sided error), and a tune run has dozens of bands, so some
//! run would report a false gain. Requiring the upper end below 0.98 is a
//! one-sided test of "the gain is below 2%" at 2.5%: when the true gain is
//! zero it errs far more rarely (with the usual ±1% intervals, the estimate
//! would have to be 4 standard errors off), and a real gain of 5% or more
//! passes as soon as the interval is tight.

pub use collbench_core::adaptive::{
    normal_quantile, student_t_quantile, AdaptiveStop, Decision, Interval, LogSeries, StopReason,
    StopRule,
};
use serde::{Deserialize, Serialize};

/// The rule that turns a ratio interval into a verdict (see module docs):
/// gain when `hi <= 1 - min_gain`, slower when `lo > 1`, else no gain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GainRule {
    /// Smallest time saved that counts, as a fraction (0.02 = 2%).
    pub min_gain: f64,
}

impl Default for GainRule {
    fn default() -> GainRule {
        GainRule { min_gain: 0.02 }
    }
}

/// The verdict on a candidate against the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Less time by at least `min_gain`, over the whole interval.
    Gain,
    /// Not shown to differ by at least `min_gain` (or not at all).
    NoGain,
    /// More time, beyond noise.
    Slower,
}

impl GainRule {
    /// Judges an interval of the time ratio `candidate / default`.
    pub fn judge(&self, ratio: &Interval) -> Verdict {
        if ratio.hi <= 1.0 - self.min_gain {
            Verdict::Gain
        } else if ratio.lo > 1.0 {
            Verdict::Slower
        } else {
            Verdict::NoGain
        }
    }
}

/// The interval of the time ratio from pairs measured in several process
/// pairs: `processes[g]` holds the log ratios (candidate/default) of the
/// pairs measured in process pair `g`. Each process pair is one draw of
/// what a fresh process gets, so the estimate is the mean of the process
/// pairs' means (equal weights) and the interval is Student's over those
/// means, with one degree of freedom fewer than process pairs: it carries
/// the spread from one process to the next, which pooling the pairs would
/// hide (their count would shrink the interval while every pair shared
/// one process's luck). Its standard error is never below what the pairs'
/// own noise alone gives (a near-tie of a few process means must not look
/// surer than their pairs are). `None` below two process pairs with a
/// pair each; a process pair with no pair counts for nothing.
pub fn across_processes(processes: &[LogSeries], confidence: f64) -> Option<Interval> {
    let measured: Vec<&LogSeries> = processes.iter().filter(|s| !s.is_empty()).collect();
    let g = measured.len();
    if g < 2 {
        return None;
    }
    let mut means = LogSeries::default();
    for s in &measured {
        means.push(s.mean());
    }
    let between = means.variance().unwrap_or(0.0) / g as f64;
    // Within: the mean of the process pairs' own variances of their means;
    // a process pair of one pair borrows the others' pooled variance.
    let pooled = pooled_variance(&measured);
    let within = measured
        .iter()
        .map(|s| s.variance().or(pooled).unwrap_or(0.0) / f64::from(s.len()))
        .sum::<f64>()
        / (g * g) as f64;
    let se = between.max(within).sqrt();
    let half = student_t_quantile(0.5 + confidence / 2.0, (g - 1) as u32) * se;
    let m = means.mean();
    Some(Interval {
        estimate: m.exp(),
        lo: (m - half).exp(),
        hi: (m + half).exp(),
        n: measured.iter().map(|s| s.len()).sum(),
        confidence,
    })
}

/// The pooled sample variance of the series with two values or more.
fn pooled_variance(series: &[&LogSeries]) -> Option<f64> {
    let (ss, df) = series
        .iter()
        .filter_map(|s| {
            s.variance()
                .map(|v| (v * f64::from(s.len() - 1), s.len() - 1))
        })
        .fold((0.0, 0u32), |(a, b), (x, y)| (a + x, b + y));
    (df > 0).then(|| ss / f64::from(df))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> LogSeries {
        let mut s = LogSeries::default();
        for &v in values {
            s.push(f64::ln(v));
        }
        s
    }

    #[test]
    fn process_pairs_that_disagree_widen_the_interval_pooling_would_hide() {
        // Four process pairs, each tight within, but 0.5x to 0.9x apart.
        let gens: Vec<LogSeries> = [0.5, 0.9, 0.55, 0.85]
            .iter()
            .map(|&r| series(&[r * 0.995, r, r * 1.005, r]))
            .collect();
        let across = across_processes(&gens, 0.95).unwrap();
        let mut pooled = LogSeries::default();
        for r in [0.5f64, 0.9, 0.55, 0.85] {
            for f in [0.995, 1.0, 1.005, 1.0] {
                pooled.push((r * f).ln());
            }
        }
        let pooled = pooled.interval(0.95).unwrap();
        assert_eq!(across.n, 16);
        assert!((across.estimate - pooled.estimate).abs() < 1e-9);
        let width = |i: &Interval| (i.hi / i.lo).ln();
        assert!(
            width(&across) > 2.0 * width(&pooled),
            "{across:?} {pooled:?}"
        );
        // Wide enough to cover every process pair's own figure but the
        // extremes' mean stays inside.
        assert!(across.lo < 0.6 && across.hi > 0.8, "{across:?}");
    }

    #[test]
    fn process_pairs_that_agree_give_the_pairs_own_precision() {
        let gens: Vec<LogSeries> = (0..4)
            .map(|_| series(&[0.79, 0.81, 0.80, 0.80, 0.795, 0.805]))
            .collect();
        let i = across_processes(&gens, 0.95).unwrap();
        // Identical means: the between term is zero, the pairs' noise
        // keeps the interval open.
        assert!(i.lo < 0.8 && 0.8 < i.hi && i.hi < 0.81, "{i:?}");
        assert_eq!(GainRule::default().judge(&i), Verdict::Gain);
    }

    #[test]
    fn one_process_pair_is_not_enough() {
        assert_eq!(across_processes(&[series(&[0.8, 0.81])], 0.95), None);
        assert_eq!(
            across_processes(&[series(&[0.8, 0.81]), LogSeries::default()], 0.95),
            None
        );
        // Two process pairs of one pair each: the between term alone.
        let i = across_processes(&[series(&[0.8]), series(&[0.9])], 0.95).unwrap();
        assert!(i.lo < 0.8 && i.hi > 0.9, "{i:?}");
    }

    #[test]
    fn interval_brackets_a_known_ratio() {
        let mut s = LogSeries::default();
        for r in [0.90, 0.92, 0.91, 0.89, 0.90, 0.91] {
            s.push(f64::ln(r));
        }
        let i = s.interval(0.95).unwrap();
        assert!(i.lo < 0.905 && 0.905 < i.hi, "{i:?}");
        assert!(i.hi < 1.0);
        assert_eq!(GainRule::default().judge(&i), Verdict::Gain);
        let (g, lo, hi) = i.gain();
        assert!(lo < g && g < hi && lo > 0.0);
    }

    #[test]
    fn identical_pairs_are_no_gain_and_stop_tight() {
        let mut a = AdaptiveStop::new(StopRule::default());
        let mut d = Decision::Continue;
        for k in 0..10 {
            // Small symmetric noise around ratio 1.
            let c = if k % 2 == 0 { 100.2 } else { 99.8 };
            d = a.push_pair(100.0, c, 1.0);
            if d != Decision::Continue {
                break;
            }
        }
        assert_eq!(d, Decision::Stop(StopReason::Tight));
        assert_eq!(a.len(), 5, "never stops before min_samples");
        let i = a.interval().unwrap();
        assert_eq!(GainRule::default().judge(&i), Verdict::NoGain);
    }

    #[test]
    fn a_small_sure_gain_below_the_threshold_is_no_gain() {
        let mut s = LogSeries::default();
        for r in [0.990, 0.991, 0.989, 0.990] {
            s.push(f64::ln(r));
        }
        let i = s.interval(0.95).unwrap();
        assert!(i.hi < 1.0);
        assert_eq!(GainRule::default().judge(&i), Verdict::NoGain);
    }

    #[test]
    fn slower_is_slower() {
        let mut s = LogSeries::default();
        for r in [1.2, 1.21, 1.19] {
            s.push(f64::ln(r));
        }
        assert_eq!(
            GainRule::default().judge(&s.interval(0.95).unwrap()),
            Verdict::Slower
        );
    }
}
