//! Markdown tables for tickets and pull requests: the one table model
//! ([`Table`]), the one GitHub table writer ([`table`]) and the tables of a
//! record ([`cases_table`], [`summary_table`]). `collbench run --output
//! FILE.md` and `collbench report` both print through here, so a case
//! looks the same in both.

use crate::metrics::{self, or_dash};
use crate::units;
use crate::Exporter;
use collbench_core::{CaseResult, Record};
use std::fmt::Write;

/// A table: header, which columns are numeric (right-aligned), and rows
/// of formatted cells. Markdown and HTML writers both print it.
pub struct Table {
    pub header: Vec<&'static str>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

/// A GitHub table; `|` inside cells is escaped so it cannot split a cell.
pub fn table(t: &Table) -> String {
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

/// Size, count, type, redop, root, then time/algbw/busbw/#wrong for
/// out-of-place and, when any case measured it, in-place (`-` where a
/// case lacks a placement or a figure means nothing for the test, see
/// [`metrics`]); OSU bandwidth tests add their figure in MB/s as printed.
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
                let main = c.out_of_place.as_ref().or(c.in_place.as_ref());
                row.push(or_dash(
                    shown.mbps,
                    main.map_or_else(|| "-".into(), |p| units::us(p.algbw_gbps * 1e3)),
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

/// Op -> busbw at the largest size, peak busbw, time at the smallest size
/// (like vendors' baseline tables), one row per (op, type) of each record,
/// grouped by op so that records sit next to each other. With `labels`
/// (one per record) a `run` column names the record of each row.
pub fn summary_table(records: &[&Record], labels: Option<&[String]>) -> Table {
    let mut ops: Vec<String> = Vec::new();
    for op in records.iter().flat_map(|r| r.ops()) {
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    let mut rows = Vec::new();
    for op in ops {
        for (i, record) in records.iter().enumerate() {
            for s in record.summaries().into_iter().filter(|s| s.op == op) {
                let shown = metrics::shown(&s.op);
                // Unchecked runs (OSU, logs without #wrong) say N/A, not 0.
                let checked = record
                    .op_results(&s.op)
                    .filter(|c| c.dtype == s.dtype)
                    .flat_map(|c| c.placements())
                    .any(|(_, p)| p.wrong.is_some());
                let mut row = vec![s.op.clone(), s.dtype.clone()];
                if let Some(labels) = labels {
                    row.push(labels[i].clone());
                }
                row.extend([
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
                rows.push(row);
            }
        }
    }
    let mut header = vec!["op", "type"];
    if labels.is_some() {
        header.push("run");
    }
    header.extend([
        "busbw at largest (GB/s)",
        "largest",
        "peak busbw (GB/s)",
        "peak at",
        "time at smallest (µs)",
        "smallest",
        "#wrong",
    ]);
    let text_columns = header.len() - 7;
    let numeric = (0..header.len()).map(|i| i >= text_columns).collect();
    Table {
        header,
        numeric,
        rows,
    }
}

/// One table per collective plus the summary.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let mut s = format!(
            "# collbench results\n\nBackend: {}; library: {}; ranks: {}\n\n",
            record.backend.as_deref().unwrap_or("?"),
            record.library.as_deref().unwrap_or("none"),
            record.settings.world_size
        );
        for op in record.ops() {
            let _ = writeln!(s, "## {op}\n");
            s += &table(&cases_table(&record.op_results(&op).collect::<Vec<_>>()));
            s.push('\n');
        }
        s += "## Summary\n\n";
        s += &table(&summary_table(&[record], None));
        s.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::Placement;

    fn case(op: &str, size: u64, in_place: bool) -> CaseResult {
        let p = |busbw: f64| Placement {
            time_us: 10.0,
            algbw_gbps: busbw,
            busbw_gbps: busbw,
            wrong: Some(0),
            ..Placement::default()
        };
        CaseResult {
            op: op.into(),
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            size_bytes: size,
            count: size / 4,
            out_of_place: Some(p(1.5)),
            in_place: in_place.then(|| p(2.0)),
        }
    }

    #[test]
    fn in_place_columns_only_when_measured() {
        let a = case("all_reduce", 1024, false);
        let t = cases_table(&[&a]);
        assert_eq!(t.header.len(), 9);
        assert_eq!(t.rows[0][0], "1 KiB");
        let b = case("all_reduce", 2048, true);
        let t = cases_table(&[&a, &b]);
        assert_eq!(t.header.len(), 13);
        assert_eq!(t.rows[0][9], "-");
        assert_eq!(t.rows[1][11], "2.00");
    }

    #[test]
    fn exporter_writes_github_tables() {
        let mut r = Record::new("collbench");
        r.results = vec![
            case("all_reduce", 1024, true),
            case("all_reduce", 4096, true),
        ];
        let md = String::from_utf8(MarkdownExporter.serialize(&r)).unwrap();
        assert!(
            md.contains("## all_reduce\n\n| size | count | type |"),
            "{md}"
        );
        assert!(md.contains("| 4 KiB | 1024 | float | sum | -1 | 10.00 | 1.50 | 1.50 | 0 | 10.00 | 2.00 | 2.00 | 0 |"), "{md}");
        assert!(
            md.contains("## Summary\n\n| op | type | busbw at largest (GB/s) |"),
            "{md}"
        );
        assert!(
            md.contains("| all_reduce | float | 1.50 | 4 KiB | 1.50 | 4 KiB | 10.00 | 1 KiB | 0 |"),
            "{md}"
        );
        // A delimiter row follows every header.
        for (i, line) in md.lines().enumerate() {
            if line.starts_with("| size |") || line.starts_with("| op |") {
                assert!(md.lines().nth(i + 1).unwrap().starts_with("| "));
                assert!(md.lines().nth(i + 1).unwrap().ends_with(": |"));
            }
        }
    }
}
