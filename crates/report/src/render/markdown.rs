//! The Markdown report for GitHub: a summary across runs, the environment,
//! then one table per run and op (numbers right-aligned).

use super::{cases_notes, cases_table, notes, overview, runs};
use collbench_core::CaseResult;
// Re-exported: the compare table prints through the same writer.
pub use collbench_output::markdown::table;
use std::fmt::Write;

use collbench_core::Record;

/// Renders `records` as a Markdown report.
pub fn render(records: &[Record]) -> String {
    let runs = runs(records);
    let mut out = String::from("# collbench report\n\n");
    let (counts, tables) = overview(&runs);
    let _ = writeln!(out, "{counts}");
    for (title, t) in tables {
        let _ = writeln!(out, "\n## {title}\n");
        out.push_str(&table(&t));
    }
    for run in &runs {
        for op in run.record.ops() {
            let _ = writeln!(out, "\n## {} — {}\n", run.label, op);
            let cases = run.record.op_results(&op).collect::<Vec<_>>();
            cases_markdown(&mut out, &cases);
            // What the explanation columns' marks mean, under the table.
            let notes = cases_notes(&cases);
            if !notes.is_empty() {
                out.push('\n');
            }
            for n in notes {
                let _ = writeln!(out, "- {n}");
            }
            if let Some(g) = super::arrival::grid(run.record, &op) {
                let title = format!("**{op}: lateness per rank (us)**");
                let _ = write!(out, "\n{}", super::arrival::heatmap_markdown(&title, &g));
            }
        }
    }
    let notes = notes(records);
    if !notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    out
}

/// `table(&cases_table(cases))`, built a block of rows at a time: a
/// 65,536-row sweep once held all its cells as strings at once (37 MB) to
/// print them. Blocks whose columns differ (a figure only some rows have)
/// fall back to the whole table, so the output is the same.
fn cases_markdown(out: &mut String, cases: &[&CaseResult]) {
    const BLOCK: usize = 1024;
    if cases.len() <= BLOCK {
        out.push_str(&table(&cases_table(cases)));
        return;
    }
    let mut text = String::new();
    let mut first: Option<(Vec<&'static str>, Vec<bool>)> = None;
    for rows in cases.chunks(BLOCK) {
        let t = cases_table(rows);
        let block = table(&t);
        match &first {
            None => {
                text.push_str(&block);
                first = Some((t.header, t.numeric));
            }
            Some((h, n)) if *h == t.header && *n == t.numeric => {
                // Header and alignment lines once, before the first block.
                text.push_str(block.splitn(3, '\n').nth(2).unwrap_or(""));
            }
            Some(_) => {
                out.push_str(&table(&cases_table(cases)));
                return;
            }
        }
    }
    out.push_str(&text);
}
