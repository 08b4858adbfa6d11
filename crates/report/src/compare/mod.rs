//! `collbench compare BASE NEW`: matches cases present in both (same op,
//! type, redop, root, size and placement) and judges NEW against BASE,
//! knowing the noise of each case.
//!
//! * [`noise`]: each case's NEW/BASE ratio with its standard error, from
//!   the spread across runs, per-iteration statistics or the log's own
//!   scatter.
//! * [`rule`]: thresholds, intervals, two adjacent cases, pooling per op.
//! * `table`: the text tables and lines.
//! * [`gate`]: correctness first (wrong results, crash lines, cut logs).
//! * [`command`]: the command: each side's runs read, gated, compared.
//!
//! "Bandwidth" is busbw where the op's bus factor is known, else algbw
//! (OSU, see [`crate::metrics`]); tests that measure no time (OSU bandwidth
//! tests) are judged on bandwidth at every size, tests that report no
//! bandwidth on time at every size. When a log repeats a case (`-N`), the
//! first occurrence in each run counts. Where both runs say what NCCL ran,
//! [`crate::compare_explain`] names changes of algorithm, protocol and
//! channels.

pub mod adjacent;
pub mod command;
pub mod gate;
pub mod noise;
pub mod rule;
pub mod shape;
pub mod steep;
mod table;

pub use noise::{Estimate, NoiseSource};
pub use rule::{
    Rule, Unsure, Verdict, LATENCY_REGIME_BELOW_BYTES, TIME_FLOOR_US, TIME_THRESHOLD_FACTOR,
};
pub use table::NCCL_CHANGE;

use crate::metrics;
use crate::units;
use adjacent::Layout;
use collbench_core::{Placement, Record};
use noise::Sample;
use rule::CaseShape;
use std::collections::BTreeMap;

/// Sizes from this up count in the overall bandwidth ratio.
pub const OVERALL_BW_FROM_BYTES: u64 = 64 << 20;
/// Sizes up to this count in the overall time ratio.
pub const OVERALL_TIME_UP_TO_BYTES: u64 = 64 << 10;

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
    /// The first run's figures of each side.
    pub base: Placement,
    pub new: Placement,
    /// Whether the case was judged on time (latency regime).
    pub by_time: bool,
    /// Which bandwidth the op has: `busbw`, or `algbw` where no bus factor
    /// is known.
    pub bw_name: &'static str,
    /// `ln(t_new / t_base)` with its standard error and source.
    pub estimate: Estimate,
    pub verdict: Verdict,
}

impl Row {
    /// NEW/BASE busbw of the first runs (NaN when BASE is 0).
    pub fn busbw_ratio(&self) -> f64 {
        ratio(self.new.busbw_gbps, self.base.busbw_gbps)
    }

    /// NEW/BASE time of the first runs (NaN when BASE is 0).
    pub fn time_ratio(&self) -> f64 {
        ratio(self.new.time_us, self.base.time_us)
    }

    /// NEW/BASE of the op's bandwidth ([`Row::bw_name`]) of the first runs.
    pub fn bw_ratio(&self) -> f64 {
        ratio(bw(self.bw_name, &self.new), bw(self.bw_name, &self.base))
    }

    /// NEW/BASE of the judged figure as the verdict saw it (medians where
    /// compared, means across runs): time where judged on time, else
    /// bandwidth.
    pub fn judged_ratio(&self) -> f64 {
        let d = self.estimate.log_ratio;
        if self.by_time {
            d.exp()
        } else {
            (-d).exp()
        }
    }

    /// The 95% interval of [`Row::judged_ratio`]; `None` without a noise
    /// estimate.
    pub fn interval(&self) -> Option<(f64, f64)> {
        let half = self.estimate.z95 * self.estimate.se?;
        let d = self.estimate.log_ratio;
        Some(if self.by_time {
            ((d - half).exp(), (d + half).exp())
        } else {
            ((-d - half).exp(), (-d + half).exp())
        })
    }

    /// The judged figure's name: `time`, `busbw` or `algbw`, with `p50`
    /// where medians were compared.
    pub fn judged_on(&self) -> String {
        let name = if self.by_time { "time" } else { self.bw_name };
        match self.estimate.source {
            Some(NoiseSource::Iterations { median: true, .. }) => format!("{name} (p50)"),
            _ => name.to_string(),
        }
    }

    /// `all_reduce float sum 8 GiB out-of-place`.
    pub fn short_name(&self) -> String {
        key_name(&self.key())
    }

    fn key(&self) -> Key<'_> {
        (
            &self.op,
            &self.dtype,
            &self.redop,
            self.root,
            self.size_bytes,
            self.placement,
        )
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

/// What the comparison as a whole came to (before correctness, which
/// `compare_main` judges first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    /// No case regressed, and no op hides a drop in its noise.
    NoRegression,
    /// At least one case regressed (with an adjacent one).
    Regression,
    /// No case regressed, but an op's pooled estimate is beyond the
    /// threshold and its cases cannot confirm it.
    CannotTell,
}

/// An op whose pooled drop its cases cannot confirm.
#[derive(Debug, Clone, PartialEq)]
pub struct HiddenDrop {
    /// `all_reduce float sum`.
    pub op: String,
    /// Pooled NEW/BASE bandwidth.
    pub bw_ratio: f64,
    /// Its 95% interval.
    pub interval: (f64, f64),
    pub cases: usize,
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
    /// Runs on each side.
    pub runs: (usize, usize),
    /// Ops whose pooled bandwidth drops beyond the threshold with no case
    /// confirming it.
    pub hidden: Vec<HiddenDrop>,
}

/// A case: op, type, redop, root, size and placement, borrowed from the
/// records (cloning them for every case of a 65,536-row log cost more
/// than the comparison).
type Key<'a> = (&'a str, &'a str, &'a str, i64, u64, &'static str);

/// Each case's first occurrence in one run, in the run's order.
fn cases(records: &[Record]) -> BTreeMap<Key<'_>, (usize, &Placement)> {
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
                c.op.as_str(),
                c.dtype.as_str(),
                c.redop.as_str(),
                c.root,
                c.size_bytes,
                placement,
            );
            out.entry(key).or_insert_with(|| {
                order += 1;
                (order, p)
            });
        }
    }
    out
}

/// Compares one run a side (see [`compare_runs`]).
pub fn compare(base: &[Record], new: &[Record], threshold_pct: f64) -> Comparison {
    compare_runs(&[base], &[new], threshold_pct)
}

/// A case's placements in every run of one side (runs that lack it are
/// left out).
type Cases<'a> = BTreeMap<Key<'a>, Vec<(usize, &'a Placement)>>;

fn side_cases<'a>(runs: &[&'a [Record]]) -> Cases<'a> {
    let mut out: Cases = BTreeMap::new();
    for run in runs {
        for (k, v) in cases(run) {
            // Sized once: a default Vec of a large element starts at four.
            out.entry(k)
                .or_insert_with(|| Vec::with_capacity(runs.len()))
                .push(v);
        }
    }
    out
}

/// Names of the cases of `a` missing from `b`, in `a`'s order.
fn one_side(a: &Cases, b: &Cases) -> Vec<String> {
    let mut v: Vec<(usize, String)> = a
        .iter()
        .filter(|(k, _)| !b.contains_key(*k))
        .map(|(k, runs)| (runs[0].0, key_name(k)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// Each run's placement of one case on one side, with its order.
type RunsOfCase<'a> = [(usize, &'a Placement)];

/// The op groups (op, type, redop, root) met so far, in order; a case's
/// group is its index in `order` (found through `index`).
#[derive(Default)]
struct Groups<'a> {
    order: Vec<(String, String, String, i64)>,
    index: std::collections::HashMap<(&'a str, &'a str, &'a str, i64), usize>,
}

impl<'a> Groups<'a> {
    /// The index of `key`'s group, added when new.
    fn of(&mut self, key: (&'a str, &'a str, &'a str, i64)) -> usize {
        if let Some(&g) = self.index.get(&key) {
            return g;
        }
        let (op, dtype, redop, root) = key;
        self.order
            .push((op.to_string(), dtype.to_string(), redop.to_string(), root));
        self.index.insert(key, self.order.len() - 1);
        self.order.len() - 1
    }
}

/// A matched case: its shape for the rule, its estimate and its row
/// (verdict still to come); `None` when a side has no figure to compare.
fn matched_case<'a>(
    key: Key<'a>,
    b: &RunsOfCase<'a>,
    n: &RunsOfCase<'a>,
    groups: &mut Groups<'a>,
) -> Option<(CaseShape, Row)> {
    let (op, dtype, redop, root, size_bytes, placement) = key;
    let shown = metrics::shown(op);
    let bw_name = if shown.busbw { "busbw" } else { "algbw" };
    let has_bw = shown.busbw || shown.algbw;
    let base0 = b[0].1;
    let by_time = shown.time
        && (!has_bw || size_bytes < LATENCY_REGIME_BELOW_BYTES || bw(bw_name, base0) <= 0.0);
    let group = groups.of((op, dtype, redop, root));
    // Medians only where every run of both sides has them.
    let median = b
        .iter()
        .chain(n)
        .all(|(_, p)| p.stats.is_some_and(|s| s.samples > 1 && s.p50_us > 0.0));
    let samples = |side: &RunsOfCase| -> Option<Vec<Sample>> {
        side.iter()
            .map(|(_, p)| Sample::of(p, bw(bw_name, p), median, by_time))
            .collect()
    };
    let estimate = noise::estimate(&samples(b)?, &samples(n)?);
    let shape = CaseShape {
        group,
        size_bytes,
        in_place: placement == "in-place",
        by_time,
        base_time_us: base0.time_us,
    };
    let row = Row {
        op: op.to_string(),
        dtype: dtype.to_string(),
        redop: redop.to_string(),
        root,
        size_bytes,
        placement,
        base: base0.clone(),
        new: n[0].1.clone(),
        by_time,
        bw_name,
        estimate,
        verdict: Verdict::Same,
    };
    Some((shape, row))
}

/// Compares every case present in both sides, in BASE's order. Each side
/// is one or more runs of the same sweep; a case's figure on a side is the
/// mean of its runs' (in log), its noise their spread (see [`noise`]).
pub fn compare_runs(base: &[&[Record]], new: &[&[Record]], threshold_pct: f64) -> Comparison {
    let (base_cases, new_cases) = (side_cases(base), side_cases(new));
    let mut matched: Vec<(usize, Key, &RunsOfCase, &RunsOfCase)> = base_cases
        .iter()
        .filter_map(|(k, b)| Some((b[0].0, *k, b.as_slice(), new_cases.get(k)?.as_slice())))
        .collect();
    matched.sort_by_key(|m| m.0);
    let mut groups = Groups::default();
    let (shapes, mut rows): (Vec<CaseShape>, Vec<Row>) = matched
        .into_iter()
        .filter_map(|(_, key, b, n)| matched_case(key, b, n, &mut groups))
        .unzip();
    let rule = Rule { threshold_pct };
    let layout = Layout::new(&shapes);
    let estimates: Vec<Estimate> = rows.iter().map(|r| r.estimate).collect();
    let estimates = rule::with_log_scatter(&layout, &shapes, &estimates);
    let verdicts = rule::judge(&rule, &layout, &shapes, &estimates);
    for ((row, e), v) in rows.iter_mut().zip(&estimates).zip(verdicts) {
        row.estimate = *e;
        row.verdict = v;
    }
    let judged = Judged {
        layout: &layout,
        shapes: &shapes,
        estimates: &estimates,
        rows: &rows,
    };
    let hidden = hidden_drops(&rule, &judged, &groups.order);
    Comparison {
        threshold_pct,
        rows,
        only_base: one_side(&base_cases, &new_cases),
        only_new: one_side(&new_cases, &base_cases),
        runs: (base.len(), new.len()),
        hidden,
    }
}

/// The cases of a comparison once judged, for the per-op pooling.
struct Judged<'a> {
    layout: &'a Layout,
    shapes: &'a [CaseShape],
    estimates: &'a [Estimate],
    rows: &'a [Row],
}

/// Ops whose pooled estimate is beyond the threshold while none of their
/// cases regressed.
fn hidden_drops(
    rule: &Rule,
    j: &Judged,
    groups: &[(String, String, String, i64)],
) -> Vec<HiddenDrop> {
    let z = collbench_core::adaptive::normal_quantile(0.975);
    // Per group, in one pass: a case regressed; only the log's scatter
    // said a case's noise.
    let (mut regressed, mut log_only) = (vec![false; groups.len()], vec![false; groups.len()]);
    for ((r, s), e) in j.rows.iter().zip(j.shapes).zip(j.estimates) {
        regressed[s.group] |= r.verdict == Verdict::Regression;
        log_only[s.group] |= e.log_only;
    }
    let candidates: Vec<rule::Pooled> = rule::pool(rule, j.shapes, j.estimates)
        .into_iter()
        .filter(|p| {
            p.beyond
                && !regressed[p.group]
                && rule::adjacent_estimates_beyond(rule, j.layout, j.shapes, j.estimates, p.group)
        })
        .collect();
    // As for regressions (rule::judge): where only the log's scatter says
    // the noise, one op's drop may be a burst during it; only a drop in a
    // third of the ops or more is one the log cannot rule out.
    let broad = candidates.len() >= groups.len().div_ceil(3).max(1);
    candidates
        .into_iter()
        .filter(|p| broad || !log_only[p.group])
        .map(|p| {
            let (op, dtype, redop, root) = &groups[p.group];
            let mut name = format!("{op} {dtype}");
            if !redop.is_empty() && redop != "none" {
                name = format!("{name} {redop}");
            }
            if *root >= 0 {
                name = format!("{name} root {root}");
            }
            HiddenDrop {
                op: name,
                bw_ratio: (-p.log_ratio).exp(),
                interval: (
                    (-p.log_ratio - z * p.se).exp(),
                    (-p.log_ratio + z * p.se).exp(),
                ),
                cases: p.cases,
            }
        })
        .collect()
}

/// `all_reduce float sum 8 GiB out-of-place`.
fn key_name(k: &Key) -> String {
    let (op, dtype, redop, root, size, placement) = k;
    let mut s = format!("{op} {dtype}");
    if !redop.is_empty() && *redop != "none" {
        s = format!("{s} {redop}");
    }
    if *root >= 0 {
        s = format!("{s} root {root}");
    }
    format!("{s} {} {placement}", units::bytes(*size))
}

impl Comparison {
    /// Rows that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &Row> + Clone {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
    }

    /// Rows that cannot tell.
    pub fn unsure(&self) -> impl Iterator<Item = &Row> + Clone {
        self.rows
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::CannotTell(_)))
    }

    /// What the comparison came to.
    pub fn overall(&self) -> Overall {
        if self.regressions().next().is_some() {
            Overall::Regression
        } else if !self.hidden.is_empty() {
            Overall::CannotTell
        } else {
            Overall::NoRegression
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
