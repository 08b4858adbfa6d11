//! `collbench compare BASE NEW`: matches cases present in both (same op,
//! type, redop, root, size and placement) and judges NEW against BASE.
//!
//! The rule, chosen so that timing noise at small sizes does not fail CI:
//! * **Bandwidth regime** (size >= 1 MiB): a regression when NEW busbw is
//!   below BASE busbw by more than the threshold (default 5%).
//! * **Latency regime** (size < 1 MiB): busbw there is tiny and printed with
//!   two decimals, so time is judged instead, and only when it is slower by
//!   more than twice the threshold **and** by more than 5 µs in absolute
//!   terms: a 12 µs call that takes 13 µs is noise, not a regression.
//!
//! Improvements are marked the same way in the other direction. When a log
//! repeats a case (`-N`), the first occurrence counts.
//!
//! "Bandwidth" is busbw where the op's bus factor is known, else algbw
//! (OSU, see [`crate::metrics`]); tests that measure no time (OSU bandwidth
//! tests) are judged on bandwidth at every size, tests that report no
//! bandwidth on time at every size.
//!
//! Besides the per-case table, a comparison gives an overall line (per op,
//! the geometric mean of NEW/BASE bandwidth at sizes >= 64 MiB and of
//! NEW/BASE time at sizes <= 64 KiB), the cases present on one side only,
//! and the regressions as a table of their own. Where both runs say what
//! NCCL ran, [`crate::compare_explain`] names changes of algorithm,
//! protocol and channels.

use crate::metrics;
use crate::render::{markdown, Table};
use crate::units;
use collbench_core::{Placement, Record};
use std::collections::BTreeMap;

/// Header of the column naming a change in NCCL's choice
/// (algorithm/protocol/channels, see [`crate::compare_explain`]).
pub const NCCL_CHANGE: &str = "NCCL base -> new";

/// Sizes from this up count in the overall bandwidth ratio.
pub const OVERALL_BW_FROM_BYTES: u64 = 64 << 20;
/// Sizes up to this count in the overall time ratio.
pub const OVERALL_TIME_UP_TO_BYTES: u64 = 64 << 10;

/// Sizes below this are judged on time (latency regime).
pub const LATENCY_REGIME_BELOW_BYTES: u64 = 1 << 20;
/// In the latency regime a slowdown must also exceed this many µs.
pub const TIME_FLOOR_US: f64 = 5.0;
/// In the latency regime the time threshold is this many times the busbw one.
pub const TIME_THRESHOLD_FACTOR: f64 = 2.0;

/// What a compared case came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Same,
    Regression,
    Improved,
}

/// One case present in both inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub op: String,
    pub dtype: String,
    pub redop: String,
    pub root: i64,
    pub size_bytes: u64,
    /// `out-of-place` or `in-place`.
    pub placement: &'static str,
    pub base: Placement,
    pub new: Placement,
    /// Whether the case was judged on time (latency regime).
    pub by_time: bool,
    /// Which bandwidth the op has: `busbw`, or `algbw` where no bus factor
    /// is known.
    pub bw_name: &'static str,
    pub verdict: Verdict,
}

impl Row {
    /// NEW/BASE busbw (NaN when BASE is 0).
    pub fn busbw_ratio(&self) -> f64 {
        ratio(self.new.busbw_gbps, self.base.busbw_gbps)
    }

    /// NEW/BASE time (NaN when BASE is 0).
    pub fn time_ratio(&self) -> f64 {
        ratio(self.new.time_us, self.base.time_us)
    }

    /// NEW/BASE of the op's bandwidth ([`Row::bw_name`]).
    pub fn bw_ratio(&self) -> f64 {
        ratio(bw(self.bw_name, &self.new), bw(self.bw_name, &self.base))
    }

    /// `all_reduce float sum 8 GiB out-of-place`.
    pub fn short_name(&self) -> String {
        key_name(&(
            self.op.clone(),
            self.dtype.clone(),
            self.redop.clone(),
            self.root,
            self.size_bytes,
            self.placement,
        ))
    }

    /// `all_reduce float sum 8 GiB (8589934592 B) out-of-place`.
    pub fn name(&self) -> String {
        let mut s = format!("{} {}", self.op, self.dtype);
        if !self.redop.is_empty() {
            s = format!("{s} {}", self.redop);
        }
        if self.root >= 0 {
            s = format!("{s} root {}", self.root);
        }
        format!(
            "{s} {} ({} B) {}",
            units::bytes(self.size_bytes),
            self.size_bytes,
            self.placement
        )
    }
}

fn bw(name: &str, p: &Placement) -> f64 {
    if name == "busbw" {
        p.busbw_gbps
    } else {
        p.algbw_gbps
    }
}

fn ratio(new: f64, base: f64) -> f64 {
    if base > 0.0 {
        new / base
    } else {
        f64::NAN
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub threshold_pct: f64,
    pub rows: Vec<Row>,
    /// Cases (`op type redop size placement`) only BASE measured.
    pub only_base: Vec<String>,
    /// Cases only NEW measured.
    pub only_new: Vec<String>,
}

type Key = (String, String, String, i64, u64, &'static str);

fn cases(records: &[Record]) -> BTreeMap<Key, (usize, Placement)> {
    let mut out = BTreeMap::new();
    let mut order = 0;
    for c in records.iter().flat_map(|r| &r.results) {
        for (name, p) in c.placements() {
            let placement = if name == "in_place" {
                "in-place"
            } else {
                "out-of-place"
            };
            let key = (
                c.op.clone(),
                c.dtype.clone(),
                c.redop.clone(),
                c.root,
                c.size_bytes,
                placement,
            );
            out.entry(key).or_insert_with(|| {
                order += 1;
                (order, p.clone())
            });
        }
    }
    out
}

/// Compares every case present in both `base` and `new`, in BASE's order.
pub fn compare(base: &[Record], new: &[Record], threshold_pct: f64) -> Comparison {
    let t = threshold_pct / 100.0;
    let new_cases = cases(new);
    let base_cases = cases(base);
    let one_side = |a: &BTreeMap<Key, (usize, Placement)>,
                    b: &BTreeMap<Key, (usize, Placement)>| {
        let mut v: Vec<(usize, String)> = a
            .iter()
            .filter(|(k, _)| !b.contains_key(*k))
            .map(|(k, (order, _))| (*order, key_name(k)))
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect::<Vec<_>>()
    };
    let only_base = one_side(&base_cases, &new_cases);
    let only_new = one_side(&new_cases, &base_cases);
    let mut rows: Vec<(usize, Row)> = base_cases
        .into_iter()
        .filter_map(|(key, (order, b))| {
            let (_, n) = new_cases.get(&key)?;
            let (op, dtype, redop, root, size_bytes, placement) = key;
            let shown = metrics::shown(&op);
            let bw_name = if shown.busbw { "busbw" } else { "algbw" };
            let has_bw = shown.busbw || shown.algbw;
            let by_time = shown.time
                && (!has_bw || size_bytes < LATENCY_REGIME_BELOW_BYTES || bw(bw_name, &b) <= 0.0);
            let verdict = if by_time {
                let tt = t * TIME_THRESHOLD_FACTOR;
                let delta = n.time_us - b.time_us;
                if n.time_us > b.time_us * (1.0 + tt) && delta > TIME_FLOOR_US {
                    Verdict::Regression
                } else if n.time_us < b.time_us * (1.0 - tt) && -delta > TIME_FLOOR_US {
                    Verdict::Improved
                } else {
                    Verdict::Same
                }
            } else if bw(bw_name, n) < bw(bw_name, &b) * (1.0 - t) {
                Verdict::Regression
            } else if bw(bw_name, n) > bw(bw_name, &b) * (1.0 + t) {
                Verdict::Improved
            } else {
                Verdict::Same
            };
            Some((
                order,
                Row {
                    op,
                    dtype,
                    redop,
                    root,
                    size_bytes,
                    placement,
                    base: b,
                    new: n.clone(),
                    by_time,
                    bw_name,
                    verdict,
                },
            ))
        })
        .collect();
    rows.sort_by_key(|(order, _)| *order);
    Comparison {
        threshold_pct,
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        only_base,
        only_new,
    }
}

/// `all_reduce float sum 8 GiB out-of-place`.
fn key_name(k: &Key) -> String {
    let (op, dtype, redop, root, size, placement) = k;
    let mut s = format!("{op} {dtype}");
    if !redop.is_empty() && redop != "none" {
        s = format!("{s} {redop}");
    }
    if *root >= 0 {
        s = format!("{s} root {root}");
    }
    format!("{s} {} {placement}", units::bytes(*size))
}

/// The geometric mean of the finite, positive values; `None` if none.
fn geomean(values: impl Iterator<Item = f64>) -> Option<(f64, usize)> {
    let (sum, n) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (n > 0).then(|| ((sum / n as f64).exp(), n))
}

/// A Markdown table of `rows`: the case (op, type, redop, size), then the
/// columns `header` with each row's cells from `cells`. When NCCL's
/// algorithm, protocol or channels differ in some row (both runs
/// explained), a last column names the change there.
fn table_of<'a>(
    rows: impl Iterator<Item = &'a Row> + Clone,
    header: &[&'static str],
    numeric: &[bool],
    cells: impl Fn(&Row) -> Vec<String>,
) -> String {
    let choices = rows.clone().any(|r| r.choice_change().is_some());
    let mut header = [&["op", "type", "redop", "size"][..], header].concat();
    let mut numeric = [&[false, false, false, true][..], numeric].concat();
    if choices {
        header.push(NCCL_CHANGE);
        numeric.push(false);
    }
    let rows = rows
        .map(|r| {
            let case = [&r.op, &r.dtype, &r.redop].map(String::clone);
            let mut row = [&case[..], &[units::bytes(r.size_bytes)], &cells(r)].concat();
            if choices {
                row.push(r.choice_change().map_or_else(String::new, |c| c.cell()));
            }
            row
        })
        .collect();
    markdown::table(&Table {
        header,
        numeric,
        rows,
    })
}

impl Comparison {
    /// Rows that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &Row> + Clone {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
    }

    /// The per-case table (Markdown, readable as plain text too). When
    /// NCCL's algorithm, protocol or channels differ in some row (both runs
    /// explained), a last column names the change there.
    pub fn table(&self) -> String {
        let header = [
            "placement",
            "base bw (GB/s)",
            "new bw (GB/s)",
            "bw new/base",
            "base time (µs)",
            "new time (µs)",
            "time new/base",
            "judged on",
            "verdict",
        ];
        let numeric = [false, true, true, true, true, true, true, false, false];
        table_of(self.rows.iter(), &header, &numeric, |r| {
            vec![
                r.placement.to_string(),
                units::gbps(bw(r.bw_name, &r.base)),
                units::gbps(bw(r.bw_name, &r.new)),
                units::ratio(r.bw_ratio()),
                units::us(r.base.time_us),
                units::us(r.new.time_us),
                units::ratio(r.time_ratio()),
                if r.by_time { "time" } else { r.bw_name }.to_string(),
                match r.verdict {
                    Verdict::Same => "",
                    Verdict::Regression => "**REGRESSION**",
                    Verdict::Improved => "improved",
                }
                .to_string(),
            ]
        })
    }

    /// The regressions alone, as a table (empty when there are none).
    pub fn regression_table(&self) -> String {
        if self.regressions().next().is_none() {
            return String::new();
        }
        let header = ["bytes", "placement", "judged on", "base", "new", "new/base"];
        let numeric = [true, false, false, true, true, true];
        table_of(self.regressions(), &header, &numeric, |r| {
            let (metric, base, new, x) = if r.by_time {
                (
                    "time (µs)".to_string(),
                    units::us(r.base.time_us),
                    units::us(r.new.time_us),
                    r.time_ratio(),
                )
            } else {
                (
                    format!("{} (GB/s)", r.bw_name),
                    units::gbps(bw(r.bw_name, &r.base)),
                    units::gbps(bw(r.bw_name, &r.new)),
                    r.bw_ratio(),
                )
            };
            vec![
                r.size_bytes.to_string(),
                r.placement.to_string(),
                metric,
                base,
                new,
                units::ratio(x),
            ]
        })
    }

    /// Per op: the geometric mean of NEW/BASE bandwidth over sizes from
    /// 64 MiB up and of NEW/BASE time over sizes up to 64 KiB, e.g.
    /// `overall: all_reduce busbw x0.912 (8 cases >= 64 MiB), time x1.031 (14 cases <= 64 KiB)`.
    pub fn overall_line(&self) -> String {
        let mut ops: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !ops.contains(&r.op.as_str()) {
                ops.push(&r.op);
            }
        }
        let parts: Vec<String> = ops
            .iter()
            .map(|op| {
                let rows = || self.rows.iter().filter(move |r| r.op == *op);
                let bw_name = rows().next().map_or("busbw", |r| r.bw_name);
                let shown = metrics::shown(op);
                let mut s = op.to_string();
                if shown.busbw || shown.algbw {
                    s += &match geomean(
                        rows()
                            .filter(|r| r.size_bytes >= OVERALL_BW_FROM_BYTES)
                            .map(Row::bw_ratio),
                    ) {
                        Some((g, n)) => {
                            format!(" {bw_name} x{} ({n} cases >= 64 MiB)", units::ratio(g))
                        }
                        None => format!(" {bw_name} - (no case >= 64 MiB)"),
                    };
                }
                if shown.time {
                    s += &match geomean(
                        rows()
                            .filter(|r| r.size_bytes <= OVERALL_TIME_UP_TO_BYTES)
                            .map(Row::time_ratio),
                    ) {
                        Some((g, n)) => {
                            format!(", time x{} ({n} cases <= 64 KiB)", units::ratio(g))
                        }
                        None => ", time - (no case <= 64 KiB)".to_string(),
                    };
                }
                s
            })
            .collect();
        format!("overall (NEW/BASE, geometric mean): {}", parts.join("; "))
    }

    /// One line for CI logs: `OK: ...` or `REGRESSION: k of n cases ...`
    /// (the cases are in [`Comparison::regression_table`]).
    pub fn verdict_line(&self) -> String {
        let t = self.threshold_pct;
        let rule = format!(
            "bandwidth -{} at >= 1 MiB; time +{} and +{TIME_FLOOR_US} µs below 1 MiB",
            units::pct(t),
            units::pct(t * TIME_THRESHOLD_FACTOR)
        );
        let bad = self.regressions().count();
        if bad == 0 {
            format!(
                "OK: no regression in {} common cases ({rule})",
                self.rows.len()
            )
        } else {
            let first = self.regressions().next().map(Row::name).unwrap_or_default();
            format!(
                "REGRESSION: {bad} of {} cases ({rule}), first: {first}",
                self.rows.len()
            )
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use collbench_core::{CaseResult, Explanation};

    /// An all_reduce float sum case measured out-of-place only.
    pub(crate) fn all_reduce(size: u64, out_of_place: Placement) -> CaseResult {
        CaseResult {
            out_of_place: Some(out_of_place),
            ..CaseResult::float_sum("all_reduce", size)
        }
    }

    /// [`all_reduce`] taking `time_us` at `busbw`, with what NCCL ran.
    pub(crate) fn case(
        size: u64,
        time_us: f64,
        busbw: f64,
        explain: Option<Explanation>,
    ) -> CaseResult {
        let p = Placement {
            time_us,
            busbw_gbps: busbw,
            explain,
            ..Placement::default()
        };
        all_reduce(size, p)
    }

    fn rec(cases: &[(u64, f64, f64)]) -> Record {
        let mut r = Record::new("test");
        for &(size, time, busbw) in cases {
            r.results.push(case(size, time, busbw, None));
        }
        r
    }

    #[test]
    fn large_sizes_are_judged_on_busbw() {
        let base = rec(&[(1 << 30, 3000.0, 330.0)]);
        let c = compare(
            std::slice::from_ref(&base),
            &[rec(&[(1 << 30, 3000.0, 297.0)])],
            5.0,
        );
        assert_eq!(c.rows[0].verdict, Verdict::Regression);
        assert!(
            c.verdict_line().contains("1073741824"),
            "{}",
            c.verdict_line()
        );
        assert!(c.regression_table().contains("| 1073741824 |"));
        assert!(
            c.overall_line()
                .contains("all_reduce busbw x0.900 (1 cases >= 64 MiB)"),
            "{}",
            c.overall_line()
        );
        let c = compare(
            std::slice::from_ref(&base),
            &[rec(&[(1 << 30, 3000.0, 320.0)])],
            5.0,
        );
        assert_eq!(c.rows[0].verdict, Verdict::Same);
        let c = compare(&[base], &[rec(&[(1 << 30, 3000.0, 360.0)])], 5.0);
        assert_eq!(c.rows[0].verdict, Verdict::Improved);
    }

    #[test]
    fn small_sizes_need_relative_and_absolute_slowdown() {
        let base = rec(&[(8, 12.0, 0.0)]);
        // +50% but only +6 us... over 10% and over 5 us: a regression.
        let c = compare(std::slice::from_ref(&base), &[rec(&[(8, 18.0, 0.0)])], 5.0);
        assert_eq!(c.rows[0].verdict, Verdict::Regression);
        // +33% but only 4 us: noise.
        let c = compare(&[base], &[rec(&[(8, 16.0, 0.0)])], 5.0);
        assert_eq!(c.rows[0].verdict, Verdict::Same);
    }

    #[test]
    fn only_common_cases_are_compared() {
        let c = compare(
            &[rec(&[(8, 1.0, 0.0), (16, 1.0, 0.0)])],
            &[rec(&[(16, 1.0, 0.0)])],
            5.0,
        );
        assert_eq!(c.rows.len(), 1);
        assert!(c.verdict_line().starts_with("OK"));
    }
}
