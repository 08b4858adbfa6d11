//! NVSHMEM perftest tables:
//!
//! ```text
//! mype: 6 mype_node: 2 device name: NVIDIA GH200 120GB bus id: 1
//! #alltoall_device
//! size(B)     count     type      scope     latency(us)       algbw(GB/s)   busbw(GB/s)
//! 32          8         32-bit    thread    116.220796        0.000         0.000
//! ```
//!
//! One record per file; each `#name` line starts a table. The fourth column
//! is the thread-group `scope` (thread/warp/block) or, for reductions, the
//! `redop`. A scope becomes part of the op name (`alltoall_device/block`) so
//! that each scope is its own series in reports; a redop goes to `redop`.
//! Bandwidths are decimal GB/s as printed; `latency(us)` is `time_us`.
//! Every PE prints the preamble, sometimes after the tables; the `mype`
//! lines become the device list (no host names there).

use super::foreign::own_part;
use super::text::{
    after, expect_values, float, is_uint, last_line, num, numbered_lines, partial_row,
};
use super::unit;
use super::{Notes, ParseError};
use collbench_core::{CaseResult, DeviceInfo, Placement, Record};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    Size,
    Count,
    Type,
    Scope,
    Redop,
    /// Factor to microseconds from the header's unit.
    Latency(f64),
    /// Factors to GB/s from the header's unit.
    Algbw(f64),
    Busbw(f64),
    Bw(f64),
    Other,
}

/// Parses NVSHMEM perftest output.
pub fn parse(text: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let last = last_line(text);
    let mut rec = Record::new("nvshmem-perftest");
    let mut test = String::from("nvshmem");
    let mut cols: Option<(Vec<Col>, String)> = None;
    for (line_no, raw) in numbered_lines(text) {
        // Text other processes printed into a row (NCCL, UCX, a crash).
        let raw = own_part(raw);
        let line = raw.trim();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if let Some(name) = line
            .strip_prefix('#')
            .filter(|n| !n.is_empty() && !n.contains(' '))
        {
            test = name.to_string();
            cols = None;
        } else if tokens.first() == Some(&"size(B)") {
            // `BW (GB/sec)`, `latency (us)`: a unit after a space is its
            // cell's.
            let tokens = join_units(&tokens);
            let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
            let c = tokens
                .iter()
                .map(|t| column(t, line_no))
                .collect::<Result<Vec<_>, _>>()?;
            cols = Some((c, tokens.join(" ")));
            note_units(&tokens, notes);
        } else if tokens.first() == Some(&"mype:") {
            device(&tokens, &mut rec);
        } else if let (Some((c, names)), Some(first)) = (&cols, tokens.first()) {
            // Other PEs' preambles come between rows: only a new title or
            // header ends a table.
            if is_uint(first) {
                // A row cut by the writer may still read as numbers.
                let parsed = if line_no == last && notes.cut_last_line {
                    Err(ParseError::whole("cut"))
                } else {
                    row(c, names, &tokens, &test, line_no)
                };
                match parsed {
                    Ok(r) => rec.results.push(r),
                    Err(_)
                        if line_no == last && (tokens.len() < c.len() || notes.cut_last_line) =>
                    {
                        notes.cut_short(line_no, partial_row(line_no, rec.results.len()));
                    }
                    Err(e) => notes.skip(e)?,
                }
            } else if line.starts_with('$') || line.contains("perftest") {
                rec.command_line = command(line);
            }
        } else if line.starts_with('$') || line.contains("perftest") {
            rec.command_line = command(line);
        }
    }
    if rec.results.is_empty() {
        return Err(ParseError::whole(
            "no NVSHMEM perftest rows found (expected a 'size(B) count type ... latency(us)' header followed by rows)",
        ));
    }
    rec.devices.sort_by_key(|d| d.rank);
    rec.settings.world_size = rec.devices.len() as u64;
    Ok(vec![rec])
}

/// The command line a `$ ...` or `... perftest ...` line shows.
fn command(line: &str) -> Vec<String> {
    line.trim_start_matches('$')
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Header tokens with a `(unit)` token joined to the cell before it.
fn join_units(tokens: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tokens {
        match out.last_mut() {
            Some(prev) if t.starts_with('(') && !prev.contains('(') => prev.push_str(t),
            _ => out.push(t.to_string()),
        }
    }
    out
}

/// Keeps the header's units (when not us and GB/s) for the one record.
fn note_units(tokens: &[&str], notes: &mut Notes) {
    let mut u = unit::SourceUnits::default();
    for t in tokens {
        let base = t.split('(').next().unwrap_or(t).to_ascii_lowercase();
        let Some(name) = unit::in_parens(t) else {
            continue;
        };
        if base == "latency" {
            u.time = unit::time(name).map_or(u.time, |(n, _)| n);
        } else if ["algbw", "busbw", "bw"].contains(&base.as_str()) {
            u.bandwidth = unit::bandwidth(name).map_or(u.bandwidth, |(n, _)| n);
        }
    }
    if !u.is_default() {
        notes.units.insert(0, u);
    }
}

/// A header cell; its unit in parentheses must be one we know.
fn column(name: &str, line_no: usize) -> Result<Col, ParseError> {
    let base = name.split('(').next().unwrap_or(name).to_ascii_lowercase();
    let u = unit::in_parens(name);
    let bad = |what: &str| {
        ParseError::at(
            line_no,
            format!(
                "unknown {what} unit in header cell '{name}' (expected us/ms for latency and GB/s or MB/s for bandwidth)"
            ),
        )
    };
    let time = || {
        u.and_then(unit::time)
            .map(|(_, f)| f)
            .ok_or_else(|| bad("time"))
    };
    let bw = || {
        u.and_then(unit::bandwidth)
            .map(|(_, f)| f)
            .ok_or_else(|| bad("bandwidth"))
    };
    Ok(match base.as_str() {
        "size" => Col::Size,
        "count" => Col::Count,
        "type" => Col::Type,
        "scope" => Col::Scope,
        "redop" => Col::Redop,
        "latency" => Col::Latency(time()?),
        "algbw" => Col::Algbw(bw()?),
        "busbw" => Col::Busbw(bw()?),
        "bw" => Col::Bw(bw()?),
        _ => Col::Other,
    })
}

fn row(
    cols: &[Col],
    names: &str,
    tokens: &[&str],
    test: &str,
    line_no: usize,
) -> Result<CaseResult, ParseError> {
    expect_values(tokens, cols.len(), names, line_no)?;
    let mut r = CaseResult {
        op: test.to_string(),
        root: -1,
        ..CaseResult::default()
    };
    let mut p = Placement::default();
    for (col, tok) in cols.iter().zip(tokens) {
        match col {
            Col::Size => r.size_bytes = num(tok, line_no, "the size in bytes")?,
            Col::Count => r.count = num(tok, line_no, "the element count")?,
            Col::Type => r.dtype = tok.to_string(),
            // Point-to-point tests print `None`: no scope to name.
            Col::Scope if *tok != "None" => r.op = format!("{test}/{tok}"),
            Col::Scope => {}
            Col::Redop => r.redop = tok.to_string(),
            Col::Latency(f) => p.time_us = float(tok, line_no, "a latency")? * f,
            Col::Algbw(f) => p.algbw_gbps = float(tok, line_no, "algbw")? * f,
            Col::Busbw(f) => p.busbw_gbps = float(tok, line_no, "busbw")? * f,
            Col::Bw(f) => {
                p.algbw_gbps = float(tok, line_no, "a bandwidth")? * f;
                p.busbw_gbps = p.algbw_gbps;
            }
            Col::Other => {}
        }
    }
    r.out_of_place = Some(p);
    Ok(r)
}

/// `mype: 6 mype_node: 2 device name: NVIDIA GH200 120GB bus id: 1`
fn device(tokens: &[&str], rec: &mut Record) {
    let Some(rank) = after(tokens, "mype:").and_then(|v| v.parse::<u64>().ok()) else {
        return;
    };
    if rec.devices.iter().any(|d| d.rank == rank) {
        return;
    }
    let name_at = tokens.iter().position(|t| *t == "name:").map(|i| i + 1);
    let bus_at = tokens
        .iter()
        .position(|t| *t == "bus")
        .unwrap_or(tokens.len());
    let name = name_at
        .and_then(|s| tokens.get(s..bus_at))
        .map(|t| t.join(" "))
        .unwrap_or_default();
    rec.devices.push(DeviceInfo {
        rank,
        device: after(tokens, "mype_node:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        bus_id: after(tokens, "id:").map(str::to_string),
        name,
        ..DeviceInfo::default()
    });
}
