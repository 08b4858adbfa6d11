//! nccl-tests text output, every version seen in the wild:
//!
//! * the 2.19 layout (`# nccl-tests version`, `Group` in the rank lines,
//!   `unalign:`), the older layouts without them, and very old ones whose
//!   error column is `error`/`res` and that have no `root` column;
//! * several runs (and several types, ops and roots) in one log: each
//!   `# Avg bus bandwidth` line closes one [`Record`];
//! * `N/A` in `#wrong` (alltoall/sendrecv in-place, `-c 0`), `cputime`
//!   (`-C 1`), `-G` (same columns), `-I` per-iteration columns (ignored
//!   here; the JSON carries the full statistics), the `-S` timestamp column
//!   (two tokens per row), placement extensions' columns and lines
//!   (`collbench_core::extension`);
//! * the flattened form where a web page joined a whole table onto one line.
//!
//! The columns are read from the header line, so extra columns (rccl-tests,
//! newer versions) do not shift the ones we know.
//!
//! Op names: `# Collective test starting: X_perf` when present; otherwise the
//! last `*_perf` / `all-gather`-like word seen earlier in the log, then the
//! file name, then a guess from the first row (size/count ratio, redop and
//! root), else `unknown`.

use super::foreign::foreign_at;
pub(crate) use super::nccl_ops::op_name;
use super::nccl_ops::{guess_op, op_in_file_name, op_mentioned};
use super::nccl_table::{implied_header, unflatten, Table};
use super::text::{after, float, is_figure, is_uint, nccl_version_line, num, numbered_lines};
use super::{Notes, ParseError};

mod lines;
mod rows;

use collbench_core::extension::LineRead;
use collbench_core::extension_list::extensions;
use collbench_core::{nccl_version, CaseResult, Record};
use lines::{device, glued_header, interleaved, nccl_matrix_row, sweep_rows};

/// Parses nccl-tests text; `origin` (a file name) helps name the op.
/// Data-quality findings (a log cut mid-row, FAILED out-of-bounds lines,
/// old-format error columns) go to `notes`.
pub fn parse(text: &str, origin: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    parse_as(text, origin, "nccl-tests", &|_, _| false, notes)
}

/// Parses nccl-tests-like text as `source`. `extra` sees each line that is
/// not part of a table first and returns true when it consumed it (rccl-tests
/// adds version lines this way).
pub(crate) fn parse_as(
    text: &str,
    origin: &str,
    source: &str,
    extra: &dyn Fn(&str, &mut Record) -> bool,
    notes: &mut Notes,
) -> Result<Vec<Record>, ParseError> {
    let last_line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()
        .map_or(0, |(i, _)| i + 1);
    let mut p = Parser {
        notes,
        flattened: false,
        raw: String::new(),
        last_line,
        rank_lines: Vec::new(),
        last_row: None,
        back_to_back: Vec::new(),
        max_error: None,
        source: source.to_string(),
        records: Vec::new(),
        cur: Record::new(source),
        cols: None,
        test_op: None,
        mention: None,
        file_op: op_in_file_name(origin),
        avg_seen: false,
        fragment: None,
        implied: false,
        implied_warned: false,
        half_rows: None,
    };
    for (line_no, raw) in numbered_lines(text) {
        match unflatten(raw) {
            Some(parts) => {
                p.flattened = true;
                for part in parts {
                    p.line(&part, line_no, extra)?;
                }
                p.flattened = false;
            }
            None => p.line(raw, line_no, extra)?,
        }
    }
    p.fragment_at_end();
    if !p.cur.results.is_empty() && !p.avg_seen {
        let n = p.cur.results.len();
        p.notes.cut_short(
            p.last_line,
            format!(
                "partial: the log ends before the '# Avg bus bandwidth' line of its last table; \
                 its {n} complete row(s) are kept"
            ),
        );
    }
    p.finish();
    if p.records.is_empty() {
        return Err(ParseError::whole(
            "no result rows found (expected a '#  size  count  type ...' header followed by rows)",
        ));
    }
    Ok(p.records)
}

struct Parser<'n> {
    notes: &'n mut Notes,
    /// The last non-empty line: a row that fails to parse there was cut.
    last_line: usize,
    /// (rank, line) of the current run's `# Rank` lines.
    rank_lines: Vec<(u64, usize)>,
    /// (size, line) of the previous row.
    last_row: Option<(u64, usize)>,
    /// Pairs of consecutive row lines holding the same size.
    back_to_back: Vec<(usize, usize)>,
    /// Largest old-format error value of the current run, and its line.
    max_error: Option<(f64, usize)>,
    /// Whether the line being read is part of a flattened one.
    flattened: bool,
    /// The current comment line as printed (column alignment matters).
    raw: String,
    source: String,
    records: Vec<Record>,
    cur: Record,
    cols: Option<Table>,
    test_op: Option<String>,
    mention: Option<String>,
    file_op: Option<String>,
    avg_seen: bool,
    /// The first pieces of a row that other processes' lines cut, waiting
    /// for the rest.
    fragment: Option<rows::Fragment>,
    /// The table's columns come from its rows' layout (no header line).
    implied: bool,
    /// The first line and number of rows with only an out-of-place half.
    half_rows: Option<(usize, usize)>,
    implied_warned: bool,
}

impl Parser<'_> {
    /// One line: the table's part of it, then any text another process
    /// printed into it ([`foreign_at`]) as a line of its own.
    fn line(
        &mut self,
        raw: &str,
        line_no: usize,
        extra: &dyn Fn(&str, &mut Record) -> bool,
    ) -> Result<(), ParseError> {
        if let Some(at) = glued_header(raw) {
            self.text_line(raw[..at].trim(), extra, false);
            return self.own_line(&raw[at..], line_no, extra);
        }
        let at = match foreign_at(raw) {
            Some(at) if !raw.trim_start().starts_with('#') => at,
            _ => return self.own_line(raw, line_no, extra),
        };
        let (own, theirs) = raw.split_at(at);
        if !own.trim().is_empty() {
            self.own_line(own, line_no, extra)?;
        }
        self.text_line(theirs.trim(), extra, true);
        Ok(())
    }

    fn own_line(
        &mut self,
        raw: &str,
        line_no: usize,
        extra: &dyn Fn(&str, &mut Record) -> bool,
    ) -> Result<(), ParseError> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(body) = trimmed.strip_prefix('#') {
            if let Some(row) = self.commented_row(raw, body, line_no) {
                let tokens: Vec<&str> = row.split_whitespace().collect();
                return self.row_line(&row, &tokens, line_no);
            }
            self.end_fragment()?;
            self.raw = raw.to_string();
            return self.comment(body.trim(), line_no);
        }
        // Very old builds printed the footer without '#'.
        if trimmed.starts_with("Avg bus bandwidth") || trimmed.starts_with("Out of bounds") {
            self.end_fragment()?;
            return self.comment(trimmed, line_no);
        }
        let mut tokens: Vec<&str> = trimmed.split_whitespace().collect();
        // A fork's tag in front of each row (`[STAT]:   96   24  float ...`,
        // `[STAT]:402653184 ...` once the size fills its column).
        let mut raw = raw;
        if let Some(rest) = self.untagged(raw, &tokens) {
            raw = rest;
            tokens = raw.split_whitespace().collect();
        }
        // A header (or its units line) that lost its '#' when pasted.
        if self.header_without_hash(&tokens) {
            self.end_fragment()?;
            self.raw = raw.to_string();
            return self.comment(trimmed, line_no);
        }
        if self.cols.is_none() {
            self.imply_header(&tokens, line_no);
        }
        if self.cols.is_some() {
            if self.fragment.is_some() && is_figure(tokens[0]) && self.rejoin(&tokens, line_no)? {
                return Ok(());
            }
            if is_uint(tokens[0]) {
                return self.row_line(raw, &tokens, line_no);
            }
        }
        // Rows without a header are told apart only by the text between.
        if self.implied && !self.cur.results.is_empty() {
            self.drop_fragment()?;
            self.finish();
        }
        self.text_line(trimmed, extra, false);
        Ok(())
    }

    /// A row with no header line before it (rows grepped out of a log):
    /// its layout is nccl-tests' for its number of cells, said in a
    /// warning once.
    fn imply_header(&mut self, tokens: &[&str], line_no: usize) {
        let Some(names) = implied_header(tokens) else {
            return;
        };
        let mut table = Table::new(&format!("# {names}"));
        table.units_seen = true;
        self.cols = Some(table);
        self.implied = true;
        // No footer to wait for: the table is whole as far as it goes.
        self.avg_seen = true;
        if !self.implied_warned {
            self.implied_warned = true;
            self.notes.warn(
                line_no,
                format!(
                    "rows without a header line: read as nccl-tests' {}-column layout ({names}), in us and GB/s",
                    tokens.len()
                ),
            );
        }
    }

    /// `raw` after a tag in front of a row (`[STAT]:`), when it has one:
    /// a first token ending in `:`, glued to the size or before it.
    fn untagged<'r>(&self, raw: &'r str, tokens: &[&str]) -> Option<&'r str> {
        let (tag, size) = tokens.first()?.rsplit_once(':')?;
        let row_follows =
            is_uint(size) || size.is_empty() && tokens.get(1).is_some_and(|t| is_uint(t));
        if self.cols.is_none() || tag.is_empty() || is_figure(tag) || !row_follows {
            return None;
        }
        let at = raw.find(tokens[0])? + tag.len() + 1;
        raw.get(at..)
    }

    /// A line that is not part of a table: NCCL's version, the tool's own
    /// lines (`extra`), or prose that may name the op. What NCCL printed
    /// (`nccl`: its INFO lines, its Func/Proto/Algo matrix) names the
    /// collectives NCCL knows, not the test that ran: no op is taken there.
    fn text_line(&mut self, trimmed: &str, extra: &dyn Fn(&str, &mut Record) -> bool, nccl: bool) {
        // Older nccl-tests print no library version of their own: NCCL's
        // start-up line says it (a newer header's `nccl-library=` wins).
        if let Some(v) = nccl_version_line(trimmed) {
            self.cur.library.get_or_insert_with(|| format!("NCCL {v}"));
            return;
        }
        if nccl || nccl_matrix_row(trimmed) {
            return;
        }
        if !extra(trimmed, &mut self.cur) {
            self.note_mention(trimmed);
        }
    }

    /// Whether `tokens` are the column header (`size count type ...
    /// busbw`) or, under one, the units line, printed without '#'.
    fn header_without_hash(&self, tokens: &[&str]) -> bool {
        let header = matches!(tokens.first(), Some(&"size" | &"bytes"))
            && tokens.len() >= 4
            && tokens.iter().any(|t| *t == "busbw" || *t == "algbw");
        let units = self.cols.as_ref().is_some_and(|t| !t.units_seen)
            && tokens
                .iter()
                .all(|t| t.starts_with('(') && t.ends_with(')'));
        header || units
    }

    fn comment(&mut self, body: &str, line_no: usize) -> Result<(), ParseError> {
        let tokens: Vec<&str> = body.split_whitespace().collect();
        match tokens.as_slice() {
            ["nccl-tests", "version", version, rest @ ..] => {
                self.start_run();
                self.cur.tool_version = Some(version.to_string());
                let code = rest.iter().find_map(|t| t.strip_prefix("nccl-library="));
                if let Some(code) = code.and_then(|c| c.parse::<u64>().ok()) {
                    self.cur.library = Some(format!("NCCL {}", nccl_version::text(code)));
                }
            }
            ["Collective", "test", "starting:", name, ..] => {
                self.start_run();
                self.test_op = Some(op_name(name));
            }
            ["nThread", ..] => {
                self.start_run();
                // A header with no rows yet starts the run afresh.
                self.cur.devices.clear();
                self.rank_lines.clear();
                if let Err(e) = self.settings(&tokens, line_no) {
                    self.notes.skip(e)?;
                }
            }
            ["Rank", ..] => self.rank_line(&tokens, line_no)?,
            ["Avg", "bus", "bandwidth", ..] if body.contains(':') => {
                let value = body.rsplit(':').next().unwrap_or("").trim();
                let value = value.split_whitespace().next().unwrap_or("");
                match float(value, line_no, "the average bus bandwidth") {
                    Ok(v) => self.cur.avg_busbw_gbps = Some(v),
                    Err(e) => self.notes.skip(e)?,
                }
                self.avg_seen = true;
                self.finish();
            }
            [first, ..] if (*first == "size" || *first == "bytes") && tokens.len() >= 4 => {
                self.cols = Some(Table::new(&self.raw));
                self.implied = false;
            }
            // GPU memory lowered the sweep's end: the table ends there
            // complete, not cut short.
            ["Reducing", "maxBytes", "to", n, ..] => {
                match num(n, line_no, "the reduced maxBytes") {
                    Ok(v) => self.cur.settings.max_bytes = v,
                    Err(e) => self.notes.skip(e)?,
                }
            }
            ["Out", "of", "bounds", "values", ":", n, verdict, ..] => {
                if *verdict != "OK" || *n != "0" {
                    // The count is of result values outside the checker's
                    // tolerance: wrong results, not stray writes.
                    self.notes.out_of_bounds(
                        line_no,
                        n.parse().unwrap_or(0),
                        format!(
                            "nccl-tests found {n} result value(s) outside tolerance ({verdict}): \
                             the run produced wrong results"
                        ),
                    );
                }
            }
            _ if self.cols.as_ref().is_some_and(|t| !t.units_seen)
                && self.cur.results.is_empty()
                && tokens.first().is_some_and(|t| t.starts_with('(')) =>
            {
                if let Some(t) = self.cols.as_mut() {
                    t.units_line(&self.raw, line_no)?;
                }
            }
            _ => {
                if !self.extension_line(&tokens, line_no)? {
                    self.note_mention(body);
                }
            }
        }
        Ok(())
    }

    /// `#  Rank  0 Group  0 Pid 1378 on vm device  0 [...] NVIDIA H200`: a
    /// device of the run. A rank listed twice means two processes' output
    /// mixed line by line.
    fn rank_line(&mut self, tokens: &[&str], line_no: usize) -> Result<(), ParseError> {
        let Some(d) = device(tokens) else {
            return Ok(());
        };
        if let Some((_, first)) = self.rank_lines.iter().find(|(r, _)| *r == d.rank) {
            return Err(interleaved(
                *first,
                line_no,
                &format!("rank {} is listed twice", d.rank),
            ));
        }
        self.rank_lines.push((d.rank, line_no));
        self.cur.devices.push(d);
        let pids: std::collections::BTreeSet<u64> =
            self.cur.devices.iter().map(|d| d.pid).collect();
        self.cur.settings.world_size = self.cur.devices.len() as u64;
        self.cur.settings.processes = pids.len() as u64;
        Ok(())
    }

    /// A new run header closes the previous run if it produced rows.
    fn start_run(&mut self) {
        if !self.cur.results.is_empty() || self.avg_seen {
            self.finish();
        }
    }

    fn finish(&mut self) {
        if !self.cur.results.is_empty() {
            if let Some(u) = self
                .cols
                .as_ref()
                .map(|t| t.units)
                .filter(|u| !u.is_default())
            {
                self.notes.units.insert(self.records.len(), u);
            }
            if let Some((line, n)) = self.half_rows {
                self.notes.warn(
                    line,
                    format!(
                        "{n} row(s) have no in-place half (printed without it, or its line was lost): \
                         only their out-of-place figures are read"
                    ),
                );
            }
            if let Some((e, line)) = self.max_error {
                self.notes.warn(
                    line,
                    format!(
                        "the old 'error'/'res' column is the largest error found, not a count of \
                         wrong elements: #wrong shows N/A (largest error in this table: {e:e})"
                    ),
                );
            }
        }
        if self.cur.results.is_empty() && self.cols.is_some() && !self.avg_seen {
            // A table cut before its first row: said, as a record cannot
            // hold a table without rows.
            let op = self
                .test_op
                .clone()
                .or_else(|| self.mention.clone())
                .unwrap_or_else(|| "last".to_string());
            self.notes.cut_short(
                self.last_line,
                format!("partial: the {op} table ends after its header, before its first row"),
            );
        }
        self.max_error = None;
        self.half_rows = None;
        self.last_row = None;
        self.back_to_back.clear();
        self.cols = None;
        self.implied = false;
        self.avg_seen = false;
        let mut rec = std::mem::replace(&mut self.cur, Record::new(&self.source));
        self.test_op = None;
        if rec.results.is_empty() {
            return;
        }
        if rec.results.iter().any(|r| r.op.is_empty()) {
            let world = rec.settings.world_size;
            let guess = rec
                .results
                .iter()
                .find(|r| r.count > 0)
                .and_then(|r| guess_op(r, world))
                .unwrap_or("unknown");
            for r in rec.results.iter_mut().filter(|r| r.op.is_empty()) {
                r.op = guess.to_string();
            }
        }
        self.records.push(rec);
    }

    fn push_row(&mut self, mut row: CaseResult) {
        row.op = self
            .test_op
            .clone()
            .or_else(|| self.mention.clone())
            .or_else(|| self.file_op.clone())
            .unwrap_or_default();
        let s = &self.cur.settings;
        let iters = s.iters * s.agg_iters.max(1) * s.graph.max(1);
        for p in [&mut row.out_of_place, &mut row.in_place]
            .into_iter()
            .flatten()
        {
            p.iterations = iters;
            for ext in extensions() {
                ext.settle(p, s);
            }
        }
        self.cur.results.push(row);
    }

    /// Two rows of the same size on consecutive lines, twice or more in a
    /// table: two processes printed their tables at once, line by line.
    fn interleave_rows(&mut self, size: u64, line_no: usize) -> Result<(), ParseError> {
        if let Some((prev, prev_line)) = self.last_row {
            if prev == size && size > 0 && prev_line + 1 == line_no {
                self.back_to_back.push((prev_line, line_no));
            }
        }
        self.last_row = Some((size, line_no));
        if self.back_to_back.len() >= 2 {
            let (a, b) = self.back_to_back[0];
            return Err(interleaved(
                a,
                b,
                "the same size is printed on consecutive rows",
            ));
        }
        Ok(())
    }

    fn settings(&mut self, tokens: &[&str], line_no: usize) -> Result<(), ParseError> {
        let get = |key: &str, what: &str| -> Result<Option<u64>, ParseError> {
            after(tokens, key)
                .map(|v| num::<u64>(v, line_no, what))
                .transpose()
        };
        let s = &mut self.cur.settings;
        s.threads_per_process = get("nThread", "the thread count")?.unwrap_or(0);
        s.gpus_per_thread = get("nGpus", "the GPU count")?.unwrap_or(0);
        s.min_bytes = get("minBytes", "minBytes")?.unwrap_or(0);
        s.max_bytes = get("maxBytes", "maxBytes")?.unwrap_or(0);
        if let Some(step) = after(tokens, "step:") {
            let (n, kind) = step.split_once('(').unwrap_or((step, "bytes)"));
            let n: u64 = num(n, line_no, "the step")?;
            if kind.starts_with("factor") {
                s.step_factor = Some(n);
            } else {
                s.step_bytes = Some(n);
            }
        }
        // "warmup iters: W iters: N agg iters: A": `iters:` appears three times.
        for (i, t) in tokens.iter().enumerate() {
            if *t != "iters:" {
                continue;
            }
            let Some(v) = tokens.get(i + 1) else { continue };
            // `iters: auto` is collbench's `-n auto` (recorded as 0).
            let v: u64 = if *v == "auto" {
                0
            } else {
                num(v, line_no, "an iteration count")?
            };
            match i.checked_sub(1).map(|j| tokens[j]) {
                Some("warmup") => s.warmup_iters = v,
                Some("agg") => s.agg_iters = v,
                _ => s.iters = v,
            }
        }
        s.check = get("validation:", "the validation flag")?.unwrap_or(0) > 0;
        s.graph = get("graph:", "the graph count")?.unwrap_or(0);
        // Room for the sweep's rows at once: a 65,536-row table grown by
        // doubling once held 1.5 times its rows in memory.
        let rows = sweep_rows(s.min_bytes, s.max_bytes, s.step_factor, s.step_bytes);
        self.cur.results.reserve(rows);
        Ok(())
    }

    /// A `#` line of a placement extension (`tokens`: after the `#`);
    /// `Ok(false)`: none of theirs (left to the caller).
    fn extension_line(&mut self, tokens: &[&str], line_no: usize) -> Result<bool, ParseError> {
        for ext in extensions() {
            match ext.read_line(tokens, &mut self.cur) {
                LineRead::NotMine => continue,
                LineRead::Read => {}
                LineRead::Warn(w) => self.notes.warn(line_no, w),
                LineRead::Unreadable(e) => self.notes.skip(ParseError::at(line_no, e))?,
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn note_mention(&mut self, text: &str) {
        if let Some(op) = op_mentioned(text) {
            self.mention = Some(op);
        }
    }
}
