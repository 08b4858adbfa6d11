//! The Markdown report for GitHub: a summary across runs, the environment,
//! then one table per run and op (numbers right-aligned).

use super::{cases_notes, cases_table, notes, overview, runs};
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
            out.push_str(&table(&cases_table(&cases)));
            // What the explanation columns' marks mean, under the table.
            let notes = cases_notes(&cases);
            if !notes.is_empty() {
                out.push('\n');
            }
            for n in notes {
                let _ = writeln!(out, "- {n}");
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
