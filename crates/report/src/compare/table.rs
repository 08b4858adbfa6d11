//! The text of a comparison: the per-case table with each ratio's
//! interval and noise source, the regressions alone, the overall line and
//! the verdict line.

use super::{
    bw, Comparison, Overall, Row, Rule, Verdict, OVERALL_BW_FROM_BYTES, OVERALL_TIME_UP_TO_BYTES,
    TIME_FLOOR_US, TIME_THRESHOLD_FACTOR,
};
use crate::metrics;
use crate::render::{markdown, Table};
use crate::units;

/// Header of the column naming a change in NCCL's choice
/// (algorithm/protocol/channels, see [`crate::compare_explain`]).
pub const NCCL_CHANGE: &str = "NCCL base -> new";

/// The geometric mean of the finite, positive values; `None` if none.
fn geomean(values: impl Iterator<Item = f64>) -> Option<(f64, usize)> {
    let (sum, n) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (n > 0).then(|| ((sum / n as f64).exp(), n))
}

/// A table of `rows`: the case (op, type, redop, size), then the
/// columns `header` with each row's cells from `cells`. When NCCL's
/// algorithm, protocol or channels differ in some row (both runs
/// explained), a last column names the change there.
fn table_of<'a>(
    rows: impl Iterator<Item = &'a Row> + Clone,
    header: &[&'static str],
    numeric: &[bool],
    cells: impl Fn(&Row) -> Vec<String>,
) -> Table {
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
    Table {
        header,
        numeric,
        rows,
    }
}

/// `0.912 [0.880, 0.945]`-style cells: the judged ratio, its interval,
/// the change that counts for the case and where the noise came from.
fn judged_cells(r: &Row, threshold_pct: f64) -> [String; 4] {
    let cut = Rule { threshold_pct }.cut(r.by_time, r.estimate.noise_cut) * 100.0;
    [
        units::ratio(r.judged_ratio()),
        r.interval().map_or_else(
            || "-".to_string(),
            |(lo, hi)| format!("[{}, {}]", units::ratio(lo), units::ratio(hi)),
        ),
        if r.by_time {
            format!("+{cut:.1}%")
        } else {
            format!("-{cut:.1}%")
        },
        r.estimate
            .source
            .map_or_else(|| "none".to_string(), |s| s.to_string()),
    ]
}

fn verdict_cell(v: Verdict) -> String {
    match v {
        Verdict::Same => String::new(),
        Verdict::Regression => "**REGRESSION**".to_string(),
        other => other.word().to_string(),
    }
}

impl Comparison {
    /// The per-case table (Markdown, readable as plain text too): both
    /// sides' figures, then the judged figure's NEW/BASE ratio with its 95%
    /// interval and noise source, and the verdict. When NCCL's algorithm,
    /// protocol or channels differ in some row (both runs explained), a
    /// last column names the change there.
    pub fn table(&self) -> String {
        markdown::table(&self.case_table())
    }

    /// [`Comparison::table`]'s rows and columns, for other renderers (the
    /// HTML comparison); a regression's verdict cell is `**REGRESSION**`.
    pub fn case_table(&self) -> Table {
        // NEW's share of its ceiling (docs/ceiling.md), where its record
        // carries one: how far from what the hardware allows it is.
        let has_ceiling = self.rows.iter().any(|r| r.new.ceiling.is_some());
        let mut header = vec![
            "placement",
            "base bw (GB/s)",
            "new bw (GB/s)",
            "base time (µs)",
            "new time (µs)",
        ];
        let mut numeric = vec![false, true, true, true, true];
        if has_ceiling {
            header.push("new % of ceiling");
            numeric.push(true);
        }
        header.extend([
            "judged on",
            "new/base",
            "95% interval",
            "cut",
            "noise from",
            "verdict",
        ]);
        numeric.extend([false, true, false, true, false, false]);
        table_of(self.rows.iter(), &header, &numeric, |r| {
            let mut cells = vec![
                r.placement.to_string(),
                units::gbps(bw(r.bw_name, &r.base)),
                units::gbps(bw(r.bw_name, &r.new)),
                units::us(r.base.time_us),
                units::us(r.new.time_us),
            ];
            if has_ceiling {
                cells.push(r.new.ceiling.as_ref().map_or("-".to_string(), |k| {
                    format!("{:.0}%", k.percent_of(r.new.busbw_gbps))
                }));
            }
            cells.push(r.judged_on());
            cells.extend(judged_cells(r, self.threshold_pct));
            cells.push(verdict_cell(r.verdict));
            cells
        })
    }

    /// The regressions alone, as a table (empty when there are none).
    pub fn regression_table(&self) -> String {
        if self.regressions().next().is_none() {
            return String::new();
        }
        let header = [
            "bytes",
            "placement",
            "judged on",
            "base",
            "new",
            "new/base",
            "95% interval",
            "cut",
            "noise from",
        ];
        let numeric = [true, false, false, true, true, true, false, true, false];
        let table = table_of(self.regressions(), &header, &numeric, |r| {
            let (metric, base, new) = if r.by_time {
                (
                    "time (µs)".to_string(),
                    units::us(r.base.time_us),
                    units::us(r.new.time_us),
                )
            } else {
                (
                    format!("{} (GB/s)", r.bw_name),
                    units::gbps(bw(r.bw_name, &r.base)),
                    units::gbps(bw(r.bw_name, &r.new)),
                )
            };
            let mut cells = vec![
                r.size_bytes.to_string(),
                r.placement.to_string(),
                metric,
                base,
                new,
            ];
            cells.extend(judged_cells(r, self.threshold_pct));
            cells
        });
        markdown::table(&table)
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
                            .map(Row::judged_ratio),
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
                            .map(Row::judged_ratio),
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

    /// How the cases were judged, for the verdict line.
    fn rule_words(&self) -> String {
        let t = self.threshold_pct;
        format!(
            "95% interval beyond bandwidth -{} at >= 1 MiB or time +{} and +{TIME_FLOOR_US} µs below \
             (or twice BASE's iteration spread), in two adjacent cases",
            units::pct(t),
            units::pct(t * TIME_THRESHOLD_FACTOR)
        )
    }

    /// Lines naming the ops whose pooled drop no case confirms.
    pub fn hidden_lines(&self) -> Vec<String> {
        self.hidden
            .iter()
            .map(|h| {
                format!(
                    "cannot tell: {} bandwidth x{} [{}, {}] over {} cases at >= 1 MiB, \
                     beyond its cut (the threshold -{}, or the noise where larger) but no two \
                     adjacent cases confirm it: the noise is as large as the drop (more \
                     iterations, -n, or several runs a side would tell)",
                    h.op,
                    units::ratio(h.bw_ratio),
                    units::ratio(h.interval.0),
                    units::ratio(h.interval.1),
                    h.cases,
                    units::pct(self.threshold_pct)
                )
            })
            .collect()
    }

    /// One line for CI logs: `OK: ...`, `REGRESSION: k of n cases ...` (the
    /// cases are in [`Comparison::regression_table`]) or `CANNOT TELL: ...`.
    pub fn verdict_line(&self) -> String {
        let rule = self.rule_words();
        let n = self.rows.len();
        let unsure = self.unsure().count();
        let unsure_words = if unsure > 0 {
            format!("; {unsure} case(s) cannot tell (see the table)")
        } else {
            String::new()
        };
        match self.overall() {
            Overall::NoRegression => {
                format!("OK: no regression in {n} common cases ({rule}){unsure_words}")
            }
            Overall::Regression => {
                let bad = self.regressions().count();
                let first = self.regressions().next().map(Row::name).unwrap_or_default();
                format!("REGRESSION: {bad} of {n} cases ({rule}), first: {first}")
            }
            Overall::CannotTell => format!(
                "CANNOT TELL: no case regressed, but {} op(s) drop beyond the threshold within \
                 their noise ({rule}){unsure_words}",
                self.hidden.len()
            ),
        }
    }
}
