//! The steep rule: a rise in time large in ratio and consistent over
//! adjacent sizes is a regression even where each step is under the
//! latency regime's absolute floor ([`super::TIME_FLOOR_US`]).
//!
//! The floor is there because a few µs on a 12 µs call is the timer, not
//! the network. But small messages are latency-bound: a protocol or
//! transport change (LL to Simple, NVLink to a socket, a lost P2P path)
//! multiplies their time while adding only a few µs to each. One real
//! pair was judged "no regression" although small-message latency rose
//! about 8x, every step under the +5 µs floor.
//!
//! Why 2x over 3 sizes, from the noise model ([`super::noise`]):
//! * **2x.** The largest cut the noise can ask for is a time rise of
//!   1.95x (the cap on the cut, twice a coefficient of variation, or
//!   twice the log's scatter). A case whose whole 95% interval lies at or
//!   beyond 2x is beyond anything the model calls noise for one run.
//! * **3 adjacent sizes.** The two-adjacent-case rule stops a burst that
//!   catches one size; A/A runs on this shared 2-core machine showed
//!   bursts of "several sizes of one op 1.5-2x apart" (docs/compare.md),
//!   so one more size is asked here, where no absolute floor helps. A real
//!   latency change moves every small size of an op, usually many more
//!   than three. Measured A/A: bench/results/compare-ratio.md.
//!
//! The breadth rule for logs alone (a third of the ops) applies as to any
//! regression.

use super::adjacent::Layout;
use super::noise::Estimate;
use super::shape::CaseShape;

/// The smallest time ratio NEW/BASE (its whole 95% interval) that counts
/// under the floor.
pub const STEEP_RATIO: f64 = 2.0;

/// How many adjacent sizes of one placement must all be that steep.
pub const STEEP_RUN: usize = 3;

/// Whether a case judged on time is slower by [`STEEP_RATIO`] or more
/// with its whole interval, and beyond its cut.
/// `slower_cut` is the case's own cut on time, as a log ratio
/// (`Rule::slower_by` in the rule).
pub fn is_steep(slower_cut: f64, shape: &CaseShape, e: &Estimate) -> bool {
    let Some(se) = e.se.filter(|s| s.is_finite()) else {
        return false;
    };
    let lower = e.log_ratio - e.z95 * se;
    shape.by_time && lower > STEEP_RATIO.ln().max(slower_cut)
}

/// For each case, how many steep cases in a row (by size, in its group
/// and placement) it stands in; 0 where it is not steep.
pub fn run_lengths(layout: &Layout, shapes: &[CaseShape], steep: &[bool]) -> Vec<usize> {
    let mut out = vec![0; shapes.len()];
    let mut done = vec![false; shapes.len()];
    for i in 0..shapes.len() {
        if done[i] {
            continue;
        }
        let (series, _) = layout.series_of(shapes, i);
        for &j in series {
            done[j] = true;
        }
        for run in series.split(|&j| !steep[j]) {
            for &j in run {
                out[j] = run.len();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(size: u64) -> CaseShape {
        CaseShape {
            group: 0,
            size_bytes: size,
            in_place: false,
            by_time: true,
            base_time_us: 0.5,
        }
    }

    #[test]
    fn runs_are_counted_along_each_series() {
        let shapes: Vec<CaseShape> = (0..6).map(|k| shape(8 << k)).collect();
        let steep = [true, true, false, true, true, true];
        let l = Layout::new(&shapes);
        assert_eq!(run_lengths(&l, &shapes, &steep), [2, 2, 0, 3, 3, 3]);
    }
}
