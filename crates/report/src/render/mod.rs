//! Report writers: Markdown for GitHub and HTML with inline SVG charts.
//! Both read the same [`Run`] views built here, so they show the same
//! rows, labels and notes.

pub mod arrival;
pub mod charts;
pub mod compare_html;
pub mod html;
pub mod markdown;

use crate::units;
use collbench_core::{CaseResult, Placement, Record};
pub use collbench_output::markdown::{cases_notes, cases_table, Table};
use std::collections::BTreeMap;

/// What both reports open with: how many runs and ops (`2 run(s), 3
/// op(s).`), then the summary and environment tables under their titles.
pub fn overview(runs: &[Run]) -> (String, [(&'static str, Table); 2]) {
    let counts = format!("{} run(s), {} op(s).", runs.len(), all_ops(runs).len());
    let tables = [
        ("Summary", summary_table(runs)),
        ("Environment", environment_table(runs)),
    ];
    (counts, tables)
}

/// The summary across runs ([`collbench_output::markdown::summary_table`]
/// with a `run` column).
pub fn summary_table(runs: &[Run]) -> Table {
    let records: Vec<&Record> = runs.iter().map(|r| r.record).collect();
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    collbench_output::markdown::summary_table(&records, Some(&labels))
}

/// Tool, library, ranks, hosts, devices and the log's average busbw per run.
pub fn environment_table(runs: &[Run]) -> Table {
    let rows = runs
        .iter()
        .map(|run| {
            let e = environment(run.record);
            let avg = run
                .record
                .avg_busbw_gbps
                .map_or_else(|| "-".to_string(), units::gbps);
            vec![
                run.label.clone(),
                e.tool,
                e.library,
                e.ranks,
                e.hosts,
                e.devices,
                avg,
            ]
        })
        .collect();
    let mut table = Table {
        header: vec![
            "run",
            "tool",
            "library",
            "ranks",
            "hosts",
            "devices",
            "avg busbw (GB/s)",
        ],
        numeric: vec![false, false, false, true, false, false, true],
        rows,
    };
    // The path NCCL took, where a log or run told it (a column only then,
    // so reports of logs without NCCL's lines are as they were).
    if runs.iter().any(|r| r.record.nccl_path.is_some()) {
        table.header.push("NCCL path");
        table.numeric.push(false);
        for (row, run) in table.rows.iter_mut().zip(runs) {
            let path = run.record.nccl_path.as_ref();
            row.push(path.map_or_else(|| "-".to_string(), |p| p.summary()));
        }
    }
    table
}

/// A record with the label that names it in tables and legends.
pub struct Run<'a> {
    /// File name, plus ` #k` when one file held several runs.
    pub label: String,
    pub record: &'a Record,
}

/// Labels every record: its file's name, numbered when a file held more
/// than one run.
pub fn runs(records: &[Record]) -> Vec<Run<'_>> {
    let name = |r: &Record| {
        let o = r.origin.clone().unwrap_or_else(|| r.source.clone());
        o.rsplit(['/', '\\']).next().unwrap_or(&o).to_string()
    };
    let mut per_name: BTreeMap<String, usize> = BTreeMap::new();
    for r in records {
        *per_name.entry(name(r)).or_default() += 1;
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    records
        .iter()
        .map(|r| {
            let n = name(r);
            let k = seen.entry(n.clone()).or_default();
            *k += 1;
            let label = if per_name[&n] > 1 {
                format!("{n} #{k}")
            } else {
                n
            };
            Run { label, record: r }
        })
        .collect()
}

/// The placement a summary or chart uses: out-of-place, else in-place.
pub fn main_placement(c: &CaseResult) -> Option<&Placement> {
    c.out_of_place.as_ref().or(c.in_place.as_ref())
}

/// Where and on what a run ran, as far as its log says.
pub struct Environment {
    pub tool: String,
    pub library: String,
    pub ranks: String,
    pub hosts: String,
    pub devices: String,
}

/// Summarises a record's tool, library, hosts and devices ("-" if unknown).
pub fn environment(r: &Record) -> Environment {
    let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    let mut hosts: Vec<&str> = r
        .devices
        .iter()
        .map(|d| d.host.as_str())
        .filter(|h| !h.is_empty())
        .collect();
    hosts.dedup();
    let hosts: std::collections::BTreeSet<&str> = hosts.into_iter().collect();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for d in r.devices.iter().filter(|d| !d.name.is_empty()) {
        *names.entry(d.name.as_str()).or_default() += 1;
    }
    Environment {
        tool: dash(match &r.tool_version {
            Some(v) => format!("{} {v}", r.source),
            None => r.source.clone(),
        }),
        library: dash(r.library.clone().unwrap_or_default()),
        ranks: if r.settings.world_size > 0 {
            r.settings.world_size.to_string()
        } else {
            "-".to_string()
        },
        hosts: dash(hosts.into_iter().collect::<Vec<_>>().join(", ")),
        devices: dash(
            names
                .iter()
                .map(|(n, k)| format!("{k} x {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// Footnotes for conventions that differ between tools, once per source.
pub fn notes(records: &[Record]) -> Vec<&'static str> {
    let mut out = Vec::new();
    if records.iter().any(|r| r.source == "nccom-test") {
        out.push(
            "nccom-test: time is the P50 over iterations, and its GB is 2^30 bytes \
             (figures are as printed, about 7.4% below decimal-GB bandwidths).",
        );
    }
    if records.iter().any(|r| r.source == "osu") {
        out.push(
            "OSU: latency tests report time (algbw = size / latency only where size is the whole \
             buffer: osu_latency, osu_allreduce, osu_reduce, osu_bcast); bandwidth tests report \
             algbw (also in MB/s, as OSU prints it) and no time; OSU prints no rank count, so no busbw.",
        );
    }
    out
}

/// Distinct ops over all runs, in first-seen order.
pub fn all_ops(runs: &[Run]) -> Vec<String> {
    let mut ops: Vec<String> = Vec::new();
    for run in runs {
        for op in run.record.ops() {
            if !ops.contains(&op) {
                ops.push(op);
            }
        }
    }
    ops
}

/// Chart lines for one op: one per run (and per type, redop and root when
/// a run measured several), with `value` taken from the main placement.
pub fn op_series(runs: &[Run], op: &str, value: fn(&Placement) -> f64) -> Vec<charts::Series> {
    let mut out = Vec::new();
    for run in runs {
        let mut keys: Vec<(String, String, i64)> = Vec::new();
        for c in run.record.op_results(op) {
            let k = (c.dtype.clone(), c.redop.clone(), c.root);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        for k in &keys {
            let mut label = run.label.clone();
            if keys.len() > 1 {
                // Name only what tells the lines apart: type, redop, root.
                for (part, differs) in [
                    (k.0.clone(), keys.iter().any(|o| o.0 != k.0)),
                    (k.1.clone(), keys.iter().any(|o| o.1 != k.1)),
                    (format!("root {}", k.2), keys.iter().any(|o| o.2 != k.2)),
                ] {
                    if differs {
                        label = format!("{label} {part}");
                    }
                }
            }
            let points = run
                .record
                .op_results(op)
                .filter(|c| (&c.dtype, &c.redop, c.root) == (&k.0, &k.1, k.2))
                .filter_map(|c| main_placement(c).map(|p| (c.size_bytes as f64, value(p))))
                .collect();
            out.push(charts::Series { label, points });
        }
    }
    out
}
