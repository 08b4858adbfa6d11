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
//!   (two tokens per row);
//! * the flattened form where a web page joined a whole table onto one line.
//!
//! The columns are read from the header line, so extra columns (rccl-tests,
//! newer versions) do not shift the ones we know.
//!
//! Op names: `# Collective test starting: X_perf` when present; otherwise the
//! last `*_perf` / `all-gather`-like word seen earlier in the log, then the
//! file name, then a guess from the first row (size/count ratio, redop and
//! root), else `unknown`.

use super::nccl_table::{row, unflatten, Table};
use super::text::{after, float, is_uint, nccl_version_line, num, numbered_lines};
use super::{Notes, ParseError};
use collbench_core::{nccl_version, CaseResult, Collective, DataType, DeviceInfo, Record};

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
}

impl Parser<'_> {
    fn line(
        &mut self,
        raw: &str,
        line_no: usize,
        extra: &dyn Fn(&str, &mut Record) -> bool,
    ) -> Result<(), ParseError> {
        let trimmed = raw.trim();
        if let Some(body) = trimmed.strip_prefix('#') {
            self.raw = raw.to_string();
            return self.comment(body.trim(), line_no);
        }
        // Very old builds printed the footer without '#'.
        if trimmed.starts_with("Avg bus bandwidth") || trimmed.starts_with("Out of bounds") {
            return self.comment(trimmed, line_no);
        }
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        if let (Some(table), Some(first)) = (&self.cols, tokens.first()) {
            if is_uint(first) {
                // The writer stopped inside this row: even a row that reads
                // as numbers may hold a cut one ("338.8" of "338.82").
                let cut = line_no == self.last_line && self.notes.cut_last_line && !self.flattened;
                let parsed = if cut {
                    Err(ParseError::whole("cut"))
                } else {
                    row(table, &tokens, line_no)
                };
                let (row, max_error) = match parsed {
                    Ok(r) => r,
                    Err(_)
                        if line_no == self.last_line
                            && (tokens.len() < table.cols.len() || self.notes.cut_last_line) =>
                    {
                        let n = self.cur.results.len();
                        self.notes.cut_short(
                            line_no,
                            format!(
                                "partial: the log ends mid-row at line {line_no}; \
                                 the {n} complete row(s) before it are kept"
                            ),
                        );
                        self.avg_seen = true;
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                if let Some(e) = max_error {
                    if self.max_error.is_none_or(|(m, _)| e > m) {
                        self.max_error = Some((e, line_no));
                    }
                }
                self.interleave_rows(row.size_bytes, line_no)?;
                self.push_row(row);
                return Ok(());
            }
        }
        // Older nccl-tests print no library version of their own: NCCL's
        // start-up line says it (a newer header's `nccl-library=` wins).
        if let Some(v) = nccl_version_line(trimmed) {
            self.cur.library.get_or_insert_with(|| format!("NCCL {v}"));
            return Ok(());
        }
        if !extra(trimmed, &mut self.cur) {
            self.note_mention(trimmed);
        }
        Ok(())
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
                self.settings(&tokens, line_no)?;
            }
            ["Rank", ..] => {
                if let Some(d) = device(&tokens) {
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
                }
            }
            ["Avg", "bus", "bandwidth", ..] if body.contains(':') => {
                let value = body.rsplit(':').next().unwrap_or("").trim();
                let value = value.split_whitespace().next().unwrap_or("");
                self.cur.avg_busbw_gbps = Some(float(value, line_no, "the average bus bandwidth")?);
                self.avg_seen = true;
                self.finish();
            }
            [first, ..] if (*first == "size" || *first == "bytes") && tokens.len() >= 4 => {
                self.cols = Some(Table::new(&self.raw));
            }
            // GPU memory lowered the sweep's end: the table ends there
            // complete, not cut short.
            ["Reducing", "maxBytes", "to", n, ..] => {
                self.cur.settings.max_bytes = num(n, line_no, "the reduced maxBytes")?;
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
            _ => self.note_mention(body),
        }
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
        self.max_error = None;
        self.last_row = None;
        self.back_to_back.clear();
        self.cols = None;
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
        Ok(())
    }

    fn note_mention(&mut self, text: &str) {
        if let Some(op) = op_mentioned(text) {
            self.mention = Some(op);
        }
    }
}

/// The error for output of several processes mixed line by line.
fn interleaved(first: usize, second: usize, what: &str) -> ParseError {
    ParseError::at(
        second,
        format!(
            "lines {first} and {second}: {what}: the output of several processes is interleaved; \
             rerun with srun --label or mpirun --tag-output (or one output file per rank)"
        ),
    )
}

/// `#  Rank  0 Group  0 Pid   1378 on  vm device  0 [0000:00:06] NVIDIA H200`
/// (older builds have no `Group`).
fn device(tokens: &[&str]) -> Option<DeviceInfo> {
    let num = |key: &str| after(tokens, key).and_then(|v| v.parse::<u64>().ok());
    let dev_at = tokens.iter().position(|t| *t == "device")?;
    let mut rest = tokens.get(dev_at + 2..).unwrap_or(&[]).iter();
    let mut bus_id = None;
    let mut name = Vec::new();
    for t in rest.by_ref() {
        match t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(b) if bus_id.is_none() && name.is_empty() => bus_id = Some(b.to_string()),
            _ => name.push(*t),
        }
    }
    Some(DeviceInfo {
        rank: num("Rank")?,
        group: num("Group").unwrap_or(0),
        pid: num("Pid").unwrap_or(0),
        host: after(tokens, "on").unwrap_or("").to_string(),
        device: num("device").unwrap_or(0),
        bus_id,
        name: name.join(" "),
    })
}

/// `all_reduce_perf` (possibly with a path or a packager's suffix such as
/// `_mpi`) -> `all_reduce`; see [`Collective::from_tool_name`]. A name it
/// does not know is kept, less its `_perf`.
pub(crate) fn op_name(perf: &str) -> String {
    let base = perf.rsplit('/').next().unwrap_or(perf);
    Collective::from_tool_name(base).map_or_else(
        || base.trim_end_matches("_perf").to_string(),
        |c| c.name().to_string(),
    )
}

/// The last collective named in free text: `*_perf` binaries, or the
/// unambiguous spellings (`all-gather`, `allreduce`, `reduce_scatter`, ...).
/// Plain words such as "reduce" or "broadcast" are too common in prose.
fn op_mentioned(text: &str) -> Option<String> {
    let mut found = None;
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
        let lower = word.to_ascii_lowercase();
        if let Some(c) = Collective::from_perf_name(&lower) {
            found = Some(c.name().to_string());
            continue;
        }
        let norm: String = lower.chars().filter(|c| *c != '_' && *c != '-').collect();
        if [
            "allreduce",
            "allgather",
            "reducescatter",
            "alltoall",
            "sendrecv",
        ]
        .contains(&norm.as_str())
        {
            found = Collective::parse(&norm).ok().map(|c| c.name().to_string());
        }
    }
    found
}

/// A collective named inside a file name (`mpi2_all_reduce_graph.txt`).
fn op_in_file_name(origin: &str) -> Option<String> {
    let base = origin
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(origin)
        .to_ascii_lowercase();
    let compact: String = base.chars().filter(|c| *c != '_' && *c != '-').collect();
    // Longer names first so "reducescatter" wins over "reduce" and "scatter".
    let mut names: Vec<Collective> = Collective::ALL.to_vec();
    names.sort_by_key(|c| std::cmp::Reverse(c.name().len()));
    names
        .into_iter()
        .find(|c| compact.contains(&c.name().replace('_', "")))
        .map(|c| c.name().to_string())
}

/// Guesses the collective from a row when the log never names it: the
/// size/count ratio tells per-rank-split collectives from whole-buffer ones,
/// redop and root narrow it further. all_reduce and sendrecv look alike;
/// all_reduce is by far the common case.
fn guess_op(r: &CaseResult, world: u64) -> Option<&'static str> {
    let ws = DataType::parse(&r.dtype).ok()?.size_bytes() as u64;
    let whole = r.count.checked_mul(ws)? == r.size_bytes;
    let reduces = !(r.redop.is_empty() || r.redop == "none");
    let split = !whole && (world == 0 || r.count.checked_mul(ws * world)? == r.size_bytes);
    Some(match (reduces, r.root >= 0, whole, split) {
        (true, false, true, _) => "all_reduce",
        (true, false, false, true) => "reduce_scatter",
        (true, true, true, _) => "reduce",
        (false, true, true, _) => "broadcast",
        (false, false, false, true) => "all_gather",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_found_in_names_and_prose() {
        assert_eq!(op_name("./build/alltoall_perf"), "alltoall");
        assert_eq!(op_name("all_reduce_perf_mpi"), "all_reduce");
        assert_eq!(
            op_mentioned("srun ./all_gather_perf_nccl -b 8").as_deref(),
            Some("all_gather")
        );
        assert_eq!(
            op_mentioned("kubectl exec -- /configs/allgather.sh h1 h2").as_deref(),
            Some("all_gather")
        );
        assert_eq!(op_mentioned("we reduce costs"), None);
        assert_eq!(
            op_in_file_name("dir/mpi2_reduce_scatter.txt").as_deref(),
            Some("reduce_scatter")
        );
        assert_eq!(
            op_in_file_name("x/all_reduce.txt").as_deref(),
            Some("all_reduce")
        );
    }
}
