//! The corpus of real public logs (`tests/corpus/<folder>/`, issue #49):
//! every log is read with `collbench report`'s reader and every value of
//! its `.expect.toml` checked (the format is in `tests/corpus/README.md`).
//! All mismatches are listed at once, each naming its file, before the
//! test fails. The `[nccl]` section and keys this test does not know are
//! another test's.
//!
//! The corpus must hold at least [`MIN_LOGS`] logs from [`MIN_SOURCES`]
//! sources; `COLLBENCH_CORPUS_PARTIAL=1` skips that count (while the
//! corpus is being gathered), never the values.

use collbench_core::{CaseResult, Placement, Record};
use collbench_report::input::Fault;
use collbench_report::parse::read_file;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use toml::Value;

/// The fewest logs the corpus may hold.
const MIN_LOGS: usize = 120;
/// The fewest distinct sources (a repository, or an issue or pull request).
const MIN_SOURCES: usize = 40;

/// Log file extensions read.
const EXTENSIONS: [&str; 3] = ["txt", "json", "log"];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every log of the corpus (`corpus/*/*.{txt,json,log}`), sorted.
fn logs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(folders) = std::fs::read_dir(corpus_dir()) else {
        return out;
    };
    for folder in folders.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let Ok(files) = std::fs::read_dir(&folder) else {
            continue;
        };
        out.extend(files.flatten().map(|e| e.path()).filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| EXTENSIONS.contains(&e))
        }));
    }
    out.sort();
    out
}

/// The expectation file beside `log`.
fn expect_path(log: &Path) -> PathBuf {
    log.with_extension("expect.toml")
}

/// One result table as the expectations count them: a record's rows of
/// one op, in order (a collbench run holds several ops in one record).
struct Table<'a> {
    record: &'a Record,
    rows: Vec<&'a CaseResult>,
}

fn tables(records: &[Record]) -> Vec<Table<'_>> {
    let mut out: Vec<Table> = Vec::new();
    for r in records {
        let mut cur: Vec<&CaseResult> = Vec::new();
        for c in &r.results {
            if cur.last().is_some_and(|l| l.op != c.op) {
                out.push(Table {
                    record: r,
                    rows: std::mem::take(&mut cur),
                });
            }
            cur.push(c);
        }
        if !cur.is_empty() {
            out.push(Table {
                record: r,
                rows: cur,
            });
        }
    }
    out
}

/// Whether `got` is the printed `want` (figures are printed with 2 to 6
/// digits; conversions from ms or MB/s may leave a last-digit error).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-6 * want.abs().max(1.0)
}

fn number(v: &Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

/// The out-of-place placement of a row, or its only one.
fn first_placement(c: &CaseResult) -> Option<&Placement> {
    c.out_of_place.as_ref().or(c.in_place.as_ref())
}

/// The figure `key` of table `t`, as the expectation format defines it.
fn figure(t: &Table, key: &str) -> Option<f64> {
    let max_bytes = t.rows.iter().map(|c| c.size_bytes).max()?;
    let largest = t.rows.iter().rev().find(|c| c.size_bytes == max_bytes)?;
    match key {
        "rows" => Some(t.rows.len() as f64),
        "min_bytes" => t.rows.iter().map(|c| c.size_bytes).min().map(|b| b as f64),
        "max_bytes" => Some(max_bytes as f64),
        "time_us" => first_placement(largest).map(|p| p.time_us),
        "busbw" => first_placement(largest).map(|p| p.busbw_gbps),
        "in_place_busbw" => largest.in_place.as_ref().map(|p| p.busbw_gbps),
        "bw_mbps" => first_placement(largest).map(|p| p.algbw_gbps * 1000.0),
        "wrong" => {
            let counts: Vec<u64> = t
                .rows
                .iter()
                .flat_map(|c| c.placements())
                .filter_map(|(_, p)| p.wrong)
                .collect();
            (!counts.is_empty()).then(|| counts.iter().sum::<u64>() as f64)
        }
        "avg_busbw" => t.record.avg_busbw_gbps,
        _ => None,
    }
}

/// The figures an expected table may name.
const FIGURES: [&str; 10] = [
    "rows",
    "min_bytes",
    "max_bytes",
    "time_us",
    "busbw",
    "in_place_busbw",
    "bw_mbps",
    "wrong",
    "avg_busbw",
    "op",
];

/// The mismatches of one log against its expectation, each one line.
fn check(log: &Path) -> Vec<String> {
    let name = log
        .strip_prefix(corpus_dir())
        .unwrap_or(log)
        .display()
        .to_string();
    let mut bad = Vec::new();
    let expect = match std::fs::read_to_string(expect_path(log)) {
        Ok(text) => match text.parse::<toml::Table>() {
            Ok(t) => t,
            Err(e) => return vec![format!("{name}: its .expect.toml does not parse: {e}")],
        },
        Err(e) => return vec![format!("{name}: no .expect.toml beside it: {e}")],
    };
    let refused = expect.get("refused").and_then(Value::as_bool) == Some(true);
    let want: Vec<&toml::Table> = expect
        .get("table")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_table).collect())
        .unwrap_or_default();
    let parsed = read_file(log, None);
    let parsed = match (parsed, refused) {
        (Err(_), true) => return bad,
        (Ok(p), true) => {
            return vec![format!(
                "{name}: expected a refusal, read {} record(s)",
                p.records.len()
            )]
        }
        // A log with no table (NCCL's INFO lines of a training job) is
        // "no results" to `report`: nothing to check but that.
        (Err(_), false) if want.is_empty() => return bad,
        (Err(e), false) => return vec![format!("{name}: refused: {e}")],
        (Ok(p), false) => p,
    };
    // A table cut before its first row (`rows = 0`) is no record: the
    // reader says so in a cut-short fault naming its op.
    let (empty, want): (Vec<&toml::Table>, Vec<&toml::Table>) = want
        .into_iter()
        .partition(|w| w.get("rows").and_then(Value::as_integer) == Some(0));
    for w in empty {
        let op = w.get("op").and_then(Value::as_str).unwrap_or("?");
        let said = parsed.faults.iter().any(|f| {
            matches!(f, Fault::CutShort { reason, .. }
                if reason.contains(&format!("the {op} table ends after its header")))
        });
        if !said {
            bad.push(format!(
                "{name}: no cut-short note for the empty {op} table"
            ));
        }
    }
    let got = tables(&parsed.records);
    if got.len() != want.len() {
        let ops: Vec<&str> = got.iter().map(|t| t.rows[0].op.as_str()).collect();
        bad.push(format!(
            "{name}: {} table(s) read ({}), {} expected",
            got.len(),
            ops.join(", "),
            want.len()
        ));
    }
    for (i, (t, w)) in got.iter().zip(&want).enumerate() {
        for key in FIGURES {
            let Some(expected) = w.get(key) else { continue };
            if key == "op" {
                // The op, less a qualifier the reader adds (NVSHMEM's
                // `alltoall_device/warp` is the test `alltoall_device`).
                let op = &t.rows[0].op;
                let test = op.split('/').next().unwrap_or(op);
                if expected.as_str() != Some(test) {
                    bad.push(format!(
                        "{name}: table {}: op {op}, expected {expected}",
                        i + 1
                    ));
                }
                continue;
            }
            let Some(expected) = number(expected) else {
                bad.push(format!("{name}: table {}: {key} is not a number", i + 1));
                continue;
            };
            match figure(t, key) {
                Some(g) if close(g, expected) => {}
                g => bad.push(format!(
                    "{name}: table {} ({}): {key} {}, expected {expected}",
                    i + 1,
                    t.rows[0].op,
                    g.map_or("none".to_string(), |g| g.to_string())
                )),
            }
        }
    }
    bad
}

/// The repository (`owner/name`), or issue or pull request
/// (`owner/name#N`), a source URL names; other URLs as they are, less
/// their fragment.
fn source_key(url: &str) -> String {
    let url = url.split('#').next().unwrap_or(url);
    let Some(path) = url.strip_prefix("https://github.com/") else {
        return url.to_string();
    };
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        [owner, repo, "issues" | "pull" | "discussions", n, ..] => format!("{owner}/{repo}#{n}"),
        [owner, repo, ..] => format!("{owner}/{repo}"),
        _ => url.to_string(),
    }
}

#[test]
fn every_corpus_log_reads_as_expected() {
    let logs = logs();
    let mut bad: Vec<String> = Vec::new();
    let mut sources = BTreeSet::new();
    for log in &logs {
        bad.extend(check(log));
        let source = std::fs::read_to_string(expect_path(log))
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .and_then(|t| t.get("source").and_then(Value::as_str).map(source_key));
        sources.extend(source);
    }
    println!(
        "corpus: {} log(s) from {} source(s), {} mismatch(es)",
        logs.len(),
        sources.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{} mismatch(es) in the corpus:\n{}",
        bad.len(),
        bad.join("\n")
    );
    if std::env::var("COLLBENCH_CORPUS_PARTIAL").as_deref() == Ok("1") {
        println!("COLLBENCH_CORPUS_PARTIAL=1: the corpus size is not checked");
        return;
    }
    assert!(
        logs.len() >= MIN_LOGS && sources.len() >= MIN_SOURCES,
        "the corpus holds {} log(s) from {} source(s); it needs {MIN_LOGS} from {MIN_SOURCES} \
         (COLLBENCH_CORPUS_PARTIAL=1 skips this while it is gathered)",
        logs.len(),
        sources.len()
    );
}

#[test]
fn sources_are_counted_by_repository_or_thread() {
    assert_eq!(
        source_key("https://github.com/NVIDIA/nccl-tests/blob/abc/README.md"),
        "NVIDIA/nccl-tests"
    );
    assert_eq!(
        source_key("https://github.com/NVIDIA/nccl/issues/1026#issuecomment-1"),
        "NVIDIA/nccl#1026"
    );
    assert_eq!(
        source_key("https://example.org/blog/post#x"),
        "https://example.org/blog/post"
    );
}

/// The damage real logs take on their way to a user (issue #49's classes),
/// each applied to every real text log of the corpus: the log must still
/// read to its own expected values. Public examples of some classes are
/// rare (`gaps3/SOURCES.md`), so the reader is held to the class on every
/// real layout instead.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Windows line ends.
    Crlf,
    /// Every line in ANSI colour, as a wrapper or CI log keeps it.
    Ansi,
    /// A data row's columns separated by tabs (pasted from a terminal or
    /// a spreadsheet).
    Tabs,
    /// A note after the last data row.
    RowNote,
    /// A middle data row cut in two by another process's NCCL INFO line.
    SplitRow,
}

/// Whether `line` is a data row: a size first, two numbers or more, and
/// nothing that a launcher or a timestamp adds (those lines are left
/// alone: other tests cover them).
fn is_data_row(line: &str) -> bool {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    tokens.len() >= 2
        && tokens[0].parse::<u64>().is_ok()
        && tokens.iter().filter(|t| t.parse::<f64>().is_ok()).count() >= 2
        && !line.contains(':')
        && !line.contains('[')
}

/// `text` with `damage` done to it; `None` where it has no data row to
/// damage.
fn damaged(text: &str, damage: Damage) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let rows: Vec<usize> = (0..lines.len())
        .filter(|&i| is_data_row(lines[i]))
        .collect();
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match damage {
        Damage::Crlf => return Some(out.join("\r\n") + "\r\n"),
        Damage::Ansi => {
            return Some(
                out.iter()
                    .map(|l| format!("\u{1b}[0;32m{l}\u{1b}[0m\n"))
                    .collect(),
            )
        }
        Damage::Tabs => {
            for &i in &rows {
                out[i] = lines[i].split_whitespace().collect::<Vec<_>>().join("\t");
            }
        }
        Damage::RowNote => out[*rows.last()?].push_str("   <- here"),
        Damage::SplitRow => {
            // A row in the middle of a table (rows before and after it),
            // cut between two of its columns where a figure follows (a
            // piece that starts with a word, OSU's `Pass`, is not told
            // from another process's text: skipped and counted). A
            // headerless log's first row is its only header, so it is not
            // the one cut.
            let inner: Vec<usize> = rows
                .iter()
                .copied()
                .filter(|i| {
                    rows.contains(&(i + 1)) && i.checked_sub(1).is_some_and(|p| rows.contains(&p))
                })
                .collect();
            let &i = inner.get(inner.len() / 2)?;
            let line = lines[i];
            let cells: Vec<(usize, &str)> = line
                .match_indices(|c: char| !c.is_whitespace())
                .filter(|(k, _)| *k == 0 || line[..*k].ends_with(char::is_whitespace))
                .map(|(k, _)| (k, line[k..].split_whitespace().next().unwrap_or("")))
                .collect();
            let (at, _) = cells
                .iter()
                .skip(1)
                .filter(|(_, cell)| cell.parse::<f64>().is_ok())
                .min_by_key(|(k, _)| k.abs_diff(line.len() / 2))?;
            let at = *at;
            out[i] = format!(
                "{}\nnode1:1234:1300 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n{}",
                &line[..at],
                &line[at..]
            );
        }
    }
    Some(out.join("\n") + "\n")
}

#[test]
fn every_corpus_log_reads_the_same_through_each_class_of_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = Vec::new();
    let mut tried = 0;
    for log in logs() {
        let Ok(text) = std::fs::read_to_string(&log) else {
            continue;
        };
        let expect = std::fs::read_to_string(expect_path(&log)).unwrap_or_default();
        if log.extension().is_some_and(|e| e == "json")
            || text.trim_start().starts_with(['{', '['])
            || expect.contains("refused = true")
        {
            continue;
        }
        for damage in [
            Damage::Crlf,
            Damage::Ansi,
            Damage::Tabs,
            Damage::RowNote,
            Damage::SplitRow,
        ] {
            let Some(text) = damaged(&text, damage) else {
                continue;
            };
            let copy = dir.path().join(log.file_name().unwrap());
            std::fs::write(&copy, text).unwrap();
            std::fs::write(expect_path(&copy), &expect).unwrap();
            tried += 1;
            bad.extend(check(&copy).into_iter().map(|m| format!("{damage:?}: {m}")));
        }
    }
    println!("{tried} damaged copies read, {} mismatch(es)", bad.len());
    assert!(tried > 500, "{tried}");
    assert!(
        bad.is_empty(),
        "{} mismatch(es):\n{}",
        bad.len(),
        bad.join("\n")
    );
}
