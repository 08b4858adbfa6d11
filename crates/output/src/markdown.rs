//! Markdown tables for tickets and pull requests: the one table model
//! ([`Table`]), the one GitHub table writer ([`table`]) and the tables of a
//! record ([`cases_table`], [`summary_table`]). `collbench run --output
//! FILE.md` and `collbench report` both print through here, so a case
//! looks the same in both.

use crate::ceiling_cells;
use crate::metrics::{self, or_dash};
use crate::units;
use crate::Exporter;
use collbench_core::explain::BUSBW_NOTE;
use collbench_core::{CaseResult, Placement, Record};
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
/// When some case says what NCCL ran (docs/explain.md), the algorithm,
/// protocol and channels of each placement follow ([`explain_cells`]);
/// [`cases_notes`] gives the footnotes for them.
pub fn cases_table(cases: &[&CaseResult]) -> Table {
    let columns = Columns::of(cases);
    let (header, numeric) = columns.header();
    let rows = cases.iter().map(|c| columns.row(c)).collect();
    Table {
        header,
        numeric,
        rows,
    }
}

/// Which optional columns of [`cases_table`] its cases fill: each group
/// is shown when any case has it.
struct Columns {
    /// In-place time, bandwidths and `#wrong` beside out-of-place.
    in_place: bool,
    /// OSU bandwidth tests' figure in MB/s, as printed.
    mbps: bool,
    /// Message rate (messages/s).
    rate: bool,
    /// Ceiling, percentage of it and bottleneck (docs/ceiling.md).
    ceiling: bool,
    /// Why a row is low, beside its ceiling (docs/ceiling.md).
    why: bool,
    /// What NCCL ran: algorithm, protocol and channels (docs/explain.md).
    explain: bool,
}

impl Columns {
    /// The column groups `cases` fill.
    fn of(cases: &[&CaseResult]) -> Columns {
        Columns {
            in_place: cases.iter().any(|c| c.in_place.is_some()),
            mbps: cases.iter().any(|c| metrics::shown(&c.op).mbps),
            rate: cases.iter().any(|c| metrics::has_message_rate(&c.op)),
            ceiling: cases
                .iter()
                .any(|c| c.placements().any(|(_, p)| p.ceiling.is_some())),
            why: cases
                .iter()
                .any(|c| c.placements().any(|(_, p)| !p.why.is_empty())),
            explain: cases
                .iter()
                .any(|c| c.placements().any(|(_, p)| p.explain.is_some())),
        }
    }

    /// The header, and which of its columns are numeric (right-aligned).
    fn header(&self) -> (Vec<&'static str>, Vec<bool>) {
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
        if self.in_place {
            header.extend([
                "in-place time (µs)",
                "in-place algbw (GB/s)",
                "in-place busbw (GB/s)",
                "in-place #wrong",
            ]);
        }
        if self.mbps {
            header.push("bandwidth (MB/s)");
        }
        if self.rate {
            header.push("messages/s");
        }
        if self.ceiling {
            header.extend(["ceiling (GB/s)", "% of ceiling", "bottleneck"]);
        }
        if self.why {
            header.push("why");
        }
        let explained_from = header.len();
        if self.explain {
            header.extend(["algo", "proto", "channels"]);
            if self.in_place {
                header.extend(["in-place algo", "in-place proto", "in-place channels"]);
            }
        }
        // Text columns: type, redop, the bottleneck, why, and the
        // explanation's algo and proto.
        let numeric = (0..header.len())
            .map(|i| {
                let text_explain = i >= explained_from && (i - explained_from) % 3 != 2;
                let words = matches!(header[i], "bottleneck" | "why");
                !(i == 2 || i == 3 || text_explain || words)
            })
            .collect();
        (header, numeric)
    }

    /// The cells of case `c`, one per column of [`Columns::header`].
    fn row(&self, c: &CaseResult) -> Vec<String> {
        let mut row = vec![
            units::bytes(c.size_bytes),
            c.count.to_string(),
            c.dtype.clone(),
            c.redop.clone(),
            c.root.to_string(),
        ];
        let halves = if self.in_place {
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
        row.extend(osu_cells(c, self.mbps, self.rate));
        if self.ceiling {
            row.extend(ceiling_cells::ceiling_cells(c));
        }
        if self.why {
            row.push(ceiling_cells::why_cell(c));
        }
        if self.explain {
            row.extend(explain_cells(c.out_of_place.as_ref()));
            if self.in_place {
                row.extend(explain_cells(c.in_place.as_ref()));
            }
        }
        row
    }
}

/// Algorithm, protocol and channels of a placement, as `run --explain`
/// shows them: `*` after an in-network or multicast algorithm (busbw
/// overstated), `n/a` where NCCL could not say, `-` where the placement
/// was not measured or its backend cannot say.
pub fn explain_cells(p: Option<&Placement>) -> [String; 3] {
    let dash = || ["-".to_string(), "-".to_string(), "-".to_string()];
    let Some(e) = p.and_then(|p| p.explain.as_ref()) else {
        return dash();
    };
    if e.kernels.is_empty() {
        return ["n/a".to_string(), "n/a".to_string(), "n/a".to_string()];
    }
    let mark = if e.busbw_overstated { "*" } else { "" };
    [
        format!("{}{mark}", e.algo_text()),
        e.proto_text(),
        e.channels_text(),
    ]
}

/// Footnotes for the explanation columns of [`cases_table`]: what `*`
/// means, why cells say `n/a`, ranks that reported nothing. Empty when no
/// case has any of these.
pub fn cases_notes(cases: &[&CaseResult]) -> Vec<String> {
    let mut in_network: Vec<String> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut missing = false;
    for e in cases
        .iter()
        .flat_map(|c| c.placements())
        .filter_map(|(_, p)| p.explain.as_ref())
    {
        if e.busbw_overstated {
            for k in e.kernels.iter().filter(|k| k.in_network()) {
                if !in_network.contains(&k.algo) {
                    in_network.push(k.algo.clone());
                }
            }
        }
        if e.kernels.is_empty() {
            let why = e
                .unavailable
                .clone()
                .unwrap_or_else(|| "NCCL reported no kernel".to_string());
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        missing |= !e.missing_ranks.is_empty();
    }
    let mut out = Vec::new();
    if !in_network.is_empty() {
        out.push(format!("algo* ({}): {BUSBW_NOTE}", in_network.join(", ")));
    }
    for why in reasons {
        out.push(format!("n/a: {why}"));
    }
    if missing {
        out.push(
            "some ranks reported no kernel for some cases; the columns show the other ranks'"
                .to_string(),
        );
    }
    out.extend(ceiling_cells::why_notes(cases));
    out
}

/// The OSU columns of a row: the bandwidth in MB/s as OSU printed it
/// (algbw holds it in GB/s) and `osu_mbw_mr`'s messages/s (its bandwidth
/// over the size), each only where the table has the column.
fn osu_cells(c: &CaseResult, has_mbps: bool, has_rate: bool) -> Vec<String> {
    let main = c.out_of_place.as_ref().or(c.in_place.as_ref());
    let mut cells = Vec::new();
    if has_mbps {
        let mbps = main.map_or_else(|| "-".into(), |p| units::us(p.algbw_gbps * 1e3));
        cells.push(or_dash(metrics::shown(&c.op).mbps, mbps));
    }
    if has_rate {
        let rate = main
            .filter(|_| metrics::has_message_rate(&c.op) && c.size_bytes > 0)
            .map(|p| p.algbw_gbps * 1e9 / c.size_bytes as f64);
        cells.push(rate.map_or_else(|| "-".into(), |r| format!("{r:.2}")));
    }
    cells
}

/// An OSU bandwidth test has no busbw: its summary cells give the
/// bandwidth as OSU printed it (`101.40 MB/s`) at the largest size and
/// at its peak, so the row is not all dashes.
fn osu_bandwidth_summary(record: &Record, op: &str, dtype: &str) -> (String, String, String) {
    let figures: Vec<(u64, f64)> = record
        .op_results(op)
        .filter(|c| c.dtype == dtype)
        .filter_map(|c| {
            let p = c.out_of_place.as_ref().or(c.in_place.as_ref())?;
            Some((c.size_bytes, p.algbw_gbps * 1e3))
        })
        .collect();
    let mbps = |v: f64| format!("{} MB/s", units::us(v));
    let largest = figures.iter().max_by_key(|(size, _)| *size);
    let peak = figures.iter().max_by(|a, b| a.1.total_cmp(&b.1));
    (
        largest.map_or_else(|| "-".into(), |(_, v)| mbps(*v)),
        peak.map_or_else(|| "-".into(), |(_, v)| mbps(*v)),
        peak.map_or_else(|| "-".into(), |(size, _)| units::bytes(*size)),
    )
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
                let (at_largest, peak, peak_at) = if shown.mbps {
                    osu_bandwidth_summary(record, &s.op, &s.dtype)
                } else {
                    (
                        or_dash(shown.busbw, units::gbps(s.busbw_at_largest_gbps)),
                        or_dash(shown.busbw, units::gbps(s.peak_busbw_gbps)),
                        or_dash(shown.busbw, units::bytes(s.peak_at_bytes)),
                    )
                };
                row.extend([
                    at_largest,
                    units::bytes(s.largest_bytes),
                    peak,
                    peak_at,
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
            let cases = record.op_results(&op).collect::<Vec<_>>();
            s += &table(&cases_table(&cases));
            s.push('\n');
            let notes = cases_notes(&cases);
            for n in &notes {
                let _ = writeln!(s, "- {n}");
            }
            if !notes.is_empty() {
                s.push('\n');
            }
        }
        s += "## Summary\n\n";
        s += &table(&summary_table(&[record], None));
        // One rule for every format: a stopped run says so in its last
        // line, where a reader of a cut-short file looks.
        if let Some(why) = &record.partial {
            let _ = writeln!(s, "\n**Partial:** {why}.");
        }
        s.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Explanation, KernelChoice};

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
    fn ceiling_columns_give_the_best_placement_as_a_share_of_it() {
        let plain = case("all_reduce", 1024, true);
        assert!(!cases_table(&[&plain]).header.contains(&"% of ceiling"));
        let mut bound = case("all_reduce", 1 << 26, true);
        let ceiling = collbench_core::Ceiling {
            busbw_gbps: 4.0,
            bottleneck: collbench_core::Bottleneck::HostMemory,
            algorithm: collbench_core::Algorithm::Ring,
            why: "test".into(),
        };
        bound.out_of_place.as_mut().unwrap().ceiling = Some(ceiling.clone());
        bound.in_place.as_mut().unwrap().ceiling = Some(ceiling);
        let t = cases_table(&[&plain, &bound]);
        let at = t.header.iter().position(|h| *h == "% of ceiling").unwrap();
        // In-place's 2.0 of 4.0 is the better placement.
        assert_eq!(t.rows[1][at - 1..=at + 1], ["4.00", "50%", "host memory"]);
        assert_eq!(t.rows[0][at], "-");
        assert!(t.numeric[at] && !t.numeric[at + 1]);
    }

    fn explained(algo: &str, proto: &str, channels: u64) -> Option<Box<Explanation>> {
        Some(Box::new(Explanation::from_kernels(
            [KernelChoice::new("AllReduce", algo, proto, channels)],
            [],
            0,
        )))
    }

    #[test]
    fn explanation_columns_only_when_some_case_has_one() {
        let plain = case("all_reduce", 1024, true);
        assert!(!cases_table(&[&plain]).header.contains(&"algo"));
        assert!(cases_notes(&[&plain]).is_empty());

        let mut ring = case("all_reduce", 1024, true);
        ring.out_of_place.as_mut().unwrap().explain = explained("RING", "LL", 2);
        ring.in_place.as_mut().unwrap().explain = explained("RING", "LL", 2);
        let mut nvls = case("all_reduce", 1 << 30, true);
        nvls.out_of_place.as_mut().unwrap().explain = explained("NVLS", "SIMPLE", 16);
        nvls.in_place.as_mut().unwrap().explain = Some(Box::new(Explanation::unavailable(
            "NCCL_PROFILER_PLUGIN is set by the user",
        )));
        let t = cases_table(&[&plain, &ring, &nvls]);
        assert_eq!(
            t.header[13..],
            [
                "algo",
                "proto",
                "channels",
                "in-place algo",
                "in-place proto",
                "in-place channels"
            ]
        );
        assert_eq!(t.numeric[13..], [false, false, true, false, false, true]);
        assert_eq!(t.rows[0][13..], ["-", "-", "-", "-", "-", "-"]);
        assert_eq!(t.rows[1][13..], ["RING", "LL", "2", "RING", "LL", "2"]);
        assert_eq!(
            t.rows[2][13..],
            ["NVLS*", "SIMPLE", "16", "n/a", "n/a", "n/a"]
        );
        assert_eq!(
            cases_notes(&[&plain, &ring, &nvls]),
            [
                format!("algo* (NVLS): {BUSBW_NOTE}"),
                "n/a: NCCL_PROFILER_PLUGIN is set by the user".to_string()
            ]
        );
        // Out-of-place only: three columns.
        let mut oop = case("all_reduce", 1024, false);
        oop.out_of_place.as_mut().unwrap().explain = explained("TREE", "LL128", 4);
        let t = cases_table(&[&oop]);
        assert_eq!(t.header.len(), 12);
        assert_eq!(t.rows[0][9..], ["TREE", "LL128", "4"]);
        let mut r = Record::new("collbench");
        r.results = vec![nvls];
        let md = String::from_utf8(MarkdownExporter.serialize(&r)).unwrap();
        assert!(
            md.contains("| NVLS* | SIMPLE | 16 | n/a | n/a | n/a |\n\n- algo* (NVLS): "),
            "{md}"
        );
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

    #[test]
    fn a_partial_run_says_so_in_its_last_line() {
        let mut r = Record::new("collbench");
        r.results = vec![case("all_reduce", 1024, true)];
        r.partial = Some("interrupted by a signal after 1 row".into());
        let md = String::from_utf8(MarkdownExporter.serialize(&r)).unwrap();
        assert_eq!(
            md.lines().last(),
            Some("**Partial:** interrupted by a signal after 1 row.")
        );
        assert_eq!(md.matches("Partial").count(), 1, "{md}");
    }
}
