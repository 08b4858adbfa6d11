//! One run saved twice is one run: the README's own `collbench run
//! --output X.json > X.txt` leaves a JSON record and a text log of the
//! same measurement. A folder holding both was read as two runs with zero
//! spread between them, so A against A said "REGRESSION in 46 cases".
//!
//! Two files are one run when nothing that names a run differs and
//! something does agree:
//! * **start time** (collbench JSON): equal where both carry one;
//! * **processes**: the (rank, host, pid) of every device, where both
//!   list them (collbench and nccl-tests text print `Pid ... on HOST`);
//!   two runs at once on one host cannot share a pid, and runs one after
//!   another get new ones;
//! * **figures**: the same cases, each placement's time and busbw equal
//!   to the precision the text prints (nccl-tests' fixed-width columns:
//!   two decimals, fewer for large values). Separate runs of one command
//!   differ here at once: a run's noise is far above 0.01 µs.
//!
//! The figures must always agree; besides them, an equal start time or
//! equal processes, or at least [`MIN_CASES`] cases, say it is one run
//! (a log copied under another name has no start time or pids, but its
//! figures cannot agree by chance over many cases). Two separate runs
//! with equal settings stay two: their figures, pids and start times
//! differ.

use collbench_core::{Placement, Record};
use std::collections::{BTreeMap, BTreeSet};

/// Cases whose figures must all agree when the files name no start time
/// and no process.
pub const MIN_CASES: usize = 4;

/// Why two files are one run, in words for the line that says so
/// (`same start time and figures`); `None` when they are two runs.
pub fn one_run(a: &[Record], b: &[Record]) -> Option<String> {
    if !alike_at_a_glance(a, b) {
        return None;
    }
    let mut agree = Vec::new();
    match (starts(a), starts(b)) {
        (x, y) if !x.is_empty() && !y.is_empty() && x != y => return None,
        (x, y) if !x.is_empty() && !y.is_empty() => agree.push("start time"),
        _ => {}
    }
    match (processes(a), processes(b)) {
        (x, y) if !x.is_empty() && !y.is_empty() && x != y => return None,
        (x, y) if !x.is_empty() && !y.is_empty() => agree.push("processes (host, pid)"),
        _ => {}
    }
    let (fa, fb) = (figures(a), figures(b));
    if fa.is_empty() || fa.len() != fb.len() {
        return None;
    }
    for (key, pa) in &fa {
        let pb = fb.get(key)?;
        if !close(pa.time_us, pb.time_us, 7) || !close(pa.busbw_gbps, pb.busbw_gbps, 6) {
            return None;
        }
    }
    if agree.is_empty() && fa.len() < MIN_CASES {
        return None;
    }
    agree.push("figures");
    Some(words(&agree))
}

/// The same number of rows and the same first figure: a check in
/// constant time, so a folder of many runs is not compared case by case
/// pair by pair.
fn alike_at_a_glance(a: &[Record], b: &[Record]) -> bool {
    let rows = |r: &[Record]| r.iter().map(|r| r.results.len()).sum::<usize>();
    let first = |r: &[Record]| {
        r.iter()
            .flat_map(|r| &r.results)
            .find_map(|c| c.placements().next().map(|(_, p)| p.time_us))
    };
    rows(a) == rows(b)
        && match (first(a), first(b)) {
            (Some(x), Some(y)) => close(x, y, 7),
            _ => false,
        }
}

/// `a`, `a and b`, `a, b and c`.
fn words(parts: &[&str]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn starts(records: &[Record]) -> BTreeSet<&str> {
    records
        .iter()
        .filter_map(|r| r.start_time.as_deref())
        .collect()
}

fn processes(records: &[Record]) -> BTreeSet<(u64, &str, u64)> {
    records
        .iter()
        .flat_map(|r| &r.devices)
        .filter(|d| d.pid > 0)
        .map(|d| (d.rank, d.host.as_str(), d.pid))
        .collect()
}

type CaseKey<'a> = (&'a str, &'a str, &'a str, i64, u64, &'static str);

/// Each case's first figures (as `compare` takes them).
fn figures(records: &[Record]) -> BTreeMap<CaseKey<'_>, &Placement> {
    let mut out = BTreeMap::new();
    for c in records.iter().flat_map(|r| &r.results) {
        for (name, p) in c.placements() {
            let key = (
                c.op.as_str(),
                c.dtype.as_str(),
                c.redop.as_str(),
                c.root,
                c.size_bytes,
                name,
            );
            out.entry(key).or_insert(p);
        }
    }
    out
}

/// Whether `a` and `b` are one figure as a fixed-width column of `width`
/// prints it (two decimals where they fit, then one, then none: see
/// `collbench_output::units::fixed_width`), with a little slack for the
/// rounding of the printed side.
fn close(a: f64, b: f64, width: i32) -> bool {
    if a == b {
        return true;
    }
    let v = a.abs().max(b.abs());
    // Integer digits that leave room for two decimals, one, none.
    let digits = if v < 1.0 {
        1
    } else {
        v.log10().floor() as i32 + 1
    };
    let decimals = (width - 1 - digits).clamp(0, 2);
    let half_unit = 0.5 * 10f64.powi(-decimals);
    if digits > width {
        // Exponent form (`1.2e+07`): two significant digits.
        return (a - b).abs() <= 0.051 * v;
    }
    (a - b).abs() <= half_unit * 1.02 + 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{CaseResult, DeviceInfo};

    fn run(start: Option<&str>, pid: u64, times: &[f64]) -> Record {
        let mut r = Record::new("collbench");
        r.start_time = start.map(str::to_string);
        if pid > 0 {
            r.devices = vec![DeviceInfo {
                rank: 0,
                host: "vm".into(),
                pid,
                ..DeviceInfo::default()
            }];
        }
        r.results = times
            .iter()
            .enumerate()
            .map(|(k, &t)| CaseResult {
                op: "all_reduce".into(),
                dtype: "float".into(),
                redop: "sum".into(),
                root: -1,
                size_bytes: 8 << k,
                out_of_place: Some(Placement {
                    time_us: t,
                    busbw_gbps: t / 7.0,
                    ..Placement::default()
                }),
                ..CaseResult::default()
            })
            .collect();
        r
    }

    #[test]
    fn a_record_and_its_text_are_one_run() {
        let json = run(
            Some("2026-12-07T03:00:00Z"),
            42,
            &[1.8432, 26.1873, 12345.67],
        );
        // The text: two decimals, one for a five-digit time, no start time.
        let mut text = run(None, 42, &[1.84, 26.19, 12345.7]);
        for (c, j) in text.results.iter_mut().zip(&json.results) {
            let (p, q) = (
                c.out_of_place.as_mut().unwrap(),
                j.out_of_place.as_ref().unwrap(),
            );
            p.busbw_gbps = (q.busbw_gbps * 100.0).round() / 100.0;
        }
        assert_eq!(
            one_run(std::slice::from_ref(&json), std::slice::from_ref(&text)).as_deref(),
            Some("processes (host, pid) and figures")
        );
        assert_eq!(
            one_run(std::slice::from_ref(&json), std::slice::from_ref(&json)).as_deref(),
            Some("start time, processes (host, pid) and figures")
        );
    }

    #[test]
    fn separate_runs_stay_two() {
        let a = run(Some("2026-12-07T03:00:00Z"), 42, &[1.84, 26.19]);
        // Another start, another pid, equal figures: still two.
        assert_eq!(
            one_run(
                std::slice::from_ref(&a),
                &[run(Some("2026-12-07T03:05:00Z"), 42, &[1.84, 26.19])]
            ),
            None
        );
        assert_eq!(
            one_run(std::slice::from_ref(&a), &[run(None, 43, &[1.84, 26.19])]),
            None
        );
        // Same pid, figures a run's noise apart.
        assert_eq!(
            one_run(std::slice::from_ref(&a), &[run(None, 42, &[1.84, 26.31])]),
            None
        );
        // Nothing names the run and too few cases to tell by figures.
        assert_eq!(
            one_run(&[run(None, 0, &[1.0, 2.0])], &[run(None, 0, &[1.0, 2.0])]),
            None
        );
        let many = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            one_run(&[run(None, 0, &many)], &[run(None, 0, &many)]).as_deref(),
            Some("figures")
        );
    }

    #[test]
    fn closeness_follows_the_printed_precision() {
        assert!(close(1.8432, 1.84, 7));
        assert!(!close(1.8432, 1.86, 7));
        assert!(close(12345.67, 12345.7, 7));
        assert!(!close(12345.67, 12345.9, 7));
        assert!(close(1234567.4, 1234567.0, 7));
        assert!(close(12_345_678.0, 1.2e7, 7));
        assert!(close(0.0012, 0.0, 6));
    }
}
