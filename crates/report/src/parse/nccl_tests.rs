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

use super::text::{after, float, is_uint, num};
use super::ParseError;
use collbench_core::{CaseResult, Collective, DataType, DeviceInfo, Placement, Record};

/// Parses nccl-tests text; `origin` (a file name) helps name the op.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Record>, ParseError> {
    parse_as(text, origin, "nccl-tests", &|_, _| false)
}

/// Parses nccl-tests-like text as `source`. `extra` sees each line that is
/// not part of a table first and returns true when it consumed it (rccl-tests
/// adds version lines this way).
pub(crate) fn parse_as(
    text: &str,
    origin: &str,
    source: &str,
    extra: &dyn Fn(&str, &mut Record) -> bool,
) -> Result<Vec<Record>, ParseError> {
    let mut p = Parser {
        source: source.to_string(),
        records: Vec::new(),
        cur: Record::new(source),
        cols: None,
        test_op: None,
        mention: None,
        file_op: op_in_file_name(origin),
        avg_seen: false,
    };
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        match unflatten(raw) {
            Some(parts) => {
                for part in parts {
                    p.line(&part, line_no, extra)?;
                }
            }
            None => p.line(raw, line_no, extra)?,
        }
    }
    p.finish();
    if p.records.is_empty() {
        return Err(ParseError::whole(
            "no result rows found (expected a '#  size  count  type ...' header followed by rows)",
        ));
    }
    Ok(p.records)
}

/// What a column of the result table holds; `usize` is the half
/// (0 = out-of-place, 1 = in-place).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    Size,
    Count,
    Type,
    Redop,
    Root,
    Time(usize),
    Algbw(usize),
    Busbw(usize),
    Wrong(usize),
    Timestamp,
    Other,
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
            "#wrong" | "wrong" | "error" | "errors" | "res" => Col::Wrong(half),
            "timestamp" => Col::Timestamp,
            _ => Col::Other,
        })
        .collect()
}

struct Parser {
    source: String,
    records: Vec<Record>,
    cur: Record,
    cols: Option<(Vec<Col>, String)>,
    test_op: Option<String>,
    mention: Option<String>,
    file_op: Option<String>,
    avg_seen: bool,
}

impl Parser {
    fn line(
        &mut self,
        raw: &str,
        line_no: usize,
        extra: &dyn Fn(&str, &mut Record) -> bool,
    ) -> Result<(), ParseError> {
        let trimmed = raw.trim();
        if let Some(body) = trimmed.strip_prefix('#') {
            return self.comment(body.trim(), line_no);
        }
        // Very old builds printed the footer without '#'.
        if trimmed.starts_with("Avg bus bandwidth") {
            return self.comment(trimmed, line_no);
        }
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        if let (Some((cols, names)), Some(first)) = (&self.cols, tokens.first()) {
            if is_uint(first) {
                let row = row(cols, names, &tokens, line_no)?;
                self.push_row(row);
                return Ok(());
            }
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
                    self.cur.library = Some(format!("NCCL {}", nccl_version(code)));
                }
            }
            ["Collective", "test", "starting:", name, ..] => {
                self.start_run();
                self.test_op = Some(op_name(name));
            }
            ["nThread", ..] => {
                self.start_run();
                self.settings(&tokens, line_no)?;
            }
            ["Rank", ..] => {
                if let Some(d) = device(&tokens) {
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
                self.cols = Some((columns(&tokens), tokens.join(" ")));
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
            let v: u64 = num(v, line_no, "an iteration count")?;
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

fn row(
    cols: &[Col],
    names: &str,
    tokens: &[&str],
    line_no: usize,
) -> Result<CaseResult, ParseError> {
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
                "expected a row of {} columns ({names}), found {} values",
                cols.len(),
                tokens.len()
            ),
        ));
    }
    let mut r = CaseResult {
        root: -1,
        ..CaseResult::default()
    };
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
                    float(tok, line_no, "a time in us")?
            }
            Col::Algbw(h) => {
                halves[h].get_or_insert_with(Placement::default).algbw_gbps =
                    float(tok, line_no, "algbw in GB/s")?
            }
            Col::Busbw(h) => {
                halves[h].get_or_insert_with(Placement::default).busbw_gbps =
                    float(tok, line_no, "busbw in GB/s")?
            }
            Col::Wrong(h) => {
                halves[h].get_or_insert_with(Placement::default).wrong = wrong(tok, line_no)?
            }
            Col::Timestamp | Col::Other => {}
        }
    }
    let [oop, ip] = halves;
    r.out_of_place = oop;
    r.in_place = ip;
    Ok(r)
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
    if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 {
        Ok(Some(v as u64))
    } else {
        Err(ParseError::at(
            line_no,
            format!("expected #wrong (a count or N/A), found '{tok}'"),
        ))
    }
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

/// NCCL_VERSION_CODE: `major*10000 + minor*100 + patch` since 2.9,
/// `major*1000 + minor*100 + patch` before.
fn nccl_version(code: u64) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// `all_reduce_perf` (possibly with a path) -> `all_reduce`.
pub(crate) fn op_name(perf: &str) -> String {
    let base = perf.rsplit('/').next().unwrap_or(perf);
    Collective::from_perf_name(base)
        .or_else(|| Collective::parse(base).ok())
        .map_or_else(
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

/// Splits a line onto which a web page flattened a whole table
/// (`# out-of-place in-place # size count ... # (B) ... 1024 32 float ... # Avg bus bandwidth : 1.2`)
/// back into header, rows and footer lines. `None` for ordinary lines.
fn unflatten(line: &str) -> Option<Vec<String>> {
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
    fn versions_decode_both_schemes() {
        assert_eq!(nccl_version(22803), "2.28.3");
        assert_eq!(nccl_version(2708), "2.7.8");
    }

    #[test]
    fn ops_are_found_in_names_and_prose() {
        assert_eq!(op_name("./build/alltoall_perf"), "alltoall");
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
            "1024 32 float none -1 19.60 0.05 0.05 0 19.00 0.05 0.05 0"
        );
        assert_eq!(parts.last().unwrap(), "# Avg bus bandwidth : 236.839");
        assert!(unflatten("#       size         count      type   redop").is_none());
    }
}
