//! The result table of nccl-tests (and rccl-tests) text: columns read from
//! the header line, units from the line under it, one row per case, and the
//! flattened one-line form some web pages leave.

use super::text::{float, is_figure, is_note_start, is_uint, num};
use super::unit::{self, SourceUnits};
use super::ParseError;
use collbench_core::extension_list::extensions;
use collbench_core::{CaseResult, Placement};

/// What a column of the result table holds; `usize` is the half
/// (0 = out-of-place, 1 = in-place).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Col {
    Size,
    Count,
    Type,
    Redop,
    Root,
    Time(usize),
    Algbw(usize),
    Busbw(usize),
    Wrong(usize),
    /// Very old builds: `error`/`res` is the largest error found (a float),
    /// not a count of wrong elements.
    MaxError(usize),
    /// A placement extension's count (its position in
    /// `collbench_core::extension_list::extensions`, then the half).
    Extension(usize, usize),
    Timestamp,
    Other,
}

/// The table being read: its columns, the header text for messages, and
/// the units from the `(B) (elements) (us) (GB/s)` line.
#[derive(Debug, Clone)]
pub(super) struct Table {
    pub cols: Vec<Col>,
    pub names: String,
    pub units: SourceUnits,
    /// Whether the units line was seen (rows may not come before it).
    pub units_seen: bool,
    /// Where each column name ends in the header line: units are printed
    /// right-aligned under their column.
    ends: Vec<usize>,
}

/// Each whitespace-separated token of `line` with the byte offset it ends at.
fn token_ends(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line
        .char_indices()
        .chain(std::iter::once((line.len(), ' ')))
    {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((i, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    out
}

impl Table {
    /// The table whose header is `raw` (the whole line, `#` included).
    pub fn new(raw: &str) -> Table {
        let toks = token_ends(raw);
        let named: Vec<(usize, &str)> = toks
            .into_iter()
            .map(|(e, t)| (e, t.trim_start_matches('#')))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let names: Vec<&str> = named.iter().map(|(_, t)| *t).collect();
        Table {
            cols: columns(&names),
            names: names.join(" "),
            units: SourceUnits::default(),
            units_seen: false,
            ends: named.iter().map(|(e, _)| *e).collect(),
        }
    }

    /// Reads the units line under the header when `tokens` is one
    /// (`(B) (elements) (us) (GB/s) (GB/s) ...`); `Ok(false)` otherwise.
    /// A unit we do not know is an error, never a guess.
    pub fn units_line(&mut self, raw: &str, line_no: usize) -> Result<bool, ParseError> {
        let toks: Vec<(usize, &str)> = token_ends(raw)
            .into_iter()
            .map(|(e, t)| (e, t.trim_start_matches('#')))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        if self.units_seen
            || toks.is_empty()
            || !toks
                .iter()
                .all(|(_, t)| t.starts_with('(') && t.ends_with(')'))
        {
            return Ok(false);
        }
        // Units sit right-aligned under their column; a flattened line lost
        // the alignment, so there they go in order to the columns with units.
        let aligned = toks.iter().filter(|(e, _)| self.ends.contains(e)).count();
        let by_position: Vec<Option<Col>> = if 2 * aligned >= toks.len() {
            toks.iter()
                .map(|(e, _)| self.ends.iter().position(|x| x == e).map(|i| self.cols[i]))
                .collect()
        } else {
            let mut with_units = self.cols.iter().filter(|c| {
                matches!(
                    c,
                    Col::Size | Col::Count | Col::Time(_) | Col::Algbw(_) | Col::Busbw(_)
                )
            });
            toks.iter().map(|_| with_units.next().copied()).collect()
        };
        let (mut time, mut bw) = (None, None);
        for ((_, tok), col) in toks.iter().zip(by_position) {
            let u = &tok[1..tok.len() - 1];
            let Some(col) = col else { continue };
            let bad = |what: &str| {
                ParseError::at(
                    line_no,
                    format!("unknown {what} unit '{u}' in the header (expected us/ms/s for time and GB/s or MB/s for bandwidth)"),
                )
            };
            match col {
                Col::Time(_) => {
                    let (name, _) = unit::time(u).ok_or_else(|| bad("time"))?;
                    if time.is_some_and(|t| t != name) {
                        return Err(bad("time"));
                    }
                    time = Some(name);
                }
                Col::Algbw(_) | Col::Busbw(_) => {
                    let (name, _) = unit::bandwidth(u).ok_or_else(|| bad("bandwidth"))?;
                    if bw.is_some_and(|b| b != name) {
                        return Err(bad("bandwidth"));
                    }
                    bw = Some(name);
                }
                Col::Size if !matches!(u, "B" | "bytes") => return Err(bad("size")),
                _ => {}
            }
        }
        self.units = SourceUnits {
            time: time.unwrap_or("us"),
            bandwidth: bw.unwrap_or("GB/s"),
        };
        self.units_seen = true;
        Ok(true)
    }
}

fn columns(names: &[&str]) -> Vec<Col> {
    let mut half = 0;
    let mut seen_time = false;
    names
        .iter()
        .map(|name| match *name {
            "size" | "bytes" => Col::Size,
            "count" | "N" => Col::Count,
            "type" => Col::Type,
            "redop" | "op" => Col::Redop,
            "root" => Col::Root,
            "time" | "cputime" => {
                if seen_time {
                    half = 1;
                }
                seen_time = true;
                Col::Time(half)
            }
            "algbw" => Col::Algbw(half),
            "busbw" => Col::Busbw(half),
            "#wrong" | "wrong" | "errors" => Col::Wrong(half),
            "error" | "res" => Col::MaxError(half),
            "timestamp" => Col::Timestamp,
            other => extensions()
                .iter()
                .position(|e| e.column_names().contains(&other))
                .map_or(Col::Other, |e| Col::Extension(e, half)),
        })
        .collect()
}

/// One row; also the largest old-format error value in it (when any).
pub(super) fn row(
    t: &Table,
    tokens: &[&str],
    line_no: usize,
) -> Result<(CaseResult, Option<f64>), ParseError> {
    let cols = &t.cols;
    let mut tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    // -S prints "YYYY-MM-DD HH:MM:SS": one column, two tokens.
    if cols.contains(&Col::Timestamp) && tokens.len() == cols.len() + 1 {
        let time = tokens.pop().unwrap_or_default();
        if let Some(date) = tokens.last_mut() {
            date.push(' ');
            date.push_str(&time);
        }
    }
    if tokens.len() != cols.len() {
        return Err(ParseError::at(
            line_no,
            format!(
                "expected a row of {} columns ({}), found {} values",
                cols.len(),
                t.names,
                tokens.len()
            ),
        ));
    }
    let (to_us, to_gbps) = (t.units.to_us(), t.units.to_gbps());
    let tu = format!("a time in {}", t.units.time);
    let (au, bu) = (
        format!("algbw in {}", t.units.bandwidth),
        format!("busbw in {}", t.units.bandwidth),
    );
    let mut r = CaseResult {
        root: -1,
        ..CaseResult::default()
    };
    let mut max_error: Option<f64> = None;
    let mut halves: [Option<Placement>; 2] = [None, None];
    for (col, tok) in cols.iter().zip(&tokens) {
        let tok = tok.as_str();
        match *col {
            Col::Size => r.size_bytes = num(tok, line_no, "the size in bytes")?,
            Col::Count => r.count = num(tok, line_no, "the element count")?,
            Col::Type => r.dtype = tok.to_string(),
            Col::Redop => r.redop = tok.to_string(),
            Col::Root => r.root = num(tok, line_no, "the root rank")?,
            Col::Time(h) => {
                halves[h].get_or_insert_with(Placement::default).time_us =
                    float(tok, line_no, &tu)? * to_us
            }
            Col::Algbw(h) => {
                halves[h].get_or_insert_with(Placement::default).algbw_gbps =
                    float(tok, line_no, &au)? * to_gbps
            }
            Col::Busbw(h) => {
                halves[h].get_or_insert_with(Placement::default).busbw_gbps =
                    float(tok, line_no, &bu)? * to_gbps
            }
            Col::Wrong(h) => {
                halves[h].get_or_insert_with(Placement::default).wrong = wrong(tok, line_no)?
            }
            Col::MaxError(h) => {
                // Not a count: the placement stays "not counted" (N/A).
                halves[h].get_or_insert_with(Placement::default);
                if tok != "N/A" {
                    let e = float(tok, line_no, "the error value")?;
                    max_error = Some(max_error.map_or(e, |m: f64| m.max(e)));
                }
            }
            Col::Extension(e, h) => extension_cell(e, &mut halves[h], tok, line_no)?,
            Col::Timestamp | Col::Other => {}
        }
    }
    let [oop, ip] = halves;
    r.out_of_place = oop;
    r.in_place = ip;
    Ok((r, max_error))
}

/// The header of nccl-tests' row layout that `tokens` (a row printed
/// without any header line) have: 13 cells (size, count, type, redop,
/// root, then time, algbw, busbw and #wrong twice), the old 12 (no root,
/// and `error`, the largest error, for #wrong) or the old alltoall's 11
/// (no redop either). `None` for other lines.
pub(super) fn implied_header(tokens: &[&str]) -> Option<&'static str> {
    const REDOPS: [&str; 8] = [
        "sum",
        "prod",
        "max",
        "min",
        "avg",
        "mulsum",
        "premulsum",
        "none",
    ];
    let shape = tokens.len() >= 11
        && is_uint(tokens[0])
        && is_uint(tokens[1])
        && collbench_core::DataType::parse(tokens[2]).is_ok();
    let redop = tokens.get(3).is_some_and(|t| REDOPS.contains(t));
    let figures_from = 3 + usize::from(redop);
    if !shape
        || !tokens[figures_from..]
            .iter()
            .all(|t| super::text::is_figure(t))
    {
        return None;
    }
    match (tokens.len(), redop) {
        (13, true) if tokens[4].parse::<i64>().is_ok() => {
            Some("size count type redop root time algbw busbw #wrong time algbw busbw #wrong")
        }
        (12, true) => Some("size count type redop time algbw busbw error time algbw busbw error"),
        // Old alltoall: an empty redop cell.
        (11, false) => Some("size count type time algbw busbw error time algbw busbw error"),
        _ => None,
    }
}

/// `tokens` of a row whose empty `redop` cell (alltoall in old layouts
/// prints none) left one token fewer than the header, with an empty redop:
/// where every token sits exactly under its column (the header's
/// right-aligned names), or where the redop's place holds a figure after
/// a type that is not one (a row pasted with tabs has no alignment left;
/// a redop is never a figure, so one missing token there is the redop).
/// `None` otherwise.
pub(super) fn with_empty_redop<'a>(t: &Table, raw: &'a str) -> Option<Vec<&'a str>> {
    let r = t.cols.iter().position(|c| *c == Col::Redop)?;
    let toks = token_ends(raw);
    if toks.len() + 1 != t.cols.len() || r == 0 {
        return None;
    }
    let aligned = t.ends.len() == t.cols.len()
        && toks
            .iter()
            .enumerate()
            .all(|(i, (end, _))| *end == t.ends[if i < r { i } else { i + 1 }]);
    let cells: Vec<&str> = toks.iter().map(|(_, tok)| *tok).collect();
    if !aligned {
        return with_empty_redop_cell(t, &cells);
    }
    let mut out = cells;
    out.insert(r, "");
    Some(out)
}

/// `cells` (no alignment known: pasted with tabs, or rejoined from pieces)
/// of a row one cell short, with an empty redop where the redop's place
/// holds a figure after a type that is not one: a redop is never a figure,
/// so the one missing cell is the redop. `None` otherwise.
pub(super) fn with_empty_redop_cell<'a>(t: &Table, cells: &[&'a str]) -> Option<Vec<&'a str>> {
    let r = t.cols.iter().position(|c| *c == Col::Redop)?;
    if r == 0 || cells.len() + 1 != t.cols.len() {
        return None;
    }
    if !is_figure(cells[r]) || is_figure(cells[r - 1]) {
        return None;
    }
    let mut out = cells.to_vec();
    out.insert(r, "");
    Some(out)
}

/// How many columns the out-of-place half of `t`'s rows has (`None`: the
/// table has no in-place half).
pub(super) fn half_width(t: &Table) -> Option<usize> {
    t.cols.iter().position(|c| *c == Col::Time(1))
}

/// `tokens` as a row that has only the out-of-place half of the table's
/// columns (a build that printed no in-place half): `None` unless they
/// are exactly that half and read as it.
pub(super) fn out_of_place_row(
    t: &Table,
    tokens: &[&str],
    line_no: usize,
) -> Option<(CaseResult, Option<f64>)> {
    let half = half_width(t)?;
    if tokens.len() != half {
        return None;
    }
    let head = Table {
        cols: t.cols[..half].to_vec(),
        ends: t.ends.iter().take(half).copied().collect(),
        ..t.clone()
    };
    row(&head, tokens, line_no).ok()
}

/// How a line's tokens fit the table.
pub(super) enum Fit {
    /// A whole row (and its largest old-format error value, when any);
    /// boxed, as a row is large and the other answers small.
    Row(Box<CaseResult>, Option<f64>),
    /// Fewer tokens than the table has columns: the first piece of a row
    /// that other lines cut, or a short row.
    Short,
    /// Not a row of this table.
    Bad(ParseError),
}

/// How `tokens` (of `line_no`) fit `t`: a row, the piece of one, or not
/// a row. A note after a whole row (`<- protocol switch`, `# here`) is
/// left out of it: the row is read. Anything else after the row's
/// columns (a word, a figure: pieces of two rows) is not a row.
pub(super) fn fit(t: &Table, tokens: &[&str], line_no: usize) -> Fit {
    let width = t.cols.len();
    if tokens.len() < width {
        return Fit::Short;
    }
    let e = match row(t, tokens, line_no) {
        Ok((r, e)) => return Fit::Row(Box::new(r), e),
        Err(e) => e,
    };
    // `-S` rows take a token more (the timestamp's time).
    let stamped = usize::from(t.cols.contains(&Col::Timestamp));
    for w in [width, width + stamped] {
        if tokens.get(w).is_some_and(|t| is_note_start(t)) {
            if let Ok((r, e)) = row(t, &tokens[..w], line_no) {
                return Fit::Row(Box::new(r), e);
            }
        }
    }
    Fit::Bad(e)
}

/// A placement extension's count cell (extension `e`, read as `#wrong`
/// is) into `half`.
fn extension_cell(
    e: usize,
    half: &mut Option<Placement>,
    tok: &str,
    line_no: usize,
) -> Result<(), ParseError> {
    let count = wrong(tok, line_no)?;
    extensions()[e].read_cell(half.get_or_insert_with(Placement::default), count);
    Ok(())
}

/// `#wrong`: `N/A` when unchecked; rccl-tests marks counts over its
/// threshold with `*`; `%6g` may print large counts as `1e+06`.
fn wrong(tok: &str, line_no: usize) -> Result<Option<u64>, ParseError> {
    if tok == "N/A" {
        return Ok(None);
    }
    let v: f64 = num(
        tok.trim_end_matches('*'),
        line_no,
        "#wrong (a count or N/A)",
    )?;
    if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 && v.fract() == 0.0 {
        Ok(Some(v as u64))
    } else {
        Err(ParseError::at(
            line_no,
            format!("expected #wrong (a count or N/A), found '{tok}'"),
        ))
    }
}

/// Splits a line onto which a web page flattened a whole table
/// (`# out-of-place in-place # size count ... # (B) ... 1024 32 float ... # Avg bus bandwidth : 1.2`)
/// back into header, rows and footer lines. `None` for ordinary lines.
pub(super) fn unflatten(line: &str) -> Option<Vec<String>> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let start = toks
        .windows(2)
        .position(|w| w[0] == "#" && (w[1] == "size" || w[1] == "bytes"))?;
    let names_end = start + 1 + toks[start + 1..].iter().position(|t| *t == "#")?;
    let names = &toks[start + 1..names_end];
    let data_start = names_end + 1 + toks[names_end + 1..].iter().position(|t| is_uint(t))?;
    // Units end where the data starts; a '#' in between means no data here.
    if toks[names_end + 1..data_start].contains(&"#") {
        return None;
    }
    let data_end = toks[data_start..]
        .iter()
        .position(|t| *t == "#")
        .map_or(toks.len(), |p| data_start + p);
    let width = names.len() + usize::from(names.contains(&"timestamp"));
    let mut out = Vec::new();
    if start > 0 {
        out.push(toks[..start].join(" "));
    }
    out.push(format!("# {}", names.join(" ")));
    let units = &toks[names_end + 1..data_start];
    if !units.is_empty() {
        out.push(format!("# {}", units.join(" ")));
    }
    out.extend(
        toks[data_start..data_end]
            .chunks(width)
            .map(|c| c.join(" ")),
    );
    for seg in toks[data_end..]
        .split(|t| *t == "#")
        .filter(|s| !s.is_empty())
    {
        out.push(format!("# {}", seg.join(" ")));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_line_splits_into_rows() {
        let line = "# out-of-place in-place # size count type redop root time algbw busbw #wrong time algbw busbw #wrong # (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s) 1024 32 float none -1 19.60 0.05 0.05 0 19.00 0.05 0.05 0 2048 64 float none -1 19.63 0.10 0.09 0 19.47 0.11 0.09 0 # Out of bounds values : 0 OK # Avg bus bandwidth : 236.839";
        let parts = unflatten(line).unwrap();
        assert_eq!(
            parts[1],
            "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
        );
        assert_eq!(
            parts[2],
            "# (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)"
        );
        assert_eq!(
            parts[3],
            "1024 32 float none -1 19.60 0.05 0.05 0 19.00 0.05 0.05 0"
        );
        assert_eq!(parts.last().unwrap(), "# Avg bus bandwidth : 236.839");
        assert!(unflatten("#       size         count      type   redop").is_none());
    }
}
