//! `collbench compare --html`: one self-contained page (inline CSS and
//! SVG, no scripts) that overlays BASE and NEW per op, bandwidth and time
//! against size, with NEW's 95% interval as error bars and the verdicts
//! marked, then the comparison's lines and per-case table.
//!
//! It draws what [`crate::compare`] decided and decides nothing itself.

use super::charts::{self, Mark, Overlay, Series};
use super::html::{esc, figure, table, STYLE};
use crate::compare::{Comparison, Row, Verdict};
use crate::compare_out::Sides;
use crate::compare_sides;
use std::fmt::Write;

/// The whole page: the sides, the verdict, two charts per op and the
/// per-case table.
pub fn render(sides: &Sides, cmp: &Comparison) -> String {
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(
        out,
        "<title>collbench compare</title><style>{STYLE}.verdict{{font-weight:600}}</style></head><body>"
    );
    out.push_str("<h1>collbench compare</h1>\n");
    for (role, name, side) in [
        ("BASE", sides.base_name, sides.base),
        ("NEW ", sides.new_name, sides.new),
    ] {
        let line = compare_sides::header_line(role, name, side);
        let _ = writeln!(out, "<p>{}</p>", esc(&line));
    }
    let mut lines = compare_sides::warnings(sides.base, sides.new);
    lines.push(cmp.overall_line());
    lines.extend(cmp.hidden_lines());
    for l in &lines {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(l));
    }
    let _ = writeln!(out, "<p class=\"verdict\">{}</p>", esc(&cmp.verdict_line()));
    out.push_str(
        "<h2>Charts</h2>\n<p class=\"note\">NEW's bars: the 95% interval of \
        NEW/BASE around NEW's point. Marks: the worst verdict of the size's placements \
        (the table below has each).</p>\n",
    );
    for group in op_groups(cmp) {
        charts_of(&mut out, &group);
    }
    out.push_str("<h2>Cases</h2>\n");
    let cases = table(&cmp.case_table()).replace(
        "<td>**REGRESSION**</td>",
        "<td style=\"color:#c00\"><strong>REGRESSION</strong></td>",
    );
    out.push_str(&cases);
    out.push_str("</body></html>\n");
    out
}

/// The rows of one op (op, type, redop, root), in the comparison's order.
struct OpGroup<'a> {
    name: String,
    rows: Vec<&'a Row>,
}

fn op_groups(cmp: &Comparison) -> Vec<OpGroup<'_>> {
    let mut groups: Vec<(_, OpGroup)> = Vec::new();
    for r in &cmp.rows {
        let key = (&r.op, &r.dtype, &r.redop, r.root);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.rows.push(r),
            None => {
                let mut name = format!("{} {}", r.op, r.dtype);
                if !r.redop.is_empty() && r.redop != "none" {
                    name = format!("{name} {}", r.redop);
                }
                if r.root >= 0 {
                    name = format!("{name} root {}", r.root);
                }
                groups.push((
                    key,
                    OpGroup {
                        name,
                        rows: vec![r],
                    },
                ));
            }
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// A figure of a row: bandwidth (the op's, see [`Row::bw_name`]) or time.
#[derive(Clone, Copy, PartialEq)]
enum Figure {
    Bandwidth,
    Time,
}

/// The bandwidth and time charts of one op, where the op has them.
fn charts_of(out: &mut String, g: &OpGroup) {
    let _ = writeln!(out, "<h3>{}</h3>", esc(&g.name));
    let Some(first) = g.rows.first() else {
        return;
    };
    let shown = crate::metrics::shown(&first.op);
    if shown.busbw || shown.algbw {
        let axis = format!("{} (GB/s)", first.bw_name);
        let title = format!("{}: {}", g.name, first.bw_name);
        figure(out, &chart(g, Figure::Bandwidth, &title, &axis));
    }
    if shown.time {
        let title = format!("{}: time", g.name);
        figure(out, &chart(g, Figure::Time, &title, "time (µs)"));
    }
}

/// One chart: BASE and NEW of the main placement (out-of-place where
/// measured), NEW's interval as bars, each size marked with its worst
/// verdict.
fn chart(g: &OpGroup, fig: Figure, title: &str, axis: &str) -> String {
    let main = if g.rows.iter().any(|r| r.placement == "out-of-place") {
        "out-of-place"
    } else {
        "in-place"
    };
    let rows: Vec<&Row> = g
        .rows
        .iter()
        .copied()
        .filter(|r| r.placement == main)
        .collect();
    let value = |p: &collbench_core::Placement, r: &Row| match fig {
        Figure::Time => p.time_us,
        Figure::Bandwidth if r.bw_name == "busbw" => p.busbw_gbps,
        Figure::Bandwidth => p.algbw_gbps,
    };
    let side = |label: &str, new: bool| Series {
        label: format!("{label} ({main})"),
        points: (rows.iter())
            .map(|r| {
                (
                    r.size_bytes as f64,
                    value(if new { &r.new } else { &r.base }, r),
                )
            })
            .collect(),
    };
    let series = [side("BASE", false), side("NEW", true)];
    let overlay = Overlay {
        bars: rows
            .iter()
            .filter_map(|r| {
                let (lo, hi) = new_interval(r, fig == Figure::Time)?;
                let v = value(&r.new, r);
                Some((r.size_bytes as f64, v * lo, v * hi))
            })
            .collect(),
        bars_of: 1,
        bars_label: "NEW 95% interval".to_string(),
        marks: rows
            .iter()
            .filter_map(|r| {
                let mark = worst_mark(g, r.size_bytes)?;
                Some((r.size_bytes as f64, value(&r.new, r), mark))
            })
            .collect(),
    };
    charts::overlay_chart_svg(title, axis, &series, &overlay, fig == Figure::Time)
}

/// NEW's 95% interval as factors of its own value: the row's interval
/// relative to its judged ratio, turned over where the chart shows the
/// other figure (time is the inverse of bandwidth at one size).
fn new_interval(r: &Row, time_chart: bool) -> Option<(f64, f64)> {
    let (lo, hi) = r.interval()?;
    let mid = r.judged_ratio();
    if !(mid > 0.0 && lo > 0.0 && hi.is_finite()) {
        return None;
    }
    Some(if r.by_time == time_chart {
        (lo / mid, hi / mid)
    } else {
        (mid / hi, mid / lo)
    })
}

/// The worst verdict among the placements of one size, as a mark (none
/// where every placement is the same).
fn worst_mark(g: &OpGroup, size_bytes: u64) -> Option<Mark> {
    let verdicts = || {
        g.rows
            .iter()
            .filter(move |r| r.size_bytes == size_bytes)
            .map(|r| r.verdict)
    };
    if verdicts().any(|v| v == Verdict::Regression) {
        Some(Mark::Regression)
    } else if verdicts().any(|v| matches!(v, Verdict::CannotTell(_))) {
        Some(Mark::CannotTell)
    } else if verdicts().any(|v| v == Verdict::Improved) {
        Some(Mark::Improved)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use crate::compare::tests::rec;
    use crate::compare_out::Sides;
    use crate::compare_sides::side;

    /// Four large sizes; NEW 10% slower at the two largest (a regression:
    /// two adjacent cases) and at nothing else.
    fn page() -> String {
        let sizes = [64u64 << 20, 256 << 20, 1 << 30, 2 << 30];
        let base: Vec<(u64, f64, f64)> = sizes
            .iter()
            .map(|&s| (s, s as f64 / 330e3, 330.0))
            .collect();
        let new: Vec<(u64, f64, f64)> = base
            .iter()
            .map(|&(s, t, bw)| match s >= 1 << 30 {
                true => (s, t / 0.9, bw * 0.9),
                false => (s, t, bw),
            })
            .collect();
        let (base, new) = (vec![rec(&base)], vec![rec(&new)]);
        let cmp = compare(&base, &new, 5.0);
        assert!(cmp.regressions().count() >= 2, "{}", cmp.table());
        let (bs, ns) = (side(&base), side(&new));
        let sides = Sides {
            base_name: "base.json",
            new_name: "new.json",
            base: &bs,
            new: &ns,
        };
        render(&sides, &cmp)
    }

    #[test]
    fn the_page_overlays_both_sides_with_bars_marks_and_the_table() {
        let page = page();
        assert!(!page.contains("<script") && !page.contains("src="));
        // A bandwidth and a time chart for the one op.
        assert_eq!(page.matches("<figure class=\"chart\"><svg").count(), 2);
        assert!(page.contains("all_reduce float sum: busbw"), "{page}");
        // Both curves, named in each legend.
        assert_eq!(page.matches("BASE (out-of-place)").count(), 2);
        assert_eq!(page.matches("NEW (out-of-place)").count(), 2);
        assert!(page.contains("NEW 95% interval"));
        // Regression marks (red filled circles of radius 6) and their legend.
        assert!(page.contains("\nregression\n</text>"), "{page}");
        assert!(
            page.contains("r=\"6\"") && page.contains("#FF0000"),
            "{page}"
        );
        // The verdict line and the per-case table, the regression in bold.
        assert!(page.contains("REGRESSION: "));
        assert!(page.contains("<th>new/base</th>") && page.contains("<th>verdict</th>"));
        assert!(page.contains("<strong>REGRESSION</strong>"));
        assert!(!page.contains("**"));
    }

    #[test]
    fn cannot_tell_is_marked_apart_from_regression() {
        // One slower size alone cannot tell (no adjacent case agrees).
        let base = vec![rec(&[(1 << 30, 3000.0, 330.0), (2 << 30, 6000.0, 330.0)])];
        let new = vec![rec(&[(1 << 30, 3333.0, 297.0), (2 << 30, 6000.0, 330.0)])];
        let cmp = compare(&base, &new, 5.0);
        assert_eq!(cmp.regressions().count(), 0, "{}", cmp.table());
        let (bs, ns) = (side(&base), side(&new));
        let sides = Sides {
            base_name: "a",
            new_name: "b",
            base: &bs,
            new: &ns,
        };
        let page = render(&sides, &cmp);
        assert!(page.contains("\ncannot tell\n</text>"), "{page}");
        assert!(!page.contains("\nregression\n</text>"));
    }

    #[test]
    fn new_interval_turns_over_for_the_other_figure() {
        let base = vec![rec(&[(1 << 30, 3000.0, 330.0), (2 << 30, 6000.0, 330.0)])];
        let new = vec![rec(&[(1 << 30, 3333.0, 297.0), (2 << 30, 6667.0, 297.0)])];
        let cmp = compare(&base, &new, 5.0);
        let r = &cmp.rows[0];
        let (lo, hi) = new_interval(r, false).unwrap();
        let (tlo, thi) = new_interval(r, true).unwrap();
        assert!(lo < 1.0 && hi > 1.0, "{lo} {hi}");
        assert!((tlo - 1.0 / hi).abs() < 1e-12 && (thi - 1.0 / lo).abs() < 1e-12);
    }
}
