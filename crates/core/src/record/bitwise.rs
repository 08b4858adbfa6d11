//! Bitwise repeatability (`-B N`, issue #52) as a placement extension
//! (`crate::extension`): its record types, and every fact of its layout
//! as nccl-tests' proposed `-B` prints it (NVIDIA/nccl-tests pull request
//! #388; docs/nccl-tests-facts.md §5b): a report line under the run
//! settings, the table's `+ bitwise` captions and a `#bitdiff` column
//! after each placement's `#wrong`, a `# Bitwise mismatch (...)` line
//! under a row whose bits differed, a `Bitwise mismatches` line in the
//! footer, and `-J`'s keys; and how a log's lines and keys read back. The
//! measurement is `runner::bitwise`.

use super::{CaseResult, Placement, Record, RunSettings};
use crate::extension::{HeaderWords, LineRead, PlacementExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bitwise repeatability of one placement, as nccl-tests' `-B N` reports
/// it: one reference run, then `repeats` runs on the same input, each
/// rank's output compared bit for bit with the reference's. A library
/// that returns different bits for the same input (a changed reduction
/// order, silent corruption) shows here even when every value is within
/// the checker's tolerance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bitwise {
    /// Repeats compared with the reference.
    pub repeats: u64,
    /// Elements that differed, summed over repeats and ranks.
    pub different_elements: u64,
    /// Bits that differed, summed over repeats and ranks (the `#bitdiff`
    /// column).
    pub different_bits: u64,
    /// The first difference: the earliest repeat that had one, its lowest
    /// rank, and that rank's lowest element and bit; absent when every bit
    /// matched (or a log did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<BitPosition>,
}

/// Where a bit differed: repeat (from 0), global rank, element of that
/// rank's output (from 0) and bit within the element (0: least
/// significant), as nccl-tests numbers them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct BitPosition {
    pub repeat: u64,
    pub rank: u64,
    pub element: u64,
    pub bit: u64,
}

impl Bitwise {
    /// No repeat compared yet.
    pub fn none_yet(repeats: u64) -> Bitwise {
        Bitwise {
            repeats,
            different_elements: 0,
            different_bits: 0,
            first: None,
        }
    }

    /// `other`'s differences added to these (other ranks or repeats of the
    /// same placement): counts summed, the earliest first position kept.
    pub fn add(&mut self, other: &Bitwise) {
        self.different_elements += other.different_elements;
        self.different_bits += other.different_bits;
        self.first = match (self.first, other.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The extension: `Placement::bitwise`, `RunSettings::bitwise_repeats`.
pub(crate) struct BitwiseRepeatability;

/// The one instance `crate::extension_list` lists.
pub(crate) static BITWISE: BitwiseRepeatability = BitwiseRepeatability;

/// `in-place` or `out-of-place`, as nccl-tests' lines name a placement.
fn mode(name: &str) -> &'static str {
    if name == "in_place" {
        "in-place"
    } else {
        "out-of-place"
    }
}

impl PlacementExtension for BitwiseRepeatability {
    fn name(&self) -> &'static str {
        "bitwise"
    }

    fn active(&self, settings: &RunSettings) -> bool {
        settings.bitwise_repeats > 0
    }

    fn merge(&self, into: &mut Placement, from: &Placement) {
        if let Some(b) = from.bitwise {
            into.bitwise
                .get_or_insert(Bitwise::none_yet(b.repeats))
                .add(&b);
        }
    }

    /// Half-rows whose bits differed from the reference (nccl-tests'
    /// "Bitwise mismatches" counts these).
    fn failures(&self, rows: &[CaseResult]) -> Option<u64> {
        let compared: Vec<u64> = rows
            .iter()
            .flat_map(|r| r.placements())
            .filter_map(|(_, p)| p.bitwise.map(|b| b.different_bits))
            .collect();
        (!compared.is_empty()).then(|| compared.iter().filter(|b| **b > 0).count() as u64)
    }

    fn failure_line(&self, n: u64) -> String {
        format!("{n} placement(s) returned different bits on repeats of the same input (-B): results are NOT repeatable")
    }

    fn fault(&self, p: &Placement, case: &str) -> Option<String> {
        let b = p.bitwise.filter(|b| b.different_bits > 0)?;
        let mut s = format!(
            "bitwise mismatch: {} bit(s) differ between repeats on the same input in {case}",
            b.different_bits
        );
        if let Some(p) = b.first {
            s += &format!(
                " (first: repeat {}, rank {}, element {}, bit {})",
                p.repeat, p.rank, p.element, p.bit
            );
        }
        Some(s)
    }

    /// With nccl-tests' trailing space.
    fn report_line(&self, settings: &RunSettings) -> String {
        match settings.bitwise_repeats {
            0 => String::new(),
            n => format!("# Bitwise Repeatability: {n} comparisons after one reference run \n"),
        }
    }

    fn table_header(&self, w: HeaderWords<'_>, per_iter: bool) -> String {
        header(w, per_iter)
    }

    /// nccl-tests' `%8g`.
    fn cell_width(&self) -> usize {
        8
    }

    fn cell(&self, p: Option<&Placement>) -> Option<u64> {
        p.and_then(|p| p.bitwise).map(|b| b.different_bits)
    }

    /// One line per placement whose bits differed: the first repeat,
    /// rank, element and bit, and the totals.
    fn row_lines(&self, r: &CaseResult) -> String {
        let mut s = String::new();
        for (name, p) in r.placements() {
            let Some(b) = p.bitwise.filter(|b| b.different_bits > 0) else {
                continue;
            };
            // nccl-tests prints -1 for a position it did not find.
            let at = |f: fn(&BitPosition) -> u64| b.first.map_or(-1, |p| f(&p) as i64);
            s += &format!(
                "# Bitwise mismatch ({}): first repeat {}, rank {}, element {}, bit {}; {} elements and {} bits differ\n",
                mode(name),
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

    fn footer_label(&self) -> &'static str {
        "Bitwise mismatches"
    }

    fn json_config(&self, settings: &RunSettings) -> Option<(&'static str, u64)> {
        self.active(settings)
            .then_some(("bitwise_repeats", settings.bitwise_repeats))
    }

    /// The first position's keys are `null` when no bit differed, as
    /// nccl-tests writes them.
    fn json_placement(
        &self,
        p: &Placement,
    ) -> Option<(&'static str, Vec<(&'static str, Option<u64>)>)> {
        let b = p.bitwise?;
        let at = |f: fn(&BitPosition) -> u64| b.first.map(|p| f(&p));
        Some((
            "bitwise",
            vec![
                ("repeats", Some(b.repeats)),
                ("different_elements", Some(b.different_elements)),
                ("different_bits", Some(b.different_bits)),
                ("first_repeat", at(|p| p.repeat)),
                ("first_rank", at(|p| p.rank)),
                ("first_element", at(|p| p.element)),
                ("first_bit", at(|p| p.bit)),
            ],
        ))
    }

    fn json_failures_key(&self) -> &'static str {
        "bitwise_mismatches"
    }

    fn column_names(&self) -> &'static [&'static str] {
        &["#bitdiff", "bitdiff"]
    }

    /// The bits that differed. The first position and the elements come
    /// from the `# Bitwise mismatch` line under the row, the repeats from
    /// the header's `# Bitwise Repeatability` line.
    fn read_cell(&self, p: &mut Placement, count: Option<u64>) {
        p.bitwise = count.map(|bits| Bitwise {
            different_bits: bits,
            ..Bitwise::none_yet(0)
        });
    }

    fn read_line(&self, tokens: &[&str], run: &mut Record) -> LineRead {
        read_line(tokens, run)
    }

    fn settle(&self, p: &mut Placement, settings: &RunSettings) {
        if let Some(b) = &mut p.bitwise {
            b.repeats = settings.bitwise_repeats;
        }
    }

    fn read_json_config(&self, config: &Value, settings: &mut RunSettings) {
        settings.bitwise_repeats = config
            .get("bitwise_repeats")
            .and_then(Value::as_u64)
            .unwrap_or(0);
    }

    /// Counts, and the first position, `null` when no bit differed.
    fn read_json_placement(
        &self,
        json: &Value,
        p: &mut Placement,
        path: &str,
    ) -> Result<(), String> {
        let Some(b) = json.get("bitwise") else {
            return Ok(());
        };
        let path = format!("{path}.bitwise");
        let uint = |key: &str| match b.get(key) {
            None => Err(format!("{path}.{key}: missing")),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("{path}.{key}: expected a non-negative integer")),
        };
        let first = |k: &str| b.get(k).and_then(Value::as_u64);
        let first = match (
            first("first_repeat"),
            first("first_rank"),
            first("first_element"),
            first("first_bit"),
        ) {
            (Some(repeat), Some(rank), Some(element), Some(bit)) => Some(BitPosition {
                repeat,
                rank,
                element,
                bit,
            }),
            _ => None,
        };
        p.bitwise = Some(Bitwise {
            repeats: uint("repeats")?,
            different_elements: uint("different_elements")?,
            different_bits: uint("different_bits")?,
            first,
        });
        Ok(())
    }
}

/// The three header lines of the `-B` table (after the leading `#`),
/// with `-I`'s columns too when `per_iter`.
fn header(w: HeaderWords<'_>, per_iter: bool) -> String {
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
    let pad = w.pad;
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
            [w.time, "algbw", "busbw", "#wrong"],
            &half_names,
            w.label,
        )
        + &line(
            ["(B)", "(elements)", "", "", ""],
            ["(us)", "(GB/s)", "(GB/s)", ""],
            &half_units,
            w.format,
        )
}

/// `what` as a whole number, or why not (as the log parsers word it).
fn number(tok: &str, what: &str) -> Result<u64, String> {
    tok.parse()
        .map_err(|_| format!("expected {what} (a number), found '{tok}'"))
}

/// A `# Bitwise ...` line (`tokens`: after the `#`).
fn read_line(tokens: &[&str], run: &mut Record) -> LineRead {
    match tokens {
        ["Bitwise", "Repeatability:", n, ..] => match number(n, "the bitwise repeat count") {
            Ok(v) => run.settings.bitwise_repeats = v,
            Err(e) => return LineRead::Unreadable(e),
        },
        ["Bitwise", "mismatch", mode, ..] => {
            if let Err(e) = mismatch(mode, tokens, run) {
                return LineRead::Unreadable(e);
            }
        }
        ["Bitwise", "mismatches", ":", n, verdict, ..] => {
            // The rows' #bitdiff and mismatch lines carry the
            // differences (and fail `compare`); this says it once.
            if *verdict != "OK" || *n != "0" {
                return LineRead::Warn(format!(
                    "nccl-tests found {n} placement(s) whose output bits differed \
                     between repeats on the same input ({verdict})"
                ));
            }
        }
        _ => return LineRead::NotMine,
    }
    LineRead::Read
}

/// `# Bitwise mismatch (in-place): first repeat 2, rank 1, element 7,
/// bit 30; 1 elements and 1 bits differ`: the first difference of the
/// last row's placement.
fn mismatch(mode: &str, tokens: &[&str], run: &mut Record) -> Result<(), String> {
    let bad = || {
        "expected nccl-tests' '# Bitwise mismatch (out-of-place): first repeat R, rank K, element E, bit B; N elements and M bits differ'".to_string()
    };
    let after = |key: &str| -> Result<u64, String> {
        let i = tokens.iter().position(|t| *t == key).ok_or_else(bad)?;
        let v = tokens.get(i + 1).ok_or_else(bad)?;
        number(v.trim_end_matches([',', ';']), key)
    };
    let before = |key: &str| -> Result<u64, String> {
        let i = tokens.iter().position(|t| *t == key).ok_or_else(bad)?;
        number(tokens[i.checked_sub(1).ok_or_else(bad)?], key)
    };
    let first = BitPosition {
        repeat: after("repeat")?,
        rank: after("rank")?,
        element: after("element")?,
        bit: after("bit")?,
    };
    let (elements, bits) = (before("elements")?, before("bits")?);
    let repeats = run.settings.bitwise_repeats;
    let row = run.results.last_mut().ok_or_else(bad)?;
    let placement = match mode.trim_matches(['(', ')', ':']) {
        "out-of-place" => row.out_of_place.as_mut(),
        "in-place" => row.in_place.as_mut(),
        _ => None,
    }
    .ok_or_else(bad)?;
    let b = placement
        .bitwise
        .get_or_insert_with(|| Bitwise::none_yet(repeats));
    b.first = Some(first);
    b.different_elements = elements;
    b.different_bits = bits;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_line(repeats: u64) -> String {
        let settings = RunSettings {
            bitwise_repeats: repeats,
            ..RunSettings::default()
        };
        BITWISE.report_line(&settings)
    }

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
            BITWISE.row_lines(&r),
            "# Bitwise mismatch (in-place): first repeat 2, rank 1, element 7, bit 30; 1 elements and 1 bits differ\n"
        );
        assert_eq!(BITWISE.failures(std::slice::from_ref(&r)), Some(1));
        assert_eq!(
            BITWISE.failures(&[CaseResult::float_sum("all_reduce", 8)]),
            None
        );
        assert_eq!(BITWISE.cell(None), None);
    }

    #[test]
    fn a_mismatch_line_reads_back_into_the_last_row() {
        let mut run = Record::new("nccl-tests");
        let tokens = |l: &'static str| l.split_whitespace().collect::<Vec<_>>();
        let line = tokens("Bitwise Repeatability: 4 comparisons after one reference run");
        assert_eq!(BITWISE.read_line(&line, &mut run), LineRead::Read);
        let mut r = CaseResult::float_sum("all_reduce", 1024);
        r.in_place = Some(Placement::default());
        run.results.push(r);
        let line = tokens("Bitwise mismatch (in-place): first repeat 2, rank 1, element 7, bit 30; 1 elements and 1 bits differ");
        assert_eq!(BITWISE.read_line(&line, &mut run), LineRead::Read);
        let b = run.results[0].in_place.as_ref().unwrap().bitwise.unwrap();
        assert_eq!(
            (b.repeats, b.different_bits, b.first.unwrap().bit),
            (4, 1, 30)
        );
        let line = tokens("Bitwise mismatch (out-of-place): first repeat 2");
        assert!(matches!(
            BITWISE.read_line(&line, &mut run),
            LineRead::Unreadable(_)
        ));
        assert_eq!(
            BITWISE.read_line(&tokens("Avg bus"), &mut run),
            LineRead::NotMine
        );
    }
}
