//! OSU Micro-Benchmarks output:
//!
//! ```text
//! # OSU MPI Allreduce Latency Test v7.4
//! # Datatype: MPI_CHAR.
//! # Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
//! 1                      39.87 ...
//! ```
//!
//! Op names are `osu_` plus the benchmark: `osu_allreduce`, `osu_alltoall`,
//! `osu_bcast`, `osu_latency`, `osu_bw`, `osu_bibw`, ... (from the title).
//! Each title starts a new record.
//!
//! Units come from the header cells (`Avg Latency(us)`, `Bandwidth (MB/s)`);
//! a unit we do not know is an error.
//!
//! Mapping into [`Placement`] (see [`crate::metrics`] for what reports show):
//! * latency tables: `time_us` = the average latency; `algbw_gbps` = size /
//!   latency (decimal GB/s) only where size is the whole buffer
//!   (`osu_latency`, `osu_allreduce`, `osu_reduce`, `osu_bcast`), else 0;
//!   `-f` min/max/iterations go into `stats` and `iterations`.
//! * bandwidth tables (`MB/s`, where OSU's MB is 10^6 bytes): `algbw_gbps` =
//!   MB/s / 1000; `time_us` stays 0 (OSU measured no time per message).
//! * `busbw_gbps` stays 0: OSU prints no rank count, so no bus factor applies.
//! * A `Validation` column (`Pass`/`Fail`) becomes `wrong` 0/1; without one
//!   `wrong` is `None` (N/A), never 0.

use super::foreign::own_part;
use super::pieces::Pieces;
use super::text::{
    expect_values, float, is_figure, is_uint, last_line, num, numbered_lines, partial_row,
};
use super::unit::{self, SourceUnits};
use super::{Notes, ParseError};
use crate::metrics;
use collbench_core::{CaseResult, Placement, Record, TimeStats};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    Size,
    AvgLatency,
    MinLatency,
    MaxLatency,
    P50,
    P99,
    Bandwidth,
    Iterations,
    Validation,
    Other,
}

/// Parses OSU output: one record per benchmark title.
pub fn parse(text: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let last = last_line(text);
    let mut units = SourceUnits::default();
    let mut records = Vec::new();
    let mut cur: Option<Record> = None;
    let mut op = String::from("osu_unknown");
    let mut dtype = String::from("char");
    let mut cols: Option<(Vec<Col>, String)> = None;
    let mut pieces = Pieces::default();
    for (line_no, raw) in numbered_lines(text) {
        // Text other processes printed into a row (NCCL, UCX, a crash).
        let raw = own_part(raw);
        let line = raw.trim();
        // A title or header pasted without its '#' is read as one.
        let body = line.strip_prefix('#').map(str::trim).or_else(|| {
            let bare = line.starts_with("OSU ") && line.contains("Test")
                || line.starts_with("Size") && (line.contains("  ") || line.contains('\t'))
                || is_overall_header(line);
            bare.then_some(line)
        });
        if let Some(body) = body {
            pieces.end_table(notes)?;
            if body.starts_with("OSU ") {
                keep(&mut records, cur.take(), units, notes);
                op = op_from_title(body);
                cur = Some(titled(body));
                cols = None;
            } else if let Some(t) = body.strip_prefix("Datatype:") {
                dtype = datatype(t);
            } else if body.starts_with("Size")
                || body.starts_with("Avg Latency")
                || is_overall_header(body)
            {
                // osu_barrier and osu_ibarrier have no size: one figure
                // per run.
                units = SourceUnits::default();
                cols = Some(header(body, line_no, &mut units)?);
            }
            continue;
        }
        let all: Vec<&str> = line.split_whitespace().collect();
        let (Some((c, names)), Some(first)) = (&cols, all.first()) else {
            continue;
        };
        let sized = c.first() == Some(&Col::Size);
        let starts = is_uint(first) || !sized && is_figure(first);
        let shape = (c.len(), starts, line_no == last);
        let Some((cells, line_no)) = pieces.row_of(&all, line_no, shape, notes)? else {
            continue;
        };
        let tokens: Vec<&str> = cells.iter().map(String::as_str).collect();
        let rec = cur.get_or_insert_with(|| Record::new("osu"));
        // A row the writer stopped inside may read as numbers ("430" of
        // "43092.92"): never trust it.
        let parsed = if line_no == last && notes.cut_last_line {
            Err(ParseError::whole("cut"))
        } else {
            row(c, names, &tokens, &op, &dtype, line_no, units)
        };
        match parsed {
            Ok(r) => rec.results.push(r),
            Err(_) if line_no == last && (tokens.len() < c.len() || notes.cut_last_line) => {
                notes.cut_short(line_no, partial_row(line_no, rec.results.len()));
            }
            Err(e) => notes.skip(e)?,
        }
    }
    pieces.end_text(notes, cur.as_ref().map_or(0, |r| r.results.len()));
    keep(&mut records, cur, units, notes);
    if records.is_empty() {
        return Err(ParseError::whole(
            "no OSU rows found (expected a '# OSU ... Test' title, a '# Size ...' header and rows)",
        ));
    }
    Ok(records)
}

/// Adds `record` to `records` unless it has no rows, noting its source
/// units where they were not us/GB/s.
fn keep(records: &mut Vec<Record>, record: Option<Record>, units: SourceUnits, notes: &mut Notes) {
    if let Some(r) = record.filter(|r| !r.results.is_empty()) {
        if !units.is_default() {
            notes.units.insert(records.len(), units);
        }
        records.push(r);
    }
}

/// The record a title line starts (`OSU MPI Allreduce Latency Test
/// v7.4`, without its `#`): the version from its last word, the title as
/// its command line.
fn titled(title: &str) -> Record {
    let mut rec = Record::new("osu");
    rec.tool_version = title
        .split_whitespace()
        .last()
        .and_then(|v| v.strip_prefix('v'))
        .map(str::to_string);
    rec.command_line = vec![title.to_string()];
    rec
}

/// The columns of a `# Size ...` header line (without its `#`; cells are
/// separated by two or more spaces, or by tabs as OSU 2.x printed them:
/// `# Size\t\tBandwidth (MB/s)`), and their names joined for errors; the
/// units of its cells go to `units`.
fn header(
    body: &str,
    line_no: usize,
    units: &mut SourceUnits,
) -> Result<(Vec<Col>, String), ParseError> {
    let names: Vec<&str> = body
        .split('\t')
        .flat_map(|cell| cell.split("  "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let mut c = Vec::new();
    for n in &names {
        c.push(column(n, line_no, units)?);
    }
    Ok((c, names.join(" | ")))
}

/// A header cell; latency and bandwidth cells must carry a unit we know,
/// which goes to `units`.
fn column(name: &str, line_no: usize, units: &mut SourceUnits) -> Result<Col, ParseError> {
    let n = name.to_ascii_lowercase();
    let is_bw = n.contains("bandwidth") || n == "mb/s" || n.starts_with("mb/s");
    let is_time = n.contains("lat")
        || n.starts_with("p50")
        || n.starts_with("p99")
        || n.starts_with("overall");
    if is_bw || is_time {
        let u = if n == "mb/s" {
            Some("MB/s")
        } else {
            unit::in_parens(name)
        };
        let bad = || {
            ParseError::at(
                line_no,
                format!(
                    "no known unit in header cell '{name}' (expected a latency in us or ms, a bandwidth in MB/s or GB/s)"
                ),
            )
        };
        let u = u.ok_or_else(bad)?;
        if is_bw {
            units.bandwidth = unit::bandwidth(u).ok_or_else(bad)?.0;
        } else {
            let t = unit::time(u).ok_or_else(bad)?.0;
            if units.time != t && units.time != SourceUnits::default().time {
                return Err(bad());
            }
            units.time = t;
        }
    }
    Ok(column_kind(&n))
}

/// Whether `line` (without its `#`) is a non-blocking test's header
/// (`Overall(us)  Compute(us)  Pure Comm.(us)  Overlap(%)`, after `Size`
/// where the test has sizes; OSU prints the barrier's without a `#`), not
/// its `Overall = Coll. Init + ...` legend.
fn is_overall_header(line: &str) -> bool {
    let line = line.strip_prefix("Size").unwrap_or(line).trim_start();
    line.starts_with("Overall(") && line.contains("Compute(")
}

/// Latency columns by the start of their lower-case name.
const LATENCY_PREFIXES: [(&str, Col); 4] = [
    ("min", Col::MinLatency),
    ("max", Col::MaxLatency),
    ("p50", Col::P50),
    ("p99", Col::P99),
];

fn column_kind(n: &str) -> Col {
    // `Min Comm.(us)` of a non-blocking test's full table is no latency.
    let latency = LATENCY_PREFIXES
        .iter()
        .find(|(p, _)| n.starts_with(p) && n.contains("lat"));
    if n == "size" {
        Col::Size
    } else if n.starts_with("overall") {
        // A non-blocking test's time of the whole operation (`Overall =
        // Coll. Init + Compute + MPI_Test + MPI_Wait`): its latency.
        Col::AvgLatency
    } else if n.contains("bandwidth") || n.starts_with("mb/s") {
        Col::Bandwidth
    } else if let Some(&(_, col)) = latency {
        col
    } else if n.contains("lat") {
        Col::AvgLatency
    } else if n.starts_with("iterations") {
        Col::Iterations
    } else if n.starts_with("validation") {
        Col::Validation
    } else {
        Col::Other
    }
}

fn row(
    cols: &[Col],
    names: &str,
    tokens: &[&str],
    op: &str,
    dtype: &str,
    line_no: usize,
    units: SourceUnits,
) -> Result<CaseResult, ParseError> {
    let (to_us, to_gbps) = (units.to_us(), units.to_gbps());
    let lat = format!("a latency in {}", units.time);
    let bw = format!("a bandwidth in {}", units.bandwidth);
    expect_values(tokens, cols.len(), names, line_no)?;
    let mut size = 0u64;
    let mut p = Placement::default();
    let (mut min, mut max, mut p50, mut p99) = (None, None, None, None);
    let mut mbps = None;
    for (col, tok) in cols.iter().zip(tokens) {
        match col {
            Col::Size => size = num(tok, line_no, "the message size in bytes")?,
            Col::AvgLatency => p.time_us = float(tok, line_no, &lat)? * to_us,
            Col::MinLatency => min = Some(float(tok, line_no, &lat)? * to_us),
            Col::MaxLatency => max = Some(float(tok, line_no, &lat)? * to_us),
            Col::P50 => p50 = Some(float(tok, line_no, &lat)? * to_us),
            Col::P99 => p99 = Some(float(tok, line_no, &lat)? * to_us),
            Col::Bandwidth => mbps = Some(float(tok, line_no, &bw)?),
            Col::Iterations => p.iterations = num(tok, line_no, "the iteration count")?,
            Col::Validation => p.wrong = Some(u64::from(!tok.eq_ignore_ascii_case("pass"))),
            Col::Other => {}
        }
    }
    match mbps {
        Some(bw) => p.algbw_gbps = bw * to_gbps,
        None if metrics::osu_algbw_meaningful(op) && p.time_us > 0.0 => {
            p.algbw_gbps = size as f64 / (p.time_us * 1e3)
        }
        None => {}
    }
    if min.is_some() || max.is_some() {
        p.stats = Some(TimeStats {
            mean_us: p.time_us,
            min_us: min.unwrap_or(p.time_us),
            p50_us: p50.unwrap_or(p.time_us),
            p99_us: p99.unwrap_or(p.time_us),
            max_us: max.unwrap_or(p.time_us),
            stdev_us: 0.0,
            samples: p.iterations,
        });
    }
    Ok(CaseResult {
        op: op.to_string(),
        size_bytes: size,
        count: size / elem_size(dtype),
        dtype: dtype.to_string(),
        redop: String::new(),
        root: -1,
        out_of_place: Some(p),
        in_place: None,
    })
}

/// `# OSU MPI Allreduce Latency Test v7.4` -> `osu_allreduce`.
fn op_from_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    let library = words.get(1).copied().unwrap_or("");
    // One-sided tests name the MPI call: `OSU MPI_Get_accumulate latency
    // Test` is `osu_get_acc_latency`.
    if let Some(call) = library.strip_prefix("MPI_") {
        return one_sided(call, &words);
    }
    // OSU 7's xCCL tests (`OSU NCCL-CUDA Allreduce Latency Test`) are
    // `osu_xccl_allreduce`.
    let xccl = library.contains("CCL");
    let end = words
        .iter()
        .position(|w| *w == "Test")
        .unwrap_or(words.len());
    // Skip "OSU" and the library word (MPI, MPI-CUDA, NCCL, OpenSHMEM, UPC...).
    let mut body: Vec<String> = words
        .get(2..end)
        .unwrap_or(&[])
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let kind = body.last().cloned().unwrap_or_default();
    if kind == "latency" || kind == "bandwidth" {
        body.pop();
    }
    let name = match (body.first().map(String::as_str), kind.as_str()) {
        (None, "latency") => "latency".to_string(),
        (None, "bandwidth") => "bw".to_string(),
        (Some("bi-directional"), _) => "bibw".to_string(),
        (Some("multiple"), _) => "mbw_mr".to_string(),
        // `Multi-process Latency`, `Multi-threaded Latency`, `Multi Latency`
        // are `osu_latency_mp`, `osu_latency_mt`, `osu_multi_lat`.
        (Some("multi-process"), "latency") => "latency_mp".to_string(),
        (Some("multi-threaded"), "latency") => "latency_mt".to_string(),
        (Some("multi"), "latency") => "multi_lat".to_string(),
        (Some(w), _) if w.starts_with("all-to-all") => "alltoall".to_string(),
        (Some("broadcast"), _) => "bcast".to_string(),
        (Some("non-blocking"), _) => format!(
            "i{}",
            body.get(1).map_or("", |s| s.as_str()).replace('-', "")
        ),
        (Some(w), _) => w.replace('-', ""),
        (None, other) => other.to_string(),
    };
    if xccl {
        return format!("osu_xccl_{name}");
    }
    format!("osu_{name}")
}

/// The name of a one-sided test from its MPI call (`Get_accumulate`) and
/// the title's kind (`latency`, `Bandwidth`, `Bi-Directional Bandwidth`).
fn one_sided(call: &str, words: &[&str]) -> String {
    let call = match call.to_ascii_lowercase().as_str() {
        "get_accumulate" => "get_acc".to_string(),
        "accumulate" => "acc".to_string(),
        "fetch_and_op" => "fop".to_string(),
        "compare_and_swap" => "cas".to_string(),
        other => other.to_string(),
    };
    let rest = words.get(2..).unwrap_or(&[]).join(" ").to_ascii_lowercase();
    let kind = if rest.contains("bi-directional") {
        "bibw"
    } else if rest.contains("bandwidth") {
        "bw"
    } else {
        "latency"
    };
    format!("osu_{call}_{kind}")
}

/// `MPI_CHAR.` -> `char`.
fn datatype(t: &str) -> String {
    let t = t.trim().trim_end_matches('.').to_ascii_lowercase();
    t.strip_prefix("mpi_").unwrap_or(&t).to_string()
}

fn elem_size(dtype: &str) -> u64 {
    match dtype {
        "short" => 2,
        "int" | "float" | "unsigned" => 4,
        "long" | "double" | "long_long" => 8,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sided_and_xccl_titles_become_their_binaries() {
        for (title, op) in [
            (
                "OSU MPI_Get_accumulate latency Test v5.8",
                "osu_get_acc_latency",
            ),
            ("OSU MPI_Fetch_and_op latency Test v5.8", "osu_fop_latency"),
            ("OSU MPI_Put Latency Test v5.8", "osu_put_latency"),
            ("OSU MPI_Put Bandwidth Test v5.8", "osu_put_bw"),
            (
                "OSU MPI_Put Bi-directional Bandwidth Test v5.8",
                "osu_put_bibw",
            ),
            (
                "OSU NCCL-CUDA Allreduce Latency Test v7.5",
                "osu_xccl_allreduce",
            ),
        ] {
            assert_eq!(op_from_title(title), op, "{title}");
        }
    }

    /// OSU 2.x separated its header cells with tabs (`# Size\t\tLatency
    /// (us)`): once read as three cells, so every row was refused.
    #[test]
    fn a_header_with_tabs_between_its_cells_is_read() {
        let text = "# OSU MPI Bandwidth Test (Version 2.1)\n\
                    # Size\t\tBandwidth (MB/s)\n\
                    1\t\t0.425076\n\
                    4194304\t\t1163.132235\n";
        let mut notes = Notes::default();
        let records = parse(text, &mut notes).unwrap();
        let rows = &records[0].results;
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].op, "osu_bw");
        assert_eq!(rows[1].size_bytes, 4194304);
        let p = rows[1].out_of_place.as_ref().unwrap();
        assert!(
            (p.algbw_gbps - 1.163132235).abs() < 1e-9,
            "{}",
            p.algbw_gbps
        );
        assert_eq!(notes.skipped, 0, "{:?}", notes.first_skipped);
    }

    /// The same header pasted without its `#`.
    #[test]
    fn a_bare_header_with_tabs_is_read() {
        let text = "# OSU MPI Latency Test (Version 2.1)\nSize\t\tLatency (us)\n0\t\t0.64\n";
        let records = parse(text, &mut Notes::default()).unwrap();
        let p = records[0].results[0].out_of_place.as_ref().unwrap();
        assert_eq!(p.time_us, 0.64);
    }

    /// Held-out log (metrics-operator-experiments, OSU 5.8): the latency
    /// tests of several processes or threads were named from their title
    /// words (`osu_multiprocess`), not as their binaries.
    #[test]
    fn multi_process_and_thread_latency_titles_become_their_binaries() {
        for (title, op) in [
            ("OSU MPI Multi-process Latency Test v5.8", "osu_latency_mp"),
            ("OSU MPI Multi-threaded Latency Test v5.8", "osu_latency_mt"),
            ("OSU MPI Multi Latency Test v5.8", "osu_multi_lat"),
        ] {
            assert_eq!(op_from_title(title), op, "{title}");
        }
    }

    /// Non-blocking tests time the whole operation in `Overall(us)`: a
    /// sized table and the barrier's, whose header OSU prints without `#`
    /// or size (held-out log: its row was skipped and the table lost).
    #[test]
    fn non_blocking_tables_take_their_overall_time() {
        let text = "# OSU MPI Non-blocking Allreduce Latency Test v5.8\n\
                    # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n\
                    # Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n\
                    4                      12.50              6.20              5.90             93.20\n\
                    # OSU MPI Non-blocking Barrier Latency Test v5.8\n\
                    # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n\
                           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n\
                               4475.89           3180.98           2505.98             48.33\n";
        let mut notes = Notes::default();
        let records = parse(text, &mut notes).unwrap();
        assert_eq!(records.len(), 2);
        let first = &records[0].results[0];
        assert_eq!((first.op.as_str(), first.size_bytes), ("osu_iallreduce", 4));
        assert_eq!(first.out_of_place.as_ref().unwrap().time_us, 12.5);
        let barrier = &records[1].results[0];
        assert_eq!(barrier.op, "osu_ibarrier");
        assert_eq!(barrier.out_of_place.as_ref().unwrap().time_us, 4475.89);
        assert_eq!(notes.skipped, 0, "{:?}", notes.first_skipped);
    }

    /// The legend line is no header, and a full (`-f`) table's
    /// `Min Comm.(us)` is no minimum latency.
    #[test]
    fn only_overall_is_a_non_blocking_latency() {
        assert!(!is_overall_header(
            "Overall = Coll. Init + Compute + MPI_Test + MPI_Wait"
        ));
        assert_eq!(column_kind("min comm.(us)"), Col::Other);
        assert_eq!(column_kind("min latency(us)"), Col::MinLatency);
        assert_eq!(column_kind("overall(us)"), Col::AvgLatency);
    }

    #[test]
    fn titles_become_op_names() {
        assert_eq!(
            op_from_title("OSU MPI Allreduce Latency Test v7.4"),
            "osu_allreduce"
        );
        assert_eq!(op_from_title("OSU MPI Latency Test v7.4"), "osu_latency");
        assert_eq!(op_from_title("OSU MPI Bandwidth Test v7.4"), "osu_bw");
        assert_eq!(
            op_from_title("OSU MPI Bi-Directional Bandwidth Test v7.4"),
            "osu_bibw"
        );
        assert_eq!(
            op_from_title("OSU MPI All-to-All Personalized Exchange Latency Test v7.4"),
            "osu_alltoall"
        );
        assert_eq!(
            op_from_title("OSU MPI-CUDA Broadcast Latency Test v7.4"),
            "osu_bcast"
        );
    }
}
