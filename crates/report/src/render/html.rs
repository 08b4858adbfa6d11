//! The HTML report: one self-contained file (inline CSS, inline SVG, no
//! scripts, nothing fetched), readable offline. Charts come from
//! [`super::charts`]; tables mirror the Markdown report.

use super::{all_ops, cases_notes, cases_table, charts, notes, op_series, overview, runs, Table};
use collbench_core::Record;
use std::fmt::Write;

/// A rank x rank bandwidth matrix to show as a heatmap.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// Section title.
    pub title: String,
    /// Rank names, one per row/column.
    pub labels: Vec<String>,
    /// GB/s, `matrix[from][to]`.
    pub gbps: Vec<Vec<f64>>,
    /// The check's host verdict cut (a ratio to the job median), marked
    /// on the heatmap's scale; `None` where the file carries none.
    pub cut: Option<f64>,
}

pub(crate) const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}\
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}h3{font-size:1.05rem}\
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem}th,td{border:1px solid #d0d7de;padding:.25rem .5rem}\
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even) td{background:#fafbfc}\
figure{margin:1rem 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}.note{color:#555;font-size:.85rem}";

/// Renders `records` (and any bandwidth `matrices`) as one HTML page.
pub fn render(records: &[Record], matrices: &[Matrix]) -> String {
    let runs = runs(records);
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(
        out,
        "<title>collbench report</title><style>{STYLE}</style></head><body>"
    );
    out.push_str("<h1>collbench report</h1>\n");
    // A page of host matrices alone (`report --matrix` without logs).
    if !runs.is_empty() {
        let (counts, tables) = overview(&runs);
        let _ = writeln!(out, "<p>{counts}</p>");
        for (title, t) in tables {
            let _ = writeln!(out, "<h2>{title}</h2>");
            out.push_str(&table(&t));
        }
        out.push_str("<h2>Charts</h2>\n");
    }
    for op in all_ops(&runs) {
        let _ = writeln!(out, "<h3>{}</h3>", esc(&op));
        // Only figures that mean something for the op (see crate::metrics).
        let shown = crate::metrics::shown(&op);
        let (name, bw) = if shown.busbw {
            ("bus bandwidth", op_series(&runs, &op, |p| p.busbw_gbps))
        } else {
            (
                "algorithm bandwidth",
                op_series(&runs, &op, |p| p.algbw_gbps),
            )
        };
        if shown.busbw || shown.algbw {
            let axis = if shown.busbw {
                "busbw (GB/s)"
            } else {
                "algbw (GB/s)"
            };
            figure(
                &mut out,
                &charts::line_chart_svg(&format!("{op}: {name}"), axis, &bw, false),
            );
        }
        if shown.time {
            let time = op_series(&runs, &op, |p| p.time_us);
            figure(
                &mut out,
                &charts::line_chart_svg(&format!("{op}: time"), "time (µs)", &time, true),
            );
        }
        for svg in super::arrival::heatmaps(&runs, &op) {
            figure(&mut out, &svg);
        }
    }
    if !matrices.is_empty() {
        out.push_str("<h2>Bandwidth matrix</h2>\n");
        for m in matrices {
            let _ = writeln!(out, "<h3>{}</h3>", esc(&m.title));
            figure(&mut out, &charts::heatmap_svg(&m.labels, &m.gbps, m.cut));
        }
    }
    if !runs.is_empty() {
        out.push_str("<h2>Results</h2>\n");
    }
    for run in &runs {
        for op in run.record.ops() {
            let _ = writeln!(out, "<h3>{} — {}</h3>", esc(&run.label), esc(&op));
            let cases = run.record.op_results(&op).collect::<Vec<_>>();
            out.push_str(&table(&cases_table(&cases)));
            for n in cases_notes(&cases) {
                let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&n));
            }
        }
    }
    for n in notes(records) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(n));
    }
    out.push_str("</body></html>\n");
    out
}

pub(crate) fn figure(out: &mut String, svg: &str) {
    let _ = writeln!(out, "<figure class=\"chart\">{svg}</figure>");
}

/// Escapes text for HTML element content and attributes.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A table; numeric columns are right-aligned.
pub(crate) fn table(t: &Table) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if t.numeric.get(i) == Some(&true) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}
