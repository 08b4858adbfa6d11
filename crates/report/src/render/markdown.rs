//! The Markdown report for GitHub: a summary across runs, the environment,
//! then one table per run and op (numbers right-aligned).

use super::{all_ops, cases_table, environment_table, notes, runs, summary_table, Table};
use std::fmt::Write;

use collbench_core::Record;

/// Renders `records` as a Markdown report.
pub fn render(records: &[Record]) -> String {
    let runs = runs(records);
    let mut out = String::from("# collbench report\n\n");
    let _ = writeln!(
        out,
        "{} run(s), {} op(s).\n",
        runs.len(),
        all_ops(&runs).len()
    );
    out.push_str("## Summary\n\n");
    out.push_str(&table(&summary_table(&runs)));
    out.push_str("\n## Environment\n\n");
    out.push_str(&table(&environment_table(&runs)));
    for run in &runs {
        for op in run.record.ops() {
            let _ = writeln!(out, "\n## {} — {}\n", run.label, op);
            out.push_str(&table(&cases_table(
                &run.record.op_results(&op).collect::<Vec<_>>(),
            )));
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

/// A GitHub table; `|` inside cells is escaped so it cannot split a cell.
pub(crate) fn table(t: &Table) -> String {
    let mut out = format!("| {} |\n|", t.header.join(" | "));
    for numeric in &t.numeric {
        out.push_str(if *numeric { " ---: |" } else { " :--- |" });
    }
    out.push('\n');
    for row in &t.rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}
