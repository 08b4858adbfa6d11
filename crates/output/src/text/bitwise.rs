//! Bitwise repeatability (`-B N`) in nccl-tests' text layout, as its
//! proposed `-B` prints it (NVIDIA/nccl-tests pull request #388; see
//! docs/nccl-tests-facts.md): a report line under the run settings, the
//! table's `+ bitwise` captions and a `#bitdiff` column after each
//! placement's `#wrong`, a `# Bitwise mismatch (...)` line under a row
//! whose bits differed, and a `Bitwise mismatches` line in the footer.

use crate::units::c_g;
use collbench_core::{CaseResult, Placement};

/// The line nccl-tests prints under the run settings (with its trailing
/// space).
pub fn report_line(repeats: u64) -> String {
    format!("# Bitwise Repeatability: {repeats} comparisons after one reference run \n")
}

/// The three header lines of the `-B` table (after the leading `#`),
/// with `-I`'s columns too when `per_iter`.
pub(super) fn header(time: &str, pad: usize, label: &str, fmt: &str, per_iter: bool) -> String {
    let blank = ["", "", "", "", ""];
    let lead = format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}",
        blank[0], blank[1], blank[2], blank[3], blank[4]
    );
    let (caption, half_names, half_units): (String, Vec<&str>, Vec<&str>) = if per_iter {
        (
            format!(
                "{lead}{:19}out-of-place (+ bitwise + per-iteration){:38}in-place (+ bitwise + per-iteration)\n",
                "", ""
            ),
            vec!["#bitdiff", "i_min", "i_max", "i_p99", "i_cv%"],
            vec!["", "(us)", "(us)", "(us)", "(%)"],
        )
    } else {
        (
            format!(
                "{lead}{:15}out-of-place + bitwise{:27}in-place + bitwise{:10}\n",
                "", "", ""
            ),
            vec!["#bitdiff"],
            vec![""],
        )
    };
    let line = |first: [&str; 5], half: [&str; 4], extra: &[&str], last: &str| {
        let mut s = format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}",
            first[0], first[1], first[2], first[3], first[4]
        );
        for _ in 0..2 {
            s += &format!(
                "  {:>7}  {:>6}  {:>6}  {:>6}",
                half[0], half[1], half[2], half[3]
            );
            for (i, e) in extra.iter().enumerate() {
                // #bitdiff is %8s, the per-iteration columns %7s.
                let w = if i == 0 { 8 } else { 7 };
                s += &format!("  {e:>w$}");
            }
        }
        format!("{s} {last:>pad$}\n")
    };
    caption
        + &line(
            ["size", "count", "type", "redop", "root"],
            [time, "algbw", "busbw", "#wrong"],
            &half_names,
            label,
        )
        + &line(
            ["(B)", "(elements)", "", "", ""],
            ["(us)", "(GB/s)", "(GB/s)", ""],
            &half_units,
            fmt,
        )
}

/// One placement's `#bitdiff` cell (nccl-tests' `%8g`); `N/A` where the
/// placement was not compared.
pub(super) fn cell(p: Option<&Placement>) -> String {
    match p.and_then(|p| p.bitwise) {
        Some(b) => format!("  {:>8}", c_g(b.different_bits as f64)),
        None => format!("  {:>8}", "N/A"),
    }
}

/// The lines nccl-tests prints under a row whose bits differed, one per
/// placement: the first repeat, rank, element and bit, and the totals.
pub fn mismatch_lines(r: &CaseResult) -> String {
    let mut s = String::new();
    for (name, p) in r.placements() {
        let Some(b) = p.bitwise.filter(|b| b.different_bits > 0) else {
            continue;
        };
        let mode = if name == "in_place" {
            "in-place"
        } else {
            "out-of-place"
        };
        // nccl-tests prints -1 for a position it did not find.
        let at = |f: fn(&collbench_core::record::BitPosition) -> u64| {
            b.first.map_or(-1, |p| f(&p) as i64)
        };
        s += &format!(
            "# Bitwise mismatch ({mode}): first repeat {}, rank {}, element {}, bit {}; {} elements and {} bits differ\n",
            at(|p| p.repeat),
            at(|p| p.rank),
            at(|p| p.element),
            at(|p| p.bit),
            b.different_elements,
            b.different_bits
        );
    }
    s
}

/// Half-rows whose bits differed from the reference (nccl-tests'
/// "Bitwise mismatches" counts these); `None` when no placement of
/// `rows` was compared (no `-B`).
pub fn mismatches(rows: &[CaseResult]) -> Option<u64> {
    let compared: Vec<u64> = rows
        .iter()
        .flat_map(|r| r.placements())
        .filter_map(|(_, p)| p.bitwise.map(|b| b.different_bits))
        .collect();
    (!compared.is_empty()).then(|| compared.iter().filter(|b| **b > 0).count() as u64)
}

/// The footer's `Bitwise mismatches` line, after `Out of bounds values`;
/// empty without `-B`.
pub(super) fn footer_line(rows: &[CaseResult]) -> String {
    match mismatches(rows) {
        Some(n) => format!(
            "# {:<20} : {} {}\n",
            "Bitwise mismatches",
            n,
            if n > 0 { "FAILED" } else { "OK" }
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::record::{BitPosition, Bitwise};

    #[test]
    fn report_line_has_nccl_tests_trailing_space() {
        assert_eq!(
            report_line(100),
            "# Bitwise Repeatability: 100 comparisons after one reference run \n"
        );
    }

    #[test]
    fn a_row_with_differing_bits_is_named_and_counted() {
        let diff = Bitwise {
            repeats: 4,
            different_elements: 1,
            different_bits: 1,
            first: Some(BitPosition {
                repeat: 2,
                rank: 1,
                element: 7,
                bit: 30,
            }),
        };
        let mut r = CaseResult::float_sum("all_reduce", 1024);
        r.out_of_place = Some(Placement {
            bitwise: Some(Bitwise::none_yet(4)),
            ..Placement::default()
        });
        r.in_place = Some(Placement {
            bitwise: Some(diff),
            ..Placement::default()
        });
        assert_eq!(
            mismatch_lines(&r),
            "# Bitwise mismatch (in-place): first repeat 2, rank 1, element 7, bit 30; 1 elements and 1 bits differ\n"
        );
        assert_eq!(mismatches(std::slice::from_ref(&r)), Some(1));
        assert_eq!(footer_line(&[r]), "# Bitwise mismatches   : 1 FAILED\n");
        assert_eq!(footer_line(&[CaseResult::float_sum("all_reduce", 8)]), "");
        assert_eq!(cell(None), "       N/A");
    }
}
