//! What `collbench compare` prints: the text (sides, tables, verdict) or
//! the same findings as one JSON document (`--format json`).

use crate::compare::gate::{self, Failure};
use crate::compare::{Comparison, Overall, Row};
use crate::compare_explain::regression_notes;
use crate::compare_sides::{self, Side};
use serde::Serialize;

/// What `compare` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompareFormat {
    /// The sides, the per-case table, regressions and the verdict line.
    #[default]
    Text,
    /// The same findings as one JSON object (`schema`: collbench-compare/1).
    Json,
}

/// The two inputs as the command line named them, and what they hold.
pub struct Sides<'a> {
    pub base_name: &'a str,
    pub new_name: &'a str,
    pub base: &'a Side,
    pub new: &'a Side,
}

/// The text layout: a line per side, warnings, one-sided cases, the table,
/// the overall line, the regressions and the verdict line; when NEW failed
/// its correctness gate, a FAILED line per failure first and last.
pub fn text(sides: &Sides, cmp: &Comparison, failures: &[Failure]) -> String {
    let mut out = String::new();
    let mut line = |s: &str| {
        out += s;
        out += "\n";
    };
    for f in gate::lines("NEW", failures) {
        line(&f);
    }
    line(&compare_sides::header_line(
        "BASE",
        sides.base_name,
        sides.base,
    ));
    line(&compare_sides::header_line(
        "NEW ",
        sides.new_name,
        sides.new,
    ));
    for w in compare_sides::warnings(sides.base, sides.new) {
        line(&w);
    }
    for (side, only) in [("BASE", &cmp.only_base), ("NEW", &cmp.only_new)] {
        if !only.is_empty() {
            line(&format!(
                "only in {side} ({}): {}",
                only.len(),
                only.join(", ")
            ));
        }
    }
    line("");
    line(&cmp.table());
    line(&cmp.overall_line());
    for h in cmp.hidden_lines() {
        line(&h);
    }
    let regressions = cmp.regression_table();
    if !regressions.is_empty() {
        line(&format!("\nRegressions:\n\n{regressions}"));
        if let Some(change) = compare_sides::path_change(sides.base, sides.new) {
            line(&format!("first suspect: NCCL's path changed: {change}"));
        }
        let notes = regression_notes(cmp);
        for n in &notes {
            line(n);
        }
        if !notes.is_empty() {
            line("");
        }
    }
    let failed = gate::lines("NEW", failures);
    match failed.first() {
        // Correctness first: the speed verdict is shown, the gate's is last.
        Some(first) => {
            line(&format!("speed alone: {}", cmp.verdict_line()));
            for f in &failed[1..] {
                line(f);
            }
            line(first);
        }
        None => line(&cmp.verdict_line()),
    }
    out
}

/// `--format json`: the findings of the text, as data.
#[derive(Debug, Serialize)]
struct Document<'a> {
    /// `collbench-compare/1`.
    schema: &'static str,
    base: &'a str,
    new: &'a str,
    threshold_pct: f64,
    /// `ok`, `regression`, `failed` (NEW failed its correctness gate) or
    /// `cannot_tell`, as the exit code says (0, 1, 1 or 3).
    verdict: &'static str,
    /// Why NEW failed its correctness gate, one line each (empty: it
    /// passed).
    failures: Vec<String>,
    /// Runs on each side (a folder or `--base-run`/`--new-run` gives
    /// several).
    runs: Runs,
    exit_code: i32,
    regressions: usize,
    /// Cases that cannot tell alone (noise, one case only, no estimate).
    cannot_tell: usize,
    /// Ops whose pooled drop no case confirms (the verdict
    /// `cannot_tell`), one line each.
    hidden: Vec<String>,
    /// Rank counts or GPU models that differ between the sides.
    warnings: Vec<String>,
    /// Lines of the inputs that their readers could not place and
    /// skipped, one line per file (`BASE path: 3 lines skipped; first:
    /// ...`); empty when none were.
    skipped_lines: &'a [String],
    only_base: &'a [String],
    only_new: &'a [String],
    cases: Vec<Case<'a>>,
    /// The text's overall and verdict lines.
    overall: String,
    verdict_line: String,
}

/// One case present on both sides.
#[derive(Debug, Serialize)]
struct Case<'a> {
    op: &'a str,
    dtype: &'a str,
    redop: &'a str,
    root: i64,
    size_bytes: u64,
    placement: &'static str,
    /// The figure the verdict is judged on: `time`, `busbw` or `algbw`,
    /// with ` (p50)` where the medians of the iterations were compared.
    judged_on: String,
    /// NEW/BASE of that figure (`null` where not finite).
    ratio: Option<f64>,
    /// Its 95% interval, `[low, high]` (`null` without a noise estimate).
    interval: Option<[f64; 2]>,
    /// Where the noise estimate came from (`null`: none).
    noise: Option<String>,
    /// `same`, `regression`, `improved` or `cannot tell (...)`.
    verdict: &'static str,
    base: Figures,
    new: Figures,
    /// What NCCL ran differently (`RING/SIMPLE/24 -> TREE/LL128/24`),
    /// where both runs say.
    #[serde(skip_serializing_if = "Option::is_none")]
    nccl_change: Option<String>,
}

#[derive(Debug, Serialize)]
struct Runs {
    base: usize,
    new: usize,
}

#[derive(Debug, Serialize)]
struct Figures {
    time_us: f64,
    algbw_gbps: f64,
    busbw_gbps: f64,
}

fn case(r: &Row) -> Case<'_> {
    let ratio = r.judged_ratio();
    let figures = |p: &collbench_core::Placement| Figures {
        time_us: p.time_us,
        algbw_gbps: p.algbw_gbps,
        busbw_gbps: p.busbw_gbps,
    };
    Case {
        op: &r.op,
        dtype: &r.dtype,
        redop: &r.redop,
        root: r.root,
        size_bytes: r.size_bytes,
        placement: r.placement,
        judged_on: r.judged_on(),
        ratio: ratio.is_finite().then_some(ratio),
        interval: r.interval().map(|(lo, hi)| [lo, hi]),
        noise: r.estimate.source.map(|s| s.to_string()),
        verdict: r.verdict.word(),
        base: figures(&r.base),
        new: figures(&r.new),
        nccl_change: r.choice_change().map(|c| c.cell()),
    }
}

/// The JSON document, pretty-printed, with a final line end.
pub fn json(sides: &Sides, cmp: &Comparison, failures: &[Failure]) -> String {
    json_noted(sides, cmp, failures, &[])
}

/// [`json`], with the inputs' skipped-lines notes (`skipped_lines`).
pub fn json_noted(
    sides: &Sides,
    cmp: &Comparison,
    failures: &[Failure],
    skipped_lines: &[String],
) -> String {
    let regressions = cmp.regressions().count();
    let (verdict, exit_code) = match cmp.overall() {
        _ if !failures.is_empty() => ("failed", 1),
        Overall::NoRegression => ("ok", 0),
        Overall::Regression => ("regression", 1),
        Overall::CannotTell => ("cannot_tell", 3),
    };
    let doc = Document {
        schema: "collbench-compare/1",
        base: sides.base_name,
        new: sides.new_name,
        threshold_pct: cmp.threshold_pct,
        verdict,
        failures: failures.iter().map(Failure::to_string).collect(),
        runs: Runs {
            base: cmp.runs.0,
            new: cmp.runs.1,
        },
        exit_code,
        regressions,
        cannot_tell: cmp.unsure().count(),
        hidden: cmp.hidden_lines(),
        warnings: compare_sides::warnings(sides.base, sides.new),
        skipped_lines,
        only_base: &cmp.only_base,
        only_new: &cmp.only_new,
        cases: cmp.rows.iter().map(case).collect(),
        overall: cmp.overall_line(),
        verdict_line: gate::lines("NEW", failures)
            .into_iter()
            .next()
            .unwrap_or_else(|| cmp.verdict_line()),
    };
    // Plain structs of strings and numbers always serialise.
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}
