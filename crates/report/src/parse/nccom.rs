//! AWS Neuron `nccom-test` tables:
//!
//! ```text
//! nccom-test -r 2 --minbytes 1kb --maxbytes 1gb --stepfactor 4 --datatype fp32 allr
//!        size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)
//!           1024             256    fp32          58           0.02           0.02
//! Avg bus bandwidth:      23.6671GB/s
//! ```
//!
//! Conventions, which differ from nccl-tests:
//! * `time(us)` is the **P50** (median) over iterations, not the mean of a
//!   timed loop; the record says so with `settings.average = "p50"`.
//! * Its "GB" is **2^30 bytes** (algbw = size / time / 2^30), so its figures
//!   read about 7.4% lower than nccl-tests' decimal GB would. We keep the
//!   numbers as printed, so a report matches the tool's own output and its
//!   `Avg bus bandwidth` line; `Record::source = "nccom-test"` marks them and
//!   the report footnotes it.
//! * There is no in-place half and no redop/root column; the rows fill
//!   `out_of_place`, redop is empty and root -1.

use super::foreign::own_part;
use super::nccl_ops::op_in_file_name;
use super::pieces::Pieces;
use super::text::{float, is_uint, last_line, num, numbered_lines, partial_row};
use super::unit;
use super::{Notes, ParseError};
use collbench_core::{CaseResult, Collective, Placement, Record};

/// The `settings.average` value that marks P50 times.
pub const P50: &str = "p50";

/// Parses nccom-test output: one record per table.
/// Without a command line, the op comes from `origin` (a file name such as
/// `allreduce.txt`), else is `unknown`.
pub fn parse(text: &str, origin: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let last = last_line(text);
    let mut factors = (1.0, 1.0);
    let mut records = Vec::new();
    let mut cur = new_record();
    let mut in_table = false;
    let mut pieces = Pieces::default();
    let mut op = op_in_file_name(origin).unwrap_or_else(|| String::from("unknown"));
    for (line_no, raw) in numbered_lines(text) {
        // Text other processes printed into a row (NCCL, UCX, a crash).
        let raw = own_part(raw);
        let tokens: Vec<&str> = raw.split_whitespace().collect();
        if let Some(at) = tokens.iter().position(|t| t.ends_with("nccom-test")) {
            if !cur.results.is_empty() {
                records.push(std::mem::replace(&mut cur, new_record()));
            }
            let args = quoted_command(&tokens[at..]);
            // A wrapper's line may quote the command with its own
            // spelling: a value we cannot read loses the settings, not
            // the log.
            if let Err(e) = command(&args, &mut cur, &mut op, line_no) {
                notes.warn(
                    line_no,
                    format!("{}; the command line's settings are left out", e.message),
                );
            }
        } else if tokens.first() == Some(&"size(B)") {
            pieces.end_table(notes)?;
            if !cur.results.is_empty() {
                records.push(std::mem::replace(&mut cur, new_record()));
            }
            let (t, b, units) = header_units(&tokens, line_no)?;
            factors = (t, b);
            if !units.is_default() {
                notes.units.insert(records.len(), units);
            }
            in_table = true;
        } else if raw.trim_start().starts_with("Avg bus bandwidth") && raw.contains(':') {
            pieces.end_table(notes)?;
            cur.avg_busbw_gbps = Some(avg_busbw(raw, line_no)?);
            in_table = false;
        } else if in_table {
            // A note after the figures is left out; a row other lines cut
            // is rejoined from its pieces (a short last line is the cut).
            let starts = tokens.first().is_some_and(|t| is_uint(t));
            let shape = (WIDTH, starts, line_no == last);
            let Some((cells, line_no)) = pieces.row_of(&tokens, line_no, shape, notes)? else {
                continue;
            };
            let tokens: Vec<&str> = cells.iter().map(String::as_str).collect();
            // A row cut by the writer may still read as numbers.
            let parsed = if line_no == last && notes.cut_last_line {
                Err(ParseError::whole("cut"))
            } else {
                row(&tokens, &op, line_no, factors)
            };
            match parsed {
                Ok(r) => cur.results.push(r),
                Err(_) if line_no == last && (tokens.len() < 6 || notes.cut_last_line) => {
                    notes.cut_short(line_no, partial_row(line_no, cur.results.len()));
                }
                Err(e) => notes.skip(e)?,
            }
        }
    }
    pieces.end_text(notes, cur.results.len());
    if !cur.results.is_empty() {
        records.push(cur);
    }
    if records.is_empty() {
        return Err(ParseError::whole(
            "no nccom-test rows found (expected a 'size(B) count(elems) type time(us) ...' header followed by rows)",
        ));
    }
    Ok(records)
}

fn new_record() -> Record {
    let mut r = Record::new("nccom-test");
    r.settings.average = P50.to_string();
    r
}

/// Factors to us and GB/s from `time(us)` and `algbw(GB/s)`/`busbw(GB/s)`.
/// nccom-test's GB is 2^30 bytes whatever the spelling; figures stay as
/// printed (see the module doc), so only the scale between units applies.
fn header_units(
    tokens: &[&str],
    line_no: usize,
) -> Result<(f64, f64, unit::SourceUnits), ParseError> {
    if tokens.len() != WIDTH {
        return Err(ParseError::at(
            line_no,
            "expected the header 'size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)'",
        ));
    }
    let mut t = 1.0;
    let mut b = None;
    let mut names = unit::SourceUnits::default();
    for cell in tokens {
        let Some(u) = unit::in_parens(cell) else {
            continue;
        };
        let bad = || ParseError::at(line_no, format!("unknown unit in header cell '{cell}'"));
        if cell.starts_with("time") {
            (names.time, t) = unit::time(u).ok_or_else(bad)?;
        } else if cell.starts_with("algbw") || cell.starts_with("busbw") {
            let (n, f) = unit::bandwidth(u).ok_or_else(bad)?;
            names.bandwidth = n;
            if b.is_some_and(|x| x != f) {
                return Err(bad());
            }
            b = Some(f);
        }
    }
    Ok((t, b.unwrap_or(1.0), names))
}

/// The figure of an `Avg bus bandwidth:      23.6671GB/s` line.
fn avg_busbw(raw: &str, line_no: usize) -> Result<f64, ParseError> {
    let value = raw.rsplit(':').next().unwrap_or("").trim();
    float(
        value.trim_end_matches("GB/s").trim(),
        line_no,
        "the average bus bandwidth",
    )
}

/// Cells of a nccom-test row.
const WIDTH: usize = 6;

fn row(
    tokens: &[&str],
    op: &str,
    line_no: usize,
    (to_us, to_gbps): (f64, f64),
) -> Result<CaseResult, ParseError> {
    let [size, count, dtype, time, algbw, busbw] = tokens else {
        return Err(ParseError::at(
            line_no,
            format!(
                "expected 6 values (size count type time algbw busbw), found {}",
                tokens.len()
            ),
        ));
    };
    Ok(CaseResult {
        op: op.to_string(),
        size_bytes: num(size, line_no, "the size in bytes")?,
        count: num(count, line_no, "the element count")?,
        dtype: dtype.to_string(),
        redop: String::new(),
        root: -1,
        out_of_place: Some(Placement {
            time_us: float(time, line_no, "the P50 time")? * to_us,
            algbw_gbps: float(algbw, line_no, "algbw")? * to_gbps,
            busbw_gbps: float(busbw, line_no, "busbw")? * to_gbps,
            ..Placement::default()
        }),
        in_place: None,
    })
}

/// Reads `nccom-test -r 64 -N 2 -b 8 -e 1GB -f 2 -n 50 -w 5 -d fp32 allr ...`.
/// The command's words: as they are, or, where a wrapper quotes the
/// command (`Running command "nccom-test -r 2 ... allr"`), up to the
/// closing quote, without the quotes.
fn quoted_command<'a>(tokens: &[&'a str]) -> Vec<&'a str> {
    let Some(q) = tokens[0]
        .chars()
        .next()
        .filter(|c| matches!(c, '"' | '\'' | '`'))
    else {
        return tokens.to_vec();
    };
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let t = if i == 0 { &t[1..] } else { t };
        match t.strip_suffix(q) {
            Some(last) => {
                out.push(last);
                break;
            }
            None => out.push(t),
        }
    }
    out
}

fn command(
    args: &[&str],
    rec: &mut Record,
    op: &mut String,
    line_no: usize,
) -> Result<(), ParseError> {
    rec.command_line = args.iter().map(|a| a.to_string()).collect();
    let mut i = 1;
    while i < args.len() {
        let value = args.get(i + 1).copied();
        let int =
            |what: &str| -> Result<u64, ParseError> { num(value.unwrap_or(""), line_no, what) };
        match args[i] {
            "-r" | "--nworkers" | "--nranks" => rec.settings.world_size = int("the rank count")?,
            "-n" | "--iters" => rec.settings.iters = int("the iteration count")?,
            "-w" | "--warmup_iters" => rec.settings.warmup_iters = int("the warmup count")?,
            "-f" | "--stepfactor" => rec.settings.step_factor = Some(int("the step factor")?),
            "--check" => {
                rec.settings.check = true;
                i += 1;
                continue;
            }
            a if a.starts_with('-') => {}
            a => {
                if let Some(name) = op_alias(a) {
                    *op = name.to_string();
                }
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Ok(())
}

/// nccom-test's short aliases; its full names go through
/// [`Collective::from_tool_name`] like every other tool's.
fn op_alias(a: &str) -> Option<&'static str> {
    Some(match a {
        "allr" => "all_reduce",
        "allg" => "all_gather",
        "redsct" => "reduce_scatter",
        "permute" => "sendrecv",
        "all_reduce" | "allreduce" | "all_gather" | "allgather" | "reduce_scatter"
        | "reducescatter" | "alltoall" | "all_to_all" | "sendrecv" => {
            Collective::from_tool_name(a)?.name()
        }
        _ => return None,
    })
}
