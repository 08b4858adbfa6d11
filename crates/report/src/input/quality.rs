//! Data-quality checks on parsed records, for every format: rather than
//! choose silently, say what looks wrong and what was kept.
//!
//! * Rows repeating a case (op, type, redop, root, size): a warning says
//!   whether they agreed; the rows stay as printed, and summaries and
//!   `compare` use the first. Size 0 is left alone: nccl-tests rounds the
//!   smallest sizes down to 0 for some ops and rank counts.
//! * Rows out of size order within one series.
//! * A sweep that stops before the header's `maxBytes` (the run was cut).
//! * Results that were never checked: `#wrong` shows N/A, not 0.
//!
//! * Placements that failed a placement extension's check
//!   (`collbench_core::extension`).
//!
//! A sweep cut short, rows with wrong results and failed placement checks
//! are also typed [`Fault`]s.

use super::fault::{case_name, Fault};
use super::parsed::{Parsed, Warning};
use crate::units;
use collbench_core::{CaseResult, Placement, Record};
use std::collections::HashMap;

/// Runs every check on `parsed`, appending warnings about `origin`.
pub fn check(parsed: &mut Parsed, origin: &str) {
    for r in &parsed.records {
        let name = r.origin.clone().unwrap_or_else(|| origin.to_string());
        let mut w = Vec::new();
        duplicates(r, &mut w);
        order(r, &mut w);
        let before = w.len();
        stops_early(r, &mut w);
        parsed
            .faults
            .extend(w[before..].iter().map(|m| Fault::CutShort {
                origin: name.clone(),
                reason: m.clone(),
            }));
        unchecked(r, &mut w);
        parsed.faults.extend(super::fault::wrong_results(r, &name));
        // Said to people too (`report` has no gate): a failed placement
        // check is silent until someone reads it.
        let failed = super::fault::placement_checks(r, &name);
        for f in &failed {
            if let Fault::PlacementCheck { line, .. } = f {
                w.push(line.clone());
            }
        }
        parsed.faults.extend(failed);
        parsed
            .warnings
            .extend(w.into_iter().map(|m| Warning::new(&name, 0, m)));
    }
}

type Key<'a> = (&'a str, &'a str, &'a str, i64, u64);

fn key(c: &CaseResult) -> Key<'_> {
    (&c.op, &c.dtype, &c.redop, c.root, c.size_bytes)
}

fn same(a: &Option<Placement>, b: &Option<Placement>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a.time_us == b.time_us
                && a.algbw_gbps == b.algbw_gbps
                && a.busbw_gbps == b.busbw_gbps
                && a.wrong == b.wrong
        }
        (None, None) => true,
        _ => false,
    }
}

fn figures(c: &CaseResult) -> String {
    match c.out_of_place.as_ref().or(c.in_place.as_ref()) {
        Some(p) => format!(
            "time {} us, busbw {} GB/s",
            units::us(p.time_us),
            units::gbps(p.busbw_gbps)
        ),
        None => "no figures".to_string(),
    }
}

/// Warns about rows that repeat an earlier case.
fn duplicates(r: &Record, w: &mut Vec<String>) {
    // Row numbers sorted by key, a stable sort keeping each key's first row
    // first: 4 bytes a row. A map of every key held 14 MB for a 65,536-row
    // log, and a list searched for each row made it quadratic.
    let mut by_key: Vec<u32> = (0..r.results.len())
        .filter(|&i| r.results[i].size_bytes != 0)
        .filter_map(|i| u32::try_from(i).ok())
        .collect();
    by_key.sort_by(|&a, &b| key(&r.results[a as usize]).cmp(&key(&r.results[b as usize])));
    // (row, the first row of its key) for each row that disagrees with it.
    let (mut conflicting, mut identical) = (Vec::new(), 0usize);
    let mut first: Option<usize> = None;
    for i in by_key.into_iter().map(|i| i as usize) {
        let c = &r.results[i];
        match first {
            Some(f) if key(&r.results[f]) == key(c) => {
                let f_row = &r.results[f];
                if same(&f_row.out_of_place, &c.out_of_place) && same(&f_row.in_place, &c.in_place)
                {
                    identical += 1;
                } else {
                    conflicting.push((i, f));
                }
            }
            _ => first = Some(i),
        }
    }
    // Named in the order the rows were printed.
    conflicting.sort_unstable();
    if !conflicting.is_empty() {
        let more = conflicting.len().saturating_sub(3);
        let mut list = conflicting
            .iter()
            .take(3)
            .map(|&(i, f)| {
                let (c, f) = (&r.results[i], &r.results[f]);
                format!("{}: {} vs {}", case_name(c), figures(f), figures(c))
            })
            .collect::<Vec<_>>()
            .join("; ");
        if more > 0 {
            list.push_str(&format!("; and {more} more"));
        }
        w.push(format!(
            "{} case(s) appear twice with different figures (summaries and compare use the first row): {list}",
            conflicting.len()
        ));
    }
    if identical > 0 {
        w.push(format!("{identical} row(s) repeat an earlier row exactly"));
    }
}

/// Sizes that go down within one (op, type, redop, root) series.
fn order(r: &Record, w: &mut Vec<String>) {
    let mut last: HashMap<(String, String, String, i64), u64> = HashMap::new();
    let mut bad = Vec::new();
    for c in &r.results {
        let k = (c.op.clone(), c.dtype.clone(), c.redop.clone(), c.root);
        match last.get_mut(&k) {
            Some(prev) => {
                if c.size_bytes < *prev {
                    bad.push(format!(
                        "{} after {}",
                        units::bytes(c.size_bytes),
                        units::bytes(*prev)
                    ));
                }
                *prev = c.size_bytes;
            }
            None => {
                last.insert(k, c.size_bytes);
            }
        }
    }
    if !bad.is_empty() {
        w.push(format!(
            "rows out of size order ({}); figures are kept as printed",
            capped_list(&bad)
        ));
    }
}

/// A geometric or linear sweep whose largest row is a full step short of
/// the header's maxBytes.
fn stops_early(r: &Record, w: &mut Vec<String>) {
    let s = &r.settings;
    let Some(largest) = r.results.iter().map(|c| c.size_bytes).max() else {
        return;
    };
    if s.max_bytes == 0 || largest == 0 || largest >= s.max_bytes {
        return;
    }
    let next = match (s.step_factor, s.step_bytes) {
        (Some(f), _) if f > 1 => largest.saturating_mul(f),
        (_, Some(b)) if b > 0 => largest.saturating_add(b),
        _ => return,
    };
    if next <= s.max_bytes {
        w.push(format!(
            "partial: the table stops at {} but the header's maxBytes is {}; the run may have been cut short",
            units::bytes(largest),
            units::bytes(s.max_bytes)
        ));
    }
}

/// No placement of any row was checked.
fn unchecked(r: &Record, w: &mut Vec<String>) {
    let any = r.results.iter().flat_map(|c| c.placements()).count() > 0;
    let checked = r
        .results
        .iter()
        .flat_map(|c| c.placements())
        .any(|(_, p)| p.wrong.is_some());
    // A run made with checks on whose tool prints no count (nccom-test
    // --check) was checked: nothing to say.
    if any && !checked && !r.settings.check {
        w.push("results were not checked: #wrong is N/A, not 0".to_string());
    }
}

/// The first few of `items` joined, and how many more: a long log's
/// warning stays one readable line.
fn capped_list(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        out.push_str(&format!(", and {} more", items.len() - SHOWN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(size: u64, busbw: f64) -> CaseResult {
        let p = Placement {
            busbw_gbps: busbw,
            wrong: Some(0),
            ..Placement::default()
        };
        crate::compare::tests::all_reduce(size, p)
    }

    #[test]
    fn duplicates_warn() {
        let mut r = Record::new("t");
        r.results = vec![case(8, 1.0), case(16, 2.0), case(16, 3.0), case(8, 1.0)];
        let mut w = Vec::new();
        duplicates(&r, &mut w);
        assert!(w[0].contains("different figures"), "{w:?}");
        assert!(w[1].contains("repeat an earlier row exactly"), "{w:?}");
    }

    #[test]
    fn order_and_early_stop() {
        let mut r = Record::new("t");
        r.results = vec![case(16, 1.0), case(8, 1.0)];
        r.settings.max_bytes = 64;
        r.settings.step_factor = Some(2);
        let mut w = Vec::new();
        order(&r, &mut w);
        stops_early(&r, &mut w);
        assert!(w[0].contains("out of size order"), "{w:?}");
        assert!(w[1].starts_with("partial"), "{w:?}");
    }
}
