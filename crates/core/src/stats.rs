//! Statistics over per-iteration times.
//!
//! [`StreamingStats`] summarises any number of samples in fixed memory, so
//! `-n 1000000000` costs the same as `-n 20`: mean, minimum, maximum and
//! standard deviation are exact (Welford's update); percentiles are exact
//! while there are at most [`EXACT_SAMPLES`] samples and come from a
//! log-spaced histogram beyond that, within [`PERCENTILE_REL_ERROR`] of a
//! sample value next to the exact percentile.

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
        let mut s = StreamingStats::new();
        times_us.iter().for_each(|&t| s.push(t));
        s.summary()
    }
}

/// Samples kept exactly; percentiles are exact up to this many.
pub const EXACT_SAMPLES: usize = 4096;

/// Ratio between neighbouring histogram bucket edges.
const GROWTH: f64 = 1.01;
/// Lower edge of the first regular bucket: 1 ns, in microseconds.
const LOWEST_US: f64 = 1e-3;
/// Regular buckets: edges from 1 ns to about 10^9 us (17 minutes).
const REGULAR_BUCKETS: usize = 2777;
/// Plus one bucket below the range and one above it.
const BUCKETS: usize = REGULAR_BUCKETS + 2;

/// Largest relative error of a percentile taken from the histogram against
/// a sample of neighbouring rank: half a bucket in log space,
/// sqrt(1.01) - 1. Values outside 1 ns .. 10^9 us fall into end buckets and
/// are reported as the minimum or maximum.
pub const PERCENTILE_REL_ERROR: f64 = 0.005;

/// Running summary of per-iteration times in fixed memory (about 55 KB
/// however many samples): Welford's mean and variance, extremes, the first
/// [`EXACT_SAMPLES`] samples, and a histogram with 1% wide buckets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamingStats {
    count: u64,
    mean: f64,
    /// Sum of squared differences from the mean (Welford).
    m2: f64,
    min: f64,
    max: f64,
    /// Every sample while `count <= EXACT_SAMPLES`; emptied beyond.
    exact: Vec<f64>,
    /// Histogram counts: bucket 0 below 1 ns, then 1% wide buckets
    /// (allocated with the first sample).
    buckets: Vec<u64>,
}

impl Default for StreamingStats {
    fn default() -> StreamingStats {
        StreamingStats::new()
    }
}

fn bucket_of(t: f64) -> usize {
    if t.is_nan() || t < LOWEST_US {
        return 0;
    }
    let i = ((t / LOWEST_US).ln() / GROWTH.ln()).floor();
    if i >= REGULAR_BUCKETS as f64 {
        BUCKETS - 1
    } else {
        1 + i as usize
    }
}

/// Geometric middle of a regular bucket.
fn bucket_middle(b: usize) -> f64 {
    LOWEST_US * GROWTH.powf((b - 1) as f64 + 0.5)
}

impl StreamingStats {
    /// An empty summary.
    pub fn new() -> StreamingStats {
        StreamingStats {
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            exact: Vec::new(),
            buckets: Vec::new(),
        }
    }

    /// Allocates now what `samples` more samples will need, so that
    /// [`StreamingStats::push`] does not allocate inside a timed loop.
    pub fn reserve(&mut self, samples: u64) {
        self.buckets.resize(BUCKETS, 0);
        let room = EXACT_SAMPLES.saturating_sub(self.exact.len());
        let room = room.min(usize::try_from(samples).unwrap_or(usize::MAX));
        // Written once and dropped again: fresh pages fault on first write.
        let len = self.exact.len();
        self.exact.resize(len + room, 0.0);
        self.exact.truncate(len);
    }

    /// Adds one sample (microseconds).
    pub fn push(&mut self, t: f64) {
        self.count += 1;
        let d = t - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (t - self.mean);
        self.min = self.min.min(t);
        self.max = self.max.max(t);
        if self.buckets.is_empty() {
            self.buckets.resize(BUCKETS, 0);
        }
        self.buckets[bucket_of(t)] += 1;
        self.keep_exact(std::slice::from_ref(&t));
    }

    fn keep_exact(&mut self, samples: &[f64]) {
        if self.count as usize <= EXACT_SAMPLES {
            self.exact.extend_from_slice(samples);
        } else {
            self.exact = Vec::new();
        }
    }

    /// Folds `other` in, as if its samples had been pushed here (Chan et
    /// al.'s parallel update for the variance).
    pub fn merge(&mut self, other: &StreamingStats) {
        if other.count == 0 {
            return;
        }
        let (n1, n2) = (self.count as f64, other.count as f64);
        let n = n1 + n2;
        let d = other.mean - self.mean;
        self.mean += d * n2 / n;
        self.m2 += other.m2 + d * d * n1 * n2 / n;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.buckets.resize(BUCKETS, 0);
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.keep_exact(&other.exact);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes of heap this summary holds; bounded whatever the count.
    pub fn heap_bytes(&self) -> usize {
        (self.exact.capacity() + self.buckets.capacity()) * 8
    }

    /// The `p`-th percentile (0..=100): linear interpolation between the
    /// two nearest samples while exact, else the middle of the histogram
    /// bucket holding the sample of nearest rank, clamped to min..max.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        if self.exact.len() as u64 == self.count {
            let mut sorted = self.exact.clone();
            sorted.sort_by(|a, b| a.total_cmp(b));
            return percentile(&sorted, p);
        }
        let rank = ((p / 100.0) * (self.count - 1) as f64).round() as u64;
        let mut seen = 0u64;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen > rank {
                return match b {
                    0 => self.min,
                    b if b == BUCKETS - 1 => self.max,
                    b => bucket_middle(b).clamp(self.min, self.max),
                };
            }
        }
        self.max
    }

    /// The summary as printed and stored; `None` when there are no samples.
    pub fn summary(&self) -> Option<TimeStats> {
        if self.count == 0 {
            return None;
        }
        let var = if self.count > 1 {
            self.m2 / (self.count - 1) as f64
        } else {
            0.0
        };
        Some(TimeStats {
            mean_us: self.mean,
            min_us: self.min,
            p50_us: self.percentile(50.0),
            p99_us: self.percentile(99.0),
            max_us: self.max,
            stdev_us: var.max(0.0).sqrt(),
            samples: self.count,
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

    /// A spread of times from 0.5 us to about 5 ms, deterministic.
    fn sample(i: u64) -> f64 {
        let x = (collbench_mix(i) >> 11) as f64 / (1u64 << 53) as f64;
        0.5 * 10f64.powf(4.0 * x)
    }

    fn collbench_mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn memory_stays_fixed_and_percentiles_within_bound() {
        let n = 2_000_000u64;
        let mut s = StreamingStats::new();
        let mut bytes_at_exact_limit = 0;
        for i in 0..n {
            s.push(sample(i));
            if i as usize == EXACT_SAMPLES {
                bytes_at_exact_limit = s.heap_bytes();
            }
        }
        // The histogram is all that grows past the exact samples: nothing.
        assert!(s.heap_bytes() <= bytes_at_exact_limit);
        assert!(s.heap_bytes() <= 64 * 1024, "{} bytes", s.heap_bytes());
        let mut all: Vec<f64> = (0..n).map(sample).collect();
        all.sort_by(|a, b| a.total_cmp(b));
        let sum = s.summary().unwrap();
        let exact_mean = all.iter().sum::<f64>() / n as f64;
        assert!((sum.mean_us - exact_mean).abs() / exact_mean < 1e-9);
        let var = all.iter().map(|t| (t - exact_mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!((sum.stdev_us - var.sqrt()).abs() / var.sqrt() < 1e-9);
        assert_eq!(sum.min_us, all[0]);
        assert_eq!(sum.max_us, all[all.len() - 1]);
        assert_eq!(sum.samples, n);
        for p in [1.0, 50.0, 90.0, 99.0, 99.9] {
            let exact = percentile(&all, p);
            let got = s.percentile(p);
            assert!(
                (got - exact).abs() / exact <= PERCENTILE_REL_ERROR + 1e-3,
                "p{p}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn exact_while_few_and_merge_matches_one_stream() {
        let xs: Vec<f64> = (0..3000).map(sample).collect();
        let ys: Vec<f64> = (3000..9000).map(sample).collect();
        let few = TimeStats::from_samples(&xs).unwrap();
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        assert_eq!(few.p50_us, percentile(&sorted, 50.0));
        assert_eq!(few.p99_us, percentile(&sorted, 99.0));

        let (mut a, mut b, mut one) = (
            StreamingStats::new(),
            StreamingStats::new(),
            StreamingStats::new(),
        );
        xs.iter().for_each(|&t| a.push(t));
        ys.iter().for_each(|&t| b.push(t));
        xs.iter().chain(&ys).for_each(|&t| one.push(t));
        a.merge(&b);
        let (m, o) = (a.summary().unwrap(), one.summary().unwrap());
        assert_eq!(m.samples, o.samples);
        assert!((m.mean_us - o.mean_us).abs() < 1e-9 * o.mean_us);
        assert!((m.stdev_us - o.stdev_us).abs() < 1e-9 * o.stdev_us);
        assert_eq!(
            (m.min_us, m.max_us, m.p50_us, m.p99_us),
            (o.min_us, o.max_us, o.p50_us, o.p99_us)
        );
    }

    #[test]
    fn reserve_leaves_nothing_to_allocate_in_the_timed_loop() {
        let mut s = StreamingStats::new();
        s.reserve(20);
        let ptrs = (s.exact.as_ptr(), s.buckets.as_ptr(), s.heap_bytes());
        (0..20).for_each(|i| s.push(sample(i)));
        assert_eq!((s.exact.as_ptr(), s.buckets.as_ptr(), s.heap_bytes()), ptrs);
        assert_eq!(s.summary().unwrap().samples, 20);
    }

    #[test]
    fn huge_and_tiny_times_are_clamped_not_lost() {
        let mut s = StreamingStats::new();
        for _ in 0..EXACT_SAMPLES + 10 {
            s.push(1e-6);
        }
        s.push(1e12);
        let t = s.summary().unwrap();
        assert_eq!(t.min_us, 1e-6);
        assert_eq!(t.p50_us, 1e-6);
        assert_eq!(t.max_us, 1e12);
    }
}
