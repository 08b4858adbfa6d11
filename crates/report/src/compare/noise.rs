//! How sure a NEW/BASE ratio is: the noise of each case, from the best
//! source the inputs carry.
//!
//! Everything here works on the log of a case's time (`ln t`), so a ratio
//! is a difference and intervals are symmetric. Bandwidth of one size is
//! proportional to 1/time, so a time interval is also a bandwidth interval.
//!
//! Sources, best first (see docs/compare.md):
//! 1. **Runs**: a side given as several runs (a folder, or `--base-run`
//!    / `--new-run`): the spread of the case across that side's runs. A
//!    side of one run borrows the other side's spread of one run.
//! 2. **Iterations**: per-iteration statistics (collbench JSON, nccl-tests
//!    `-I` columns or `-J` `*_per_iter`): the standard error of the
//!    median (or mean) from the iterations' spread. One run's iterations
//!    do not see what changes between runs, so this is floored by (3).
//! 3. **Log**: the log's own scatter: how far each case's ratio strays
//!    from its neighbouring sizes' and from its other placement's (a
//!    robust spread, so a real step at a few sizes does not inflate it).
//!
//! With none of these, a case cannot be judged and says so.

use collbench_core::adaptive::{normal_quantile, student_t_quantile};
use collbench_core::Placement;

/// Where a case's noise estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseSource {
    /// The spread across runs: BASE had `base` runs, NEW `new`.
    Runs { base: usize, new: usize },
    /// Per-iteration statistics (`samples` per run, the fewer side);
    /// `median`: the medians were compared, else the means.
    Iterations { samples: u64, median: bool },
    /// The log's own scatter between neighbouring sizes and placements.
    Log,
}

impl std::fmt::Display for NoiseSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoiseSource::Runs { base, new } => write!(f, "runs {base}+{new}"),
            NoiseSource::Iterations { samples, median } => write!(
                f,
                "iterations (n={samples}, {})",
                if *median { "p50" } else { "mean" }
            ),
            NoiseSource::Log => f.write_str("log scatter"),
        }
    }
}

/// One run's figure for a case: `ln` of its time (or of 1/bandwidth
/// where the test measures no time), with the standard error of that
/// from its iterations when they were recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub log_time: f64,
    /// Standard error of `log_time` from the run's own iterations.
    pub iter_se: Option<f64>,
    /// Iterations behind `iter_se`.
    pub samples: u64,
    /// The iterations' coefficient of variation (stdev / mean): how much
    /// one iteration strays, which is also about how far a run's figure
    /// strays from the next run's on the same machine (see
    /// [`noise_cut`]).
    pub cv: Option<f64>,
    /// Whether `log_time` is of the median iteration.
    pub median: bool,
}

/// The standard error of a median is this many times the mean's for
/// normal data (sqrt(pi/2)); with heavy tails the stdev it scales is
/// already inflated, so the interval errs wide.
const MEDIAN_SE_FACTOR: f64 = 1.2533;

impl Sample {
    /// The figure of `p`: the median iteration where `median` and
    /// statistics allow; else 1/bandwidth where the case is judged on
    /// bandwidth (`by_time` false) or the test has no time, the reported
    /// time otherwise. `None` when there is nothing positive to take the
    /// log of.
    pub fn of(p: &Placement, bw: f64, median: bool, by_time: bool) -> Option<Sample> {
        let stats = p
            .stats
            .filter(|s| s.samples > 1 && s.mean_us > 0.0 && s.stdev_us.is_finite());
        let rel_se = |factor: f64| {
            stats.map(|s| factor * (s.stdev_us / s.mean_us) / (s.samples as f64).sqrt())
        };
        let samples = stats.map_or(0, |s| s.samples);
        let cv = stats.map(|s| s.stdev_us / s.mean_us);
        if median {
            if let Some(s) = stats.filter(|s| s.p50_us > 0.0) {
                return Some(Sample {
                    log_time: s.p50_us.ln(),
                    iter_se: rel_se(MEDIAN_SE_FACTOR),
                    samples,
                    cv,
                    median: true,
                });
            }
        }
        let log_time = if bw > 0.0 && (!by_time || p.time_us <= 0.0) {
            -bw.ln()
        } else if p.time_us > 0.0 {
            p.time_us.ln()
        } else {
            return None;
        };
        Some(Sample {
            log_time,
            iter_se: rel_se(1.0),
            samples,
            cv,
            median: false,
        })
    }
}

/// A case's log-time difference NEW - BASE with its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// `ln(t_new / t_base)`: positive is slower.
    pub log_ratio: f64,
    /// Standard error of `log_ratio`; `None`: no source could say.
    pub se: Option<f64>,
    /// The quantile that makes a two-sided 95% interval from `se`
    /// (Student's t for a few runs, else normal).
    pub z95: f64,
    pub source: Option<NoiseSource>,
    /// The smallest change this case can resolve between two runs, as a
    /// fraction, where single runs carry per-iteration statistics (see
    /// [`noise_cut`]); 0 where the spread across runs is measured or
    /// nothing says.
    pub noise_cut: f64,
    /// Only the log's scatter says this case's noise: neither runs nor
    /// iterations were there to say how a whole stretch of a run strays.
    pub log_only: bool,
}

/// How many iteration spreads a run-to-run change must exceed to be told
/// from noise with single runs: AMD's CVS regression detector calibrates
/// each threshold at twice the A/A coefficient of variation, and one
/// run's iterations are the A/A control a single run carries. On a quiet
/// GPU (spread ~1%) this stays below the threshold; on shared CPUs (spread
/// 10-50%) it rises above it, because back-to-back identical runs there
/// differ by that much (bench/results/gate.md).
pub const NOISE_CUT_CVS: f64 = 2.0;

/// The noise cut of a case from its samples: [`NOISE_CUT_CVS`] times
/// BASE's coefficient of variation, for single runs. The reference's own
/// spread says what the machine does between runs; NEW's is left out on
/// purpose, so that a NEW that got jittery (a flapping link, a busy
/// neighbour) cannot raise the bar its own slowdown is judged by (its
/// jitter still widens the interval).
pub fn noise_cut(base: &[Sample], new: &[Sample]) -> f64 {
    if base.len() > 1 || new.len() > 1 {
        return 0.0;
    }
    let cv = base[0].cv.unwrap_or(0.0);
    if cv.is_finite() {
        NOISE_CUT_CVS * cv
    } else {
        0.0
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (n - 1); `None` below two values.
fn sd(v: &[f64]) -> Option<f64> {
    (v.len() >= 2).then(|| {
        let m = mean(v);
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    })
}

/// The estimate of a case from its samples on each side (one per run,
/// never empty), before the log's scatter is known.
pub fn estimate(base: &[Sample], new: &[Sample]) -> Estimate {
    Estimate {
        noise_cut: noise_cut(base, new),
        ..spread(base, new)
    }
}

/// [`estimate`] before its noise cut.
fn spread(base: &[Sample], new: &[Sample]) -> Estimate {
    let logs = |s: &[Sample]| s.iter().map(|x| x.log_time).collect::<Vec<_>>();
    let (lb, ln) = (logs(base), logs(new));
    let log_ratio = mean(&ln) - mean(&lb);
    let z = normal_quantile(0.975);
    if let (Some(sb), Some(sn)) = (sd(&lb), sd(&ln)) {
        // Both sides repeated: the spread across runs, pooled.
        let df = (lb.len() + ln.len() - 2) as u32;
        let pooled = (((lb.len() - 1) as f64 * sb * sb + (ln.len() - 1) as f64 * sn * sn)
            / df as f64)
            .sqrt();
        let se = pooled * (1.0 / lb.len() as f64 + 1.0 / ln.len() as f64).sqrt();
        return Estimate {
            log_ratio,
            se: Some(se),
            z95: student_t_quantile(0.975, df),
            source: Some(NoiseSource::Runs {
                base: lb.len(),
                new: ln.len(),
            }),
            noise_cut: 0.0,
            log_only: false,
        };
    }
    if let Some(s) = sd(&lb).or(sd(&ln)) {
        // One side repeated: its spread of one run stands for the other's.
        let k = lb.len().max(ln.len());
        let se = s * (1.0 / k as f64 + 1.0).sqrt();
        return Estimate {
            log_ratio,
            se: Some(se),
            z95: student_t_quantile(0.975, (k - 1) as u32),
            source: Some(NoiseSource::Runs {
                base: lb.len(),
                new: ln.len(),
            }),
            noise_cut: 0.0,
            log_only: false,
        };
    }
    let (b, n) = (base[0], new[0]);
    match (b.iter_se, n.iter_se) {
        (Some(x), Some(y)) => Estimate {
            log_ratio,
            se: Some((x * x + y * y).sqrt()),
            z95: z,
            source: Some(NoiseSource::Iterations {
                samples: b.samples.min(n.samples),
                median: b.median && n.median,
            }),
            noise_cut: 0.0,
            log_only: false,
        },
        _ => Estimate {
            log_ratio,
            se: None,
            z95: z,
            source: None,
            noise_cut: 0.0,
            log_only: false,
        },
    }
}

/// A robust standard deviation: 1.4826 x the median absolute deviation
/// from the median (the standard deviation for normal data, unmoved by a
/// few outliers). `None` below `MIN_RESIDUALS` values.
pub fn robust_sd(values: &[f64]) -> Option<f64> {
    if values.len() < MIN_RESIDUALS {
        return None;
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut v = values.to_vec();
    let m = med(&mut v);
    let mut dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    Some(1.4826 * med(&mut dev))
}

/// Residuals needed before the log's scatter is trusted.
pub const MIN_RESIDUALS: usize = 4;

/// The residuals of one series of log ratios (one placement, sizes in
/// order): each inner value against the mean of its two neighbours,
/// scaled to one case's noise (the difference has 1.5 times its variance).
pub fn neighbour_residuals(series: &[f64]) -> Vec<f64> {
    series
        .windows(3)
        .map(|w| (w[1] - (w[0] + w[2]) / 2.0) / 1.5f64.sqrt())
        .collect()
}

/// The residual of a size measured in both placements: half their
/// difference's spread is each one's (the difference has twice the
/// variance of one case).
pub fn placement_residual(out_of_place: f64, in_place: f64) -> f64 {
    (out_of_place - in_place) / 2f64.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::TimeStats;

    fn placement(time: f64, stdev: f64, p50: f64) -> Placement {
        Placement {
            time_us: time,
            stats: Some(TimeStats {
                mean_us: time,
                min_us: time / 2.0,
                p50_us: p50,
                p99_us: time * 2.0,
                max_us: time * 2.0,
                stdev_us: stdev,
                samples: 100,
            }),
            ..Placement::default()
        }
    }

    #[test]
    fn the_median_and_its_standard_error_come_from_the_statistics() {
        let s = Sample::of(&placement(110.0, 11.0, 100.0), 0.0, true, true).unwrap();
        assert!((s.log_time - 100f64.ln()).abs() < 1e-12);
        // 1.2533 x CV 0.1 / sqrt(100).
        assert!((s.iter_se.unwrap() - 0.012533).abs() < 1e-6);
        let m = Sample::of(&placement(110.0, 11.0, 100.0), 0.0, false, true).unwrap();
        assert!((m.log_time - 110f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn without_time_the_bandwidth_stands_in_and_nothing_is_none() {
        let p = Placement::default();
        assert_eq!(Sample::of(&p, 0.0, true, false), None);
        let s = Sample::of(&p, 4.0, true, true).unwrap();
        assert!((s.log_time + 4f64.ln()).abs() < 1e-12);
        assert_eq!(s.iter_se, None);
    }

    #[test]
    fn runs_on_both_sides_give_a_t_interval() {
        let s = |t: f64| Sample {
            log_time: t,
            iter_se: None,
            samples: 0,
            cv: None,
            median: false,
        };
        let e = estimate(&[s(0.0), s(0.02), s(-0.02)], &[s(0.1), s(0.12), s(0.08)]);
        assert!((e.log_ratio - 0.1).abs() < 1e-12);
        assert_eq!(e.source, Some(NoiseSource::Runs { base: 3, new: 3 }));
        assert!(e.z95 > 2.7 && e.z95 < 2.8, "t(0.975, 4) = {}", e.z95);
        assert!((e.se.unwrap() - 0.02 * (2.0f64 / 3.0).sqrt()).abs() < 1e-9);
        // One run a side, no statistics: nothing to say.
        assert_eq!(estimate(&[s(0.0)], &[s(0.1)]).se, None);
    }

    #[test]
    fn the_robust_spread_ignores_one_outlier() {
        let r = robust_sd(&[0.01, -0.01, 0.0, 0.02, -0.02, 3.0]).unwrap();
        assert!(r < 0.03, "{r}");
        assert_eq!(robust_sd(&[1.0, 2.0]), None);
    }
}
