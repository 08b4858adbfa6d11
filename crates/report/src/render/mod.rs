//! Report writers: Markdown for GitHub and HTML with inline SVG charts.
//! Both read the same [`Run`] views built here, so they show the same
//! rows, labels and notes.

pub mod charts;
pub mod html;
pub mod markdown;

use crate::metrics::{self, or_dash};
use crate::units;
use collbench_core::{CaseResult, Placement, Record};
use std::collections::BTreeMap;

/// A table both renderers print: header, which columns are numeric
/// (right-aligned), and rows of formatted cells.
pub struct Table {
    pub header: Vec<&'static str>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

/// Op -> busbw at the largest size, peak busbw, time at the smallest size
/// (like vendors' baseline tables), one row per (op, type, run), grouped by
/// op so that runs sit next to each other.
pub fn summary_table(runs: &[Run]) -> Table {
    let mut rows = Vec::new();
    for op in all_ops(runs) {
        for run in runs {
            for s in run.record.summaries().into_iter().filter(|s| s.op == op) {
                let shown = metrics::shown(&s.op);
                let checked = run
                    .record
                    .op_results(&s.op)
                    .filter(|c| c.dtype == s.dtype)
                    .flat_map(|c| c.placements())
                    .any(|(_, p)| p.wrong.is_some());
                rows.push(vec![
                    s.op.clone(),
                    s.dtype.clone(),
                    run.label.clone(),
                    or_dash(shown.busbw, units::gbps(s.busbw_at_largest_gbps)),
                    units::bytes(s.largest_bytes),
                    or_dash(shown.busbw, units::gbps(s.peak_busbw_gbps)),
                    or_dash(shown.busbw, units::bytes(s.peak_at_bytes)),
                    or_dash(shown.time, units::us(s.time_at_smallest_us)),
                    units::bytes(s.smallest_bytes),
                    if checked {
                        s.wrong.to_string()
                    } else {
                        "N/A".to_string()
                    },
                ]);
            }
        }
    }
    Table {
        header: vec![
            "op",
            "type",
            "run",
            "busbw at largest (GB/s)",
            "largest",
            "peak busbw (GB/s)",
            "peak at",
            "time at smallest (µs)",
            "smallest",
            "#wrong",
        ],
        numeric: vec![
            false, false, false, true, true, true, true, true, true, true,
        ],
        rows,
    }
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
    Table {
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
    }
}

/// Size, count, type, redop, root, then time/algbw/busbw/#wrong for
/// out-of-place and, when any case measured it, in-place.
pub fn cases_table(cases: &[&CaseResult]) -> Table {
    let has_ip = cases.iter().any(|c| c.in_place.is_some());
    let mut header = vec![
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time (µs)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "#wrong",
    ];
    if has_ip {
        header.extend([
            "in-place time (µs)",
            "in-place algbw (GB/s)",
            "in-place busbw (GB/s)",
            "in-place #wrong",
        ]);
    }
    let has_mbps = cases.iter().any(|c| metrics::shown(&c.op).mbps);
    if has_mbps {
        header.push("bandwidth (MB/s)");
    }
    let numeric = (0..header.len()).map(|i| !(i == 2 || i == 3)).collect();
    let rows = cases
        .iter()
        .map(|c| {
            let mut row = vec![
                units::bytes(c.size_bytes),
                c.count.to_string(),
                c.dtype.clone(),
                c.redop.clone(),
                c.root.to_string(),
            ];
            let halves = if has_ip {
                vec![&c.out_of_place, &c.in_place]
            } else {
                vec![&c.out_of_place]
            };
            let shown = metrics::shown(&c.op);
            for p in halves {
                match p {
                    Some(p) => row.extend([
                        or_dash(shown.time, units::us(p.time_us)),
                        or_dash(shown.algbw, units::gbps(p.algbw_gbps)),
                        or_dash(shown.busbw, units::gbps(p.busbw_gbps)),
                        units::wrong(p.wrong),
                    ]),
                    None => row.extend(std::iter::repeat_n("-".to_string(), 4)),
                }
            }
            if has_mbps {
                // OSU prints MB/s (10^6 B/s); algbw holds it in GB/s.
                row.push(or_dash(
                    shown.mbps,
                    main_placement(c).map_or_else(|| "-".into(), |p| units::us(p.algbw_gbps * 1e3)),
                ));
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
