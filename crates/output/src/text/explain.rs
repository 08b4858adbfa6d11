//! The `--explain` additions to the text layout: per placement, the
//! algorithm, protocol and channel count NCCL reported, in columns after
//! nccl-tests' own (and after `-S`'s timestamp), and footnotes under each
//! table. Without `--explain` none of this is printed.

use super::TextOptions;
use collbench_core::explain::BUSBW_NOTE;
use collbench_core::{CaseResult, Placement};

/// Width of a row's nccl-tests part: the five leading columns, two
/// placements and, with `-S`, the timestamp.
fn row_width(opts: TextOptions) -> usize {
    let per_iter = if opts.per_iter.is_some() {
        2 * super::per_iter::CELLS_WIDTH
    } else {
        0
    };
    // Placement extensions: one cell per placement, after two spaces.
    let extensions: usize = opts
        .extensions
        .iter()
        .map(|e| 2 * (2 + e.cell_width()))
        .sum();
    52 + 2 * 33 + per_iter + extensions + if opts.timestamps { 21 } else { 0 }
}

/// One placement's cells: algorithm (`*` when busbw overstates link use),
/// protocol, channels.
fn cells(p: Option<&Placement>) -> String {
    let (algo, proto, ch) = match p {
        None => ("N/A".to_string(), "N/A".to_string(), "N/A".to_string()),
        Some(p) => match &p.explain {
            Some(e) if !e.kernels.is_empty() => {
                let mark = if e.busbw_overstated { "*" } else { "" };
                (
                    format!("{}{mark}", e.algo_text()),
                    e.proto_text(),
                    e.channels_text(),
                )
            }
            Some(e) if e.nothing_launched => ("none".to_string(), "-".to_string(), "0".to_string()),
            _ => ("n/a".to_string(), "n/a".to_string(), "n/a".to_string()),
        },
    };
    format!("  {algo:>10}  {proto:>6}  {ch:>4}")
}

/// The explain cells of a row, both placements.
pub(super) fn row_cells(r: &CaseResult) -> String {
    cells(r.out_of_place.as_ref()) + &cells(r.in_place.as_ref())
}

/// The header with the explain columns appended to the group and name
/// lines.
pub(super) fn header(plain: &str, opts: TextOptions) -> String {
    let width = row_width(opts);
    let lines: Vec<&str> = plain.lines().collect();
    let mut s = String::new();
    for (i, line) in lines.iter().enumerate() {
        let extra = match i {
            1 => format!("  {:^24}  {:^24}", "NCCL out-of-place", "NCCL in-place"),
            2 => format!(
                "  {:>10}  {:>6}  {:>4}  {:>10}  {:>6}  {:>4}",
                "algo", "proto", "nch", "algo", "proto", "nch"
            ),
            _ => String::new(),
        };
        if extra.is_empty() {
            s += line;
        } else {
            s += &format!("{:<width$}{extra}", line.trim_end());
        }
        s.push('\n');
    }
    s
}

/// The notes under a table: which rows' busbw overstates link use and
/// why, why some rows could not be explained, and ranks that reported
/// nothing. Empty when there is nothing to say.
pub fn footnotes(rows: &[CaseResult]) -> String {
    let placements: Vec<&Placement> = rows
        .iter()
        .flat_map(|r| r.placements())
        .map(|(_, p)| p)
        .collect();
    let mut s = String::new();
    let mut in_network: Vec<String> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut missing: Vec<u64> = Vec::new();
    let mut rows_missing = 0;
    for e in placements.iter().filter_map(|p| p.explain.as_ref()) {
        for k in e.kernels.iter().filter(|k| k.in_network()) {
            if !in_network.contains(&k.algo) {
                in_network.push(k.algo.clone());
            }
        }
        if e.kernels.is_empty() {
            if let Some(why) = &e.unavailable {
                if !reasons.contains(why) {
                    reasons.push(why.clone());
                }
            }
        }
        if !e.missing_ranks.is_empty() {
            rows_missing += 1;
            for r in &e.missing_ranks {
                if !missing.contains(r) {
                    missing.push(*r);
                }
            }
        }
    }
    if !in_network.is_empty() {
        s += &format!("# * {}: {BUSBW_NOTE}\n", in_network.join(", "));
    }
    for why in reasons {
        s += &format!("# NCCL explain n/a: {why}\n");
    }
    if rows_missing > 0 {
        missing.sort_unstable();
        let list: Vec<String> = missing.iter().map(u64::to_string).collect();
        s += &format!(
            "# NCCL explain: rank(s) {} reported no kernel in {rows_missing} placement(s); columns show the other ranks\n",
            list.join(", ")
        );
    }
    s
}
