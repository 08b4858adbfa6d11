//! Per-iteration timing (`-I 1`) in nccl-tests' text layout: its report
//! line under the run settings, its wider table header, and four cells
//! (i_min i_max i_p99 i_cv%) after each placement's #wrong. The same
//! summary feeds `-J`'s `*_per_iter` objects.

use crate::units::fixed_width;
use collbench_core::Placement;

/// nccl-tests' summary of per-iteration times (microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterSummary {
    pub min: f64,
    pub max: f64,
    pub avg: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    /// Population standard deviation.
    pub stdev: f64,
    /// stdev / avg in percent (0 when avg is 0).
    pub cv_pct: f64,
}

/// The summary of `times` after the first `skip` (at least one time is
/// always kept), with nccl-tests' nearest-rank percentiles; `None` when
/// there are no times.
pub fn summarize(times: &[f64], skip: usize) -> Option<IterSummary> {
    if times.is_empty() {
        return None;
    }
    let skip = skip.min(times.len() - 1);
    let mut sorted = times[skip..].to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let pct = |q: usize| sorted[(n - 1).min((n * q).div_ceil(100).saturating_sub(1))];
    let avg = sorted.iter().sum::<f64>() / n as f64;
    let stdev = (sorted.iter().map(|t| (t - avg).powi(2)).sum::<f64>() / n as f64).sqrt();
    Some(IterSummary {
        min: sorted[0],
        max: sorted[n - 1],
        avg,
        p50: sorted[n / 2],
        p95: pct(95),
        p99: pct(99),
        stdev,
        cv_pct: if avg > 0.0 { stdev / avg * 100.0 } else { 0.0 },
    })
}

/// The `# Per-Iteration Report` line nccl-tests prints under the run
/// settings (with its trailing space).
pub fn report_line(skip: u64) -> String {
    let mut s =
        String::from("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows");
    if skip > 0 {
        s += &format!("; summary skips first {skip} iterations");
    }
    s + " \n"
}

/// The three header lines of the `-I` table (after the leading `#`).
pub(super) fn header(time: &str, pad: usize, label: &str, fmt: &str) -> String {
    let mut s = format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n",
        "", "", "", "", ""
    );
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {:>pad$}\n",
        "size", "count", "type", "redop", "root",
        time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
        time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", label
    );
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {:>pad$}\n",
        "(B)", "(elements)", "", "", "",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", fmt
    );
    s
}

/// One placement's four cells; `N/A` where no per-iteration times were
/// kept.
pub(super) fn cells(p: Option<&Placement>, skip: u32) -> String {
    match p.and_then(|p| summarize(&p.iter_times_us, skip as usize)) {
        Some(st) => format!(
            "  {}  {}  {}  {}",
            fixed_width(st.min, 7),
            fixed_width(st.max, 7),
            fixed_width(st.p99, 7),
            fixed_width(st.cv_pct, 7)
        ),
        None => format!("  {:>7}  {:>7}  {:>7}  {:>7}", "N/A", "N/A", "N/A", "N/A"),
    }
}

/// Width the four cells add per placement.
pub(super) const CELLS_WIDTH: usize = 4 * 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_skip_leaves_one() {
        let t: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = summarize(&t, 0).unwrap();
        assert_eq!(
            (s.min, s.max, s.p50, s.p95, s.p99),
            (1.0, 10.0, 6.0, 10.0, 10.0)
        );
        assert!((s.avg - 5.5).abs() < 1e-12);
        assert!((s.stdev - 8.25f64.sqrt()).abs() < 1e-12);
        let s = summarize(&t, 8).unwrap();
        assert_eq!((s.min, s.max), (9.0, 10.0));
        // Never skips everything.
        assert_eq!(summarize(&t, 50).unwrap().min, 10.0);
        assert!(summarize(&[], 0).is_none());
        let flat = summarize(&[0.0, 0.0], 0).unwrap();
        assert_eq!(flat.cv_pct, 0.0);
    }

    #[test]
    fn report_line_names_the_skip() {
        assert_eq!(
            report_line(0),
            "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows \n"
        );
        assert!(report_line(3).ends_with("; summary skips first 3 iterations \n"));
    }
}
