//! Statistics over per-iteration times.

use serde::{Deserialize, Serialize};

/// Summary of a set of per-iteration times, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct TimeStats {
    pub mean_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub stdev_us: f64,
    /// How many samples the summary is over.
    pub samples: u64,
}

impl TimeStats {
    /// Summarises `times_us`; `None` when there are no samples.
    pub fn from_samples(times_us: &[f64]) -> Option<TimeStats> {
        if times_us.is_empty() {
            return None;
        }
        let mut sorted = times_us.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = if sorted.len() > 1 {
            sorted.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Some(TimeStats {
            mean_us: mean,
            min_us: sorted[0],
            p50_us: percentile(&sorted, 50.0),
            p99_us: percentile(&sorted, 99.0),
            max_us: sorted[sorted.len() - 1],
            stdev_us: var.sqrt(),
            samples: sorted.len() as u64,
        })
    }
}

/// Linear-interpolated percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_known_samples() {
        let s = TimeStats::from_samples(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.max_us, 5.0);
        assert_eq!(s.p50_us, 3.0);
        assert_eq!(s.mean_us, 3.0);
        assert!((s.stdev_us - 2.5f64.sqrt()).abs() < 1e-12);
        assert!(TimeStats::from_samples(&[]).is_none());
    }
}
