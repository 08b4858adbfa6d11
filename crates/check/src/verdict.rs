//! Verdicts: measured figures against a baseline's, one line per check,
//! and the overall status with its exit code.
//!
//! Bandwidth lines compare out-of-place busbw at the baseline's stated
//! size (never an average over sizes, which small sizes drag down).
//! ratio = measured / expected: PASS at or above `warn_fraction`, WARN at
//! or above `fail_fraction`, FAIL below. Latency lines compare the time at
//! a small size with `max_time_us`: PASS up to it, WARN up to
//! `max_time_us / fail_fraction`, FAIL beyond (ratio = max / measured).
//! Any wrong element is a FAIL whatever the speed. A part of the job
//! that could not be judged (a case the baseline expects that did not
//! run, pair tests that could not run, a host no test measured) is
//! INCOMPLETE: never a PASS on partial evidence, and worse than a WARN,
//! since what was not judged may be broken; a FAIL still wins, since
//! what failed is known to be broken.

use crate::battery::Measured;
use collbench_core::size::format_size;
use collbench_core::Explanation;
use serde::Serialize;

/// A verdict, ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Measured, nothing to compare with (no baseline figure).
    Info,
    Pass,
    Warn,
    /// Part of the job could not be judged (see the module doc).
    Incomplete,
    Fail,
}

impl Status {
    /// The exit code the CLI gives this verdict (0 pass, 1 warn, 2 fail,
    /// 6 incomplete: 6 is `report`'s code for "written, but inputs were
    /// skipped", the same meaning),
    /// for the check JSON's `exit_code` field and for telling other ranks
    /// the verdict; the CLI's `exit.rs` maps verdicts to exit codes and
    /// tests that it agrees with this.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Info | Status::Pass => 0,
            Status::Warn => 1,
            Status::Fail => 2,
            Status::Incomplete => INCOMPLETE_CODE,
        }
    }

    /// `PASS`, `WARN`, ...
    pub fn label(self) -> &'static str {
        match self {
            Status::Info => "INFO",
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Incomplete => "INCOMPLETE",
            Status::Fail => "FAIL",
        }
    }

    /// From an exit code (how ranks other than 0 learn the verdict).
    pub fn from_exit_code(code: i32) -> Status {
        match code {
            0 => Status::Pass,
            1 => Status::Warn,
            INCOMPLETE_CODE => Status::Incomplete,
            _ => Status::Fail,
        }
    }
}

/// The exit code of [`Status::Incomplete`].
pub const INCOMPLETE_CODE: i32 = 6;

/// What a line measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Bus bandwidth, GB/s (higher is better).
    BusbwGbps,
    /// Time per operation, microseconds (lower is better).
    TimeUs,
    /// Pairwise sendrecv self-consistency (pairs below the reference).
    SlowPairs,
}

/// One line of the verdict table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub op: String,
    pub dtype: String,
    pub size_bytes: u64,
    pub metric: Metric,
    /// Measured figure in the metric's unit; `None` when not measured.
    pub measured: Option<f64>,
    /// Expected figure (busbw) or ceiling (time); `None` without a baseline.
    pub expected: Option<f64>,
    /// Figure of merit, 1.0 = exactly as expected, below 1 = worse.
    pub ratio: Option<f64>,
    pub wrong: u64,
    pub status: Status,
    /// Why the line is not PASS, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the library reported it ran for the case (NCCL: algorithm,
    /// protocol and channels per kernel, see docs/explain.md); absent where
    /// the backend cannot say (CPU, MPI) or the case did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
}

/// The baseline's fractions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fractions {
    pub warn: f64,
    pub fail: f64,
}

/// The line of measured case `m`: `measured` (its figure for `metric`)
/// judged `status` against `expected`. Any wrong element makes it a FAIL
/// whatever the figure.
fn measured_line(
    m: &Measured,
    metric: Metric,
    measured: f64,
    expected: Option<f64>,
    ratio: Option<f64>,
    status: Status,
    note: Option<String>,
) -> Line {
    let (status, note) = if m.wrong > 0 {
        let why = format!("{} wrong elements: results are not correct", m.wrong);
        (Status::Fail, Some(why))
    } else {
        (status, note)
    };
    Line {
        op: m.op.clone(),
        dtype: m.dtype.clone(),
        size_bytes: m.size_bytes,
        metric,
        measured: Some(measured),
        expected,
        ratio,
        wrong: m.wrong,
        status,
        note,
        explain: m.explain.clone(),
    }
}

/// Judges a bandwidth measurement against `expected_gbps` (none: INFO).
pub fn judge_busbw(m: &Measured, expected_gbps: Option<f64>, f: Fractions) -> Line {
    let ratio = expected_gbps.map(|e| m.busbw_gbps / e);
    let status = match ratio {
        None => Status::Info,
        Some(r) if r >= f.warn => Status::Pass,
        Some(r) if r >= f.fail => Status::Warn,
        Some(_) => Status::Fail,
    };
    let note = match (status, ratio) {
        (Status::Warn | Status::Fail, Some(r)) => Some(format!(
            "busbw {:.2} GB/s is {:.1}% of the expected {:.2} GB/s",
            m.busbw_gbps,
            r * 100.0,
            expected_gbps.unwrap_or_default()
        )),
        _ => None,
    };
    let metric = Metric::BusbwGbps;
    measured_line(m, metric, m.busbw_gbps, expected_gbps, ratio, status, note)
}

/// Judges a small-size time against `max_time_us` (none: INFO).
pub fn judge_latency(m: &Measured, max_time_us: Option<f64>, f: Fractions) -> Line {
    let ratio = max_time_us.map(|max| {
        if m.time_us > 0.0 {
            max / m.time_us
        } else {
            1.0
        }
    });
    let status = match max_time_us {
        None => Status::Info,
        Some(max) if m.time_us <= max => Status::Pass,
        Some(max) if m.time_us <= max / f.fail => Status::Warn,
        Some(_) => Status::Fail,
    };
    let note = match (status, max_time_us) {
        (Status::Warn | Status::Fail, Some(max)) => Some(format!(
            "time {:.1} us is over the {max:.1} us ceiling",
            m.time_us
        )),
        _ => None,
    };
    measured_line(
        m,
        Metric::TimeUs,
        m.time_us,
        max_time_us,
        ratio,
        status,
        note,
    )
}

/// A line for a case that did not run: INCOMPLETE when the baseline
/// expected a figure (a missing op is not judged, so not healthy), INFO
/// otherwise.
pub fn not_measured(
    op: &str,
    dtype: &str,
    size_bytes: u64,
    metric: Metric,
    expected: Option<f64>,
    why: &str,
) -> Line {
    Line {
        op: op.to_string(),
        dtype: dtype.to_string(),
        size_bytes,
        metric,
        measured: None,
        expected,
        ratio: None,
        wrong: 0,
        status: if expected.is_some() {
            Status::Incomplete
        } else {
            Status::Info
        },
        note: Some(format!("not measured: {why}")),
        explain: None,
    }
}

/// The worst status of all lines (PASS when all are INFO).
pub fn overall(lines: &[Line]) -> Status {
    lines
        .iter()
        .map(|l| l.status)
        .max()
        .unwrap_or(Status::Pass)
        .max(Status::Pass)
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// The verdict table as text, one row per line.
pub fn render_table(lines: &[Line]) -> String {
    let mut out = format!(
        "{:<16} {:>8} {:<10} {:>12} {:>12} {:>7} {:>7}  {}\n",
        "op", "size", "metric", "measured", "expected", "ratio", "#wrong", "verdict"
    );
    for l in lines {
        let (metric, digits) = match l.metric {
            Metric::BusbwGbps => ("busbw GB/s", 2),
            Metric::TimeUs => ("time us", 1),
            Metric::SlowPairs => ("slow pairs", 0),
        };
        out += &format!(
            "{:<16} {:>8} {:<10} {:>12} {:>12} {:>7} {:>7}  {}\n",
            l.op,
            format_size(l.size_bytes),
            metric,
            fmt_opt(l.measured, digits),
            match l.metric {
                Metric::TimeUs => l
                    .expected
                    .map(|e| format!("<= {e:.1}"))
                    .unwrap_or("-".into()),
                _ => fmt_opt(l.expected, digits),
            },
            fmt_opt(l.ratio, 2),
            l.wrong,
            l.status.label(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Fractions = Fractions {
        warn: 0.9,
        fail: 0.75,
    };

    fn m(busbw: f64, time_us: f64, wrong: u64) -> Measured {
        Measured {
            op: "all_reduce".into(),
            dtype: "float".into(),
            size_bytes: 8 << 30,
            busbw_gbps: busbw,
            busbw_in_place_gbps: busbw,
            time_us,
            wrong,
            explain: None,
            arrival: None,
            nccl_path: None,
        }
    }

    #[test]
    fn bandwidth_thresholds() {
        use Status::{Pass, Warn};
        for (busbw, want) in [(95.0, Pass), (90.0, Pass), (80.0, Warn)] {
            let got = judge_busbw(&m(busbw, 1.0, 0), Some(100.0), F).status;
            assert_eq!(got, want, "busbw {busbw} against 100");
        }
        let fail = judge_busbw(&m(50.0, 1.0, 0), Some(100.0), F);
        assert_eq!(fail.status, Status::Fail);
        assert_eq!(fail.ratio, Some(0.5));
        assert!(fail.note.unwrap().contains("50.0%"));
        assert_eq!(judge_busbw(&m(1.0, 1.0, 0), None, F).status, Status::Info);
    }

    #[test]
    fn wrong_results_always_fail() {
        let l = judge_busbw(&m(500.0, 1.0, 3), Some(100.0), F);
        assert_eq!(l.status, Status::Fail);
        assert!(l.note.unwrap().contains("3 wrong"));
        assert_eq!(judge_busbw(&m(1.0, 1.0, 1), None, F).status, Status::Fail);
    }

    #[test]
    fn latency_ceiling() {
        use Status::{Fail, Pass, Warn};
        for (time_us, want) in [(12.0, Pass), (19.0, Warn), (21.0, Fail)] {
            let got = judge_latency(&m(0.0, time_us, 0), Some(15.0), F).status;
            assert_eq!(got, want, "{time_us} us against 15");
        }
    }

    #[test]
    fn overall_is_the_worst_and_maps_to_exit_codes() {
        let p = judge_busbw(&m(95.0, 1.0, 0), Some(100.0), F);
        let w = judge_busbw(&m(80.0, 1.0, 0), Some(100.0), F);
        let i = judge_busbw(&m(80.0, 1.0, 0), None, F);
        assert_eq!(overall(std::slice::from_ref(&i)), Status::Pass);
        assert_eq!(overall(&[p.clone(), i]).exit_code(), 0);
        assert_eq!(overall(&[p, w.clone()]).exit_code(), 1);
        let missing = not_measured("alltoall", "float", 8, Metric::BusbwGbps, Some(1.0), "x");
        assert_eq!(missing.status, Status::Incomplete);
        // A FAIL outranks a part not judged; a part not judged outranks
        // a WARN (what was not judged may be broken).
        assert_eq!(overall(&[w.clone(), missing.clone()]).exit_code(), 6);
        let f = judge_busbw(&m(10.0, 1.0, 0), Some(100.0), F);
        assert_eq!(overall(&[missing, f]), Status::Fail);
    }

    #[test]
    fn every_status_comes_back_from_its_exit_code() {
        for s in [Status::Pass, Status::Warn, Status::Incomplete, Status::Fail] {
            assert_eq!(Status::from_exit_code(s.exit_code()), s, "{s:?}");
        }
        assert_eq!(Status::Incomplete.label(), "INCOMPLETE");
    }

    #[test]
    fn table_shows_measured_expected_ratio_and_verdict() {
        let t = render_table(&[judge_busbw(&m(80.0, 1.0, 0), Some(100.0), F)]);
        let row = t.lines().nth(1).unwrap();
        for part in ["all_reduce", "8G", "80.00", "100.00", "0.80", "WARN"] {
            assert!(row.contains(part), "{part} missing in {row}");
        }
    }
}
