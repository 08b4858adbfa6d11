//! Readers of benchmark logs. Every format becomes the same
//! [`collbench_core::Record`], so reports and comparisons work on any of them.
//!
//! One module per format; [`detect`] guesses the format from the text, and
//! [`parse_text`] / [`read_file`] (with warnings) and [`parse_str`] /
//! [`parse_file`] (records only) are the entry points; folders are read by
//! [`crate::input::read_paths`] and [`crate::input::parse_paths`].
//! Every text is cleaned first ([`crate::input::clean()`]), so parsers never
//! see launcher prefixes, CR line ends or colour codes. A parser
//! never panics on bad input: it returns a [`ParseError`] naming the line and
//! what it expected there.

pub mod collbench_json;
pub mod collbench_text;
pub mod detect;
pub mod foreign;
pub mod inspector;
pub mod nccl_json;
mod nccl_ops;
mod nccl_table;
pub mod nccl_tests;
pub mod nccom;
pub mod nvshmem;
pub mod osu;
mod pieces;
pub mod rccl;
pub mod read;
pub(crate) mod text;
pub mod unit;

pub use crate::input::fault::Fault;
pub use crate::input::parsed::{Parsed, Skipped, Warning};
use collbench_core::Record;
use std::collections::BTreeMap;
use std::path::Path;
pub use unit::SourceUnits;

/// What a parser notes beside its records: data-quality warnings and the
/// source units of records (by index in its output) that were not us/GB/s.
#[derive(Debug, Default)]
pub struct Notes {
    pub warnings: Vec<ParseError>,
    pub units: BTreeMap<usize, SourceUnits>,
    /// Given to the parser: the text's last line had no line end (the
    /// writer was stopped mid-line), so a bad last row is a cut one.
    pub cut_last_line: bool,
    /// Failure signals the parser saw (out-of-bounds footers, a cut log);
    /// their `origin` is empty here and filled by [`parse_text`].
    pub faults: Vec<Fault>,
    /// Given to the parser: what to do with a line it cannot place.
    pub strictness: Strictness,
    /// Lines the parser could not place and skipped.
    pub skipped: usize,
    /// The first of them, and why.
    pub first_skipped: Option<ParseError>,
}

/// What a reader does with a line it cannot place (a row of the wrong
/// shape, a figure that is not a number, a fragment that does not rejoin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// Skip it and count it; the report says so in one line. A text with
    /// no readable table is still refused, naming the first such line.
    #[default]
    Skip,
    /// Refuse the whole text at that line (`--strict`).
    Refuse,
}

impl Notes {
    /// Notes for a parser that treats unplaceable lines as `strictness` says.
    pub fn new(strictness: Strictness) -> Notes {
        Notes {
            strictness,
            ..Notes::default()
        }
    }

    /// A line that cannot be placed (`e` names it and why): its error
    /// with [`Strictness::Refuse`], else counted and skipped.
    pub fn skip(&mut self, e: ParseError) -> Result<(), ParseError> {
        if self.strictness == Strictness::Refuse {
            return Err(e);
        }
        self.skipped += 1;
        self.first_skipped.get_or_insert(e);
        Ok(())
    }

    /// Takes the skipped lines of `part` (a parser run on a part of the
    /// text whose line `1` is this text's line `offset + 1`).
    pub fn absorb_skipped(&mut self, part: &mut Notes, offset: usize) {
        self.skipped += part.skipped;
        if let Some(mut e) = part.first_skipped.take() {
            e.line += offset;
            self.first_skipped.get_or_insert(e);
        }
    }

    /// A warning about `line` (0: the text as a whole).
    pub fn warn(&mut self, line: usize, message: impl Into<String>) {
        self.warnings.push(ParseError::at(line, message));
    }

    /// The log stops early (`message` says how, starting with
    /// "partial"): a warning and a [`Fault::CutShort`].
    pub fn cut_short(&mut self, line: usize, message: impl Into<String>) {
        let reason = message.into();
        self.faults.push(Fault::CutShort {
            origin: String::new(),
            reason: reason.clone(),
        });
        self.warn(line, reason);
    }

    /// nccl-tests counted `count` result values outside tolerance: a
    /// warning and a [`Fault::OutOfBounds`].
    pub fn out_of_bounds(&mut self, line: usize, count: u64, message: impl Into<String>) {
        self.faults.push(Fault::OutOfBounds {
            origin: String::new(),
            count,
        });
        self.warn(line, message);
    }
}

/// The log formats collbench reads; [`Format::about`] describes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// nccl-tests text.
    NcclTests,
    /// nccl-tests `-J` JSON.
    NcclJson,
    /// rccl-tests text.
    Rccl,
    /// AWS Neuron nccom-test.
    Nccom,
    /// OSU Micro-Benchmarks.
    Osu,
    /// NVSHMEM perftest.
    Nvshmem,
    /// collbench's own JSON.
    CollbenchJson,
    /// collbench's own text output (`collbench run` on stdout).
    Collbench,
    /// NCCL Inspector JSON.
    Inspector,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 9] = [
        Format::NcclTests,
        Format::NcclJson,
        Format::Rccl,
        Format::Nccom,
        Format::Osu,
        Format::Nvshmem,
        Format::CollbenchJson,
        Format::Collbench,
        Format::Inspector,
    ];

    /// What the format is, for `--help`.
    pub fn about(self) -> &'static str {
        match self {
            Format::NcclTests => {
                "nccl-tests text output (any version, also the flattened one-line form)"
            }
            Format::NcclJson => "nccl-tests `-J` JSON (version 3, and the older 1 and 2)",
            Format::Rccl => "rccl-tests text output",
            Format::Nccom => "AWS Neuron nccom-test tables",
            Format::Osu => "OSU Micro-Benchmarks (collective latency, osu_bw, osu_latency, ...)",
            Format::Nvshmem => "NVSHMEM perftest tables",
            Format::CollbenchJson => "collbench's own JSON (one Record, or an array of them)",
            Format::Collbench => {
                "collbench's own text output (`collbench run` on stdout; one record per run)"
            }
            Format::Inspector => "NCCL Inspector profiler plugin JSON (one object per collective)",
        }
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::NcclTests => "nccl-tests",
            Format::NcclJson => "nccl-json",
            Format::Rccl => "rccl",
            Format::Nccom => "nccom",
            Format::Osu => "osu",
            Format::Nvshmem => "nvshmem",
            Format::CollbenchJson => "collbench-json",
            Format::Collbench => "collbench",
            Format::Inspector => "inspector",
        }
    }
}

/// What went wrong, and where, inside one text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number; 0 when the problem is the text as a whole.
    pub line: usize,
    /// What was found and what was expected.
    pub message: String,
}

impl ParseError {
    /// An error at `line` (1-based).
    pub fn at(line: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line,
            message: message.into(),
        }
    }

    /// An error about the text as a whole.
    pub fn whole(message: impl Into<String>) -> ParseError {
        ParseError::at(0, message)
    }
}

/// A [`ParseError`] (or an I/O failure) with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Whole { path: String, message: String },
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Binary data where a log's text should be (checked on the first KiB).
    #[error("{path}: not a text log (binary data in its first KiB): name a benchmark log, or leave this file out")]
    NotText { path: String },
    /// A large text without any tool's header near its start.
    #[error("{path}: not a benchmark log: no nccl-tests, rccl-tests, nccom-test, OSU, NVSHMEM perftest, Inspector or collbench header in its first {window}; use --input-format to force one")]
    NoHeader { path: String, window: String },
    /// With `--strict`, an entry of a folder that is not a regular file
    /// (`line`: `PATH: why`).
    #[error("{line} (--strict reads every file of a folder, or nothing)")]
    LeftOut { line: String },
    /// A line longer than [`read::MAX_LINE`] (one 1 GiB line once took
    /// 4.2 GB).
    #[error("{path}:{line}: a line longer than {limit}: not a benchmark log (their lines are short); name the right file, or cut the line")]
    LineTooLong {
        path: String,
        line: usize,
        limit: String,
    },
    /// [`read::JUNK_RUN`] bytes of lines in a row that no benchmark
    /// prints (junk after a valid header once read to the end, exit 0).
    #[error("{path}:{line}: not a benchmark log from this line on: {run} of lines in a row that no benchmark prints (first: `{first}`); cut the log before this line, or name the right file")]
    Junk {
        path: String,
        line: usize,
        /// The run's first line, shortened.
        first: String,
        run: String,
    },
    /// More text than [`read::MAX_TEXT`], or JSON over
    /// [`collbench_core::read_limit::JSON_BYTES`].
    #[error("{path}: larger than {limit}, the most collbench reads from one log: {fix}")]
    TooLarge {
        path: String,
        limit: String,
        /// What to do (text and JSON differ).
        fix: &'static str,
    },
    /// The inputs of one command add up to more than
    /// [`crate::input::total::TOTAL_BYTES`] (checked on their sizes
    /// before any is read; two JSON records at the cap once aborted at
    /// 4 GB).
    #[error("the inputs add up to {total} in {files} file(s), more than the {limit} collbench reads in one command (largest: {largest}): {fix}")]
    TooMuchInput {
        total: String,
        files: usize,
        limit: String,
        /// The largest files with their sizes, and how many more.
        largest: String,
        /// What to do (report and compare differ).
        fix: &'static str,
    },
    /// The files read so far hold more result rows than
    /// [`crate::input::total::TOTAL_ROWS`] (text made only of rows costs
    /// far more memory per byte than JSON).
    #[error("{path}: the inputs hold {rows} result rows up to this file, more than the {limit} collbench reads in one command: {fix}")]
    TooManyRows {
        /// The file whose rows passed the limit.
        path: String,
        rows: usize,
        limit: usize,
        /// What to do (report and compare differ).
        fix: &'static str,
    },
}

impl FileError {
    fn from_parse(path: &str, e: ParseError) -> FileError {
        if e.line == 0 {
            FileError::Whole {
                path: path.to_string(),
                message: e.message,
            }
        } else {
            FileError::Parse {
                path: path.to_string(),
                line: e.line,
                message: e.message,
            }
        }
    }
}

/// Parses `text` as `format` (detected when `None`). `origin` names the
/// text in the records (`Record::origin`) and helps guess a missing op name
/// from a file name such as `all_reduce.txt`. Warnings are dropped; use
/// [`parse_text`] to get them.
pub fn parse_str(
    text: &str,
    format: Option<Format>,
    origin: &str,
) -> Result<Vec<Record>, ParseError> {
    parse_text(text, format, origin).map(|p| p.records)
}

/// [`parse_text_with`], skipping lines it cannot place
/// ([`Strictness::Skip`]).
pub fn parse_text(text: &str, format: Option<Format>, origin: &str) -> Result<Parsed, ParseError> {
    parse_text_with(text, format, origin, Strictness::Skip)
}

/// Cleans `text` ([`crate::input::clean()`]), then parses each stream it
/// holds (one per rank when a launcher prefixed the lines). Streams of a
/// prefixed log in which no format is found (ranks that printed only NCCL
/// INFO lines) are left out; when several streams hold results, their
/// records are labelled `origin [rank N]`. Line numbers in errors and
/// warnings are those of the original text. Lines a parser cannot place
/// are skipped and counted in [`Parsed::skipped`], or refuse the text, as
/// `strictness` says.
pub fn parse_text_with(
    text: &str,
    format: Option<Format>,
    origin: &str,
    strictness: Strictness,
) -> Result<Parsed, ParseError> {
    let cleaned = crate::input::clean::clean(text);
    let several = cleaned.streams.len() > 1;
    let mut out = Parsed::default();
    let mut first_err: Option<ParseError> = None;
    let mut parts = Vec::new();
    for stream in &cleaned.streams {
        let fmt = format.or_else(|| detect::detect(&stream.text));
        if several && fmt.is_none() {
            continue;
        }
        let cut = cleaned.cut_last_line && stream.line_map.last() == Some(&cleaned.last_line);
        match parse_one(&stream.text, fmt, origin, cut, strictness) {
            Ok((records, notes)) => parts.push((stream, records, notes)),
            Err(e) => {
                let e = ParseError::at(stream.original_line(e.line), e.message);
                first_err.get_or_insert(e);
            }
        }
    }
    // A log with no table but NCCL's lines is read for its path, unless
    // --strict asks for a table or a refusal.
    let lenient = strictness == Strictness::Skip;
    if let Some(e) = first_err {
        let path = lenient.then(|| path_only(text, origin)).flatten();
        return path.ok_or_else(|| crashed_or(e, text));
    }
    if parts.is_empty() {
        if let Some(p) = lenient.then(|| path_only(text, origin)).flatten() {
            return Ok(p);
        }
        return Err(crashed_or(ParseError::whole(
            "cannot tell the format of any rank's output (expected nccl-tests/rccl-tests text or JSON, \
             nccom-test, OSU, NVSHMEM perftest, NCCL Inspector or collbench JSON); use --input-format to force one",
        ), text));
    }
    let label_streams = parts.len() > 1;
    if let Some(launcher) = cleaned.launcher {
        if !cleaned.unprefixed.is_empty() {
            out.warnings.push(Warning::new(
                origin,
                cleaned.unprefixed[0],
                format!(
                    "{} line(s) without the {launcher} prefix were ignored (first: line {})",
                    cleaned.unprefixed.len(),
                    cleaned.unprefixed[0]
                ),
            ));
        }
    }
    for (stream, records, notes) in parts {
        let name = match (&stream.label, label_streams) {
            (Some(l), true) => format!("{origin} [{l}]"),
            _ => origin.to_string(),
        };
        gather(&mut out, stream, records, notes, &name, label_streams);
    }
    crate::input::quality::check(&mut out, origin);
    out.faults
        .extend(crate::input::fault::crashes(text, origin));
    attach_nccl_path(&mut out, text);
    Ok(out)
}

/// A log without a result table that holds NCCL's INFO lines (a training
/// job's, a run that failed after init) still says which path NCCL took:
/// one record with no rows and that path, and a warning saying so.
/// A crash line in such a log (`Test NCCL failure ...`) is kept as its
/// fault: the path is often why it crashed. Lines that name no path (only
/// `NCCL version ...`) beside a crash leave the crash to refuse the log.
fn path_only(text: &str, origin: &str) -> Option<Parsed> {
    let path = collbench_core::nccl_path::NcclPath::from_text(text)?;
    // NCCL's version line alone names no path: a run that crashed is its crash.
    let no_path = path.net.is_none() && path.transports.is_empty() && path.nvls != Some(true);
    if no_path && text.lines().any(crate::input::fault::is_crash_line) {
        return None;
    }
    let mut record = Record::new("nccl-log");
    record.origin = Some(origin.to_string());
    record.library = path.version.as_ref().map(|v| format!("NCCL {v}"));
    record.nccl_path = Some(path);
    let mut out = Parsed::default();
    out.warnings.push(Warning::new(
        origin,
        0,
        "no result table; read NCCL's INFO lines only (the path NCCL took)".to_string(),
    ));
    out.records.push(record);
    out.units.push(SourceUnits::default());
    out.faults = crate::input::fault::crashes(text, origin);
    Some(out)
}

/// NCCL's INFO lines anywhere in the log (between rows, before the table,
/// from any rank) say which path it took: every record of the log that
/// does not carry its own gets it.
fn attach_nccl_path(out: &mut Parsed, text: &str) {
    if out.records.iter().all(|r| r.nccl_path.is_some()) {
        return;
    }
    if let Some(path) = collbench_core::nccl_path::NcclPath::from_text(text) {
        for r in out.records.iter_mut().filter(|r| r.nccl_path.is_none()) {
            r.nccl_path = Some(path.clone());
        }
    }
}

/// Adds what the parser of one stream read to `out`, lines numbered as in
/// the original text and everything named `name`.
fn gather(
    out: &mut Parsed,
    stream: &crate::input::clean::Stream,
    records: Vec<Record>,
    notes: Notes,
    name: &str,
    label_streams: bool,
) {
    if let Some(first) = &notes.first_skipped {
        out.skipped.push(Skipped::new(
            name,
            notes.skipped,
            stream.original_line(first.line),
            stream
                .text
                .lines()
                .nth(first.line.saturating_sub(1))
                .unwrap_or(""),
            &first.message,
        ));
    }
    for w in notes.warnings {
        out.warnings
            .push(Warning::new(name, stream.original_line(w.line), w.message));
    }
    for mut f in notes.faults {
        f.set_origin(name);
        out.faults.push(f);
    }
    for (k, mut r) in records.into_iter().enumerate() {
        if r.origin.is_none() || label_streams {
            r.origin = Some(name.to_string());
        }
        out.units
            .push(notes.units.get(&k).copied().unwrap_or_default());
        out.records.push(r);
    }
}

/// A text without results that holds a crash line (`Test NCCL failure
/// common.cu:...`) failed before its first row: that line is the error,
/// not "no result rows found". Errors at a line (a bad row) stay.
fn crashed_or(e: ParseError, text: &str) -> ParseError {
    if e.line != 0 || detect::looks_like_json(text) {
        return e;
    }
    let crash = text
        .lines()
        .enumerate()
        .find(|(_, l)| crate::input::fault::is_crash_line(l));
    match crash {
        Some((i, l)) => ParseError::at(
            i + 1,
            format!(
                "the run failed before its first result row: `{}`; fix that failure and run again",
                l.trim()
            ),
        ),
        None => e,
    }
}

/// Parses one cleaned stream. A text with no readable table whose
/// parser skipped lines is refused naming the first of them (why no row
/// was read), not "no rows found".
fn parse_one(
    text: &str,
    format: Option<Format>,
    origin: &str,
    cut_last_line: bool,
    strictness: Strictness,
) -> Result<(Vec<Record>, Notes), ParseError> {
    let format = match format {
        Some(f) => f,
        None => detect::detect(text).ok_or_else(|| {
            ParseError::whole(
                "cannot tell the format (expected nccl-tests/rccl-tests text or JSON, nccom-test, OSU, \
                 NVSHMEM perftest, NCCL Inspector or collbench JSON); use --input-format to force one",
            )
        })?,
    };
    let mut notes = Notes {
        cut_last_line,
        ..Notes::new(strictness)
    };
    let parsed = match format {
        Format::NcclTests => nccl_tests::parse(text, origin, &mut notes),
        Format::NcclJson => nccl_json::parse(text, &mut notes),
        Format::Rccl => rccl::parse(text, origin, &mut notes),
        Format::Nccom => nccom::parse(text, origin, &mut notes),
        Format::Osu => osu::parse(text, &mut notes),
        Format::Nvshmem => nvshmem::parse(text, &mut notes),
        Format::CollbenchJson => collbench_json::parse(text, &mut notes),
        Format::Collbench => collbench_text::parse(text, origin, &mut notes),
        Format::Inspector => inspector::parse(text, &mut notes),
    };
    match parsed {
        Ok(records) => Ok((records, notes)),
        Err(e) if e.line == 0 => Err(notes.first_skipped.take().unwrap_or(e)),
        Err(e) => Err(e),
    }
}

/// Reads and parses one file; warnings are dropped (see [`read_file`]).
pub fn parse_file(path: &Path, format: Option<Format>) -> Result<Vec<Record>, FileError> {
    read_file(path, format).map(|p| p.records)
}

/// Reads and parses one file, with its warnings; lines that cannot be
/// placed are skipped ([`Strictness::Skip`]).
pub fn read_file(path: &Path, format: Option<Format>) -> Result<Parsed, FileError> {
    read_file_with(path, format, Strictness::Skip)
}

/// Reads and parses one file, with its warnings, treating lines that
/// cannot be placed as `strictness` says.
pub fn read_file_with(
    path: &Path,
    format: Option<Format>,
    strictness: Strictness,
) -> Result<Parsed, FileError> {
    let name = path.display().to_string();
    let bytes = read::read_log(path, format)?;
    if let Some(parsed) = collbench_json::read_whole(&bytes, format, &name) {
        return Ok(parsed);
    }
    // Logs copied from terminals sometimes carry stray non-UTF-8 bytes;
    // they never sit inside the numbers we read.
    let text = String::from_utf8_lossy(&bytes);
    parse_text_with(&text, format, &name, strictness).map_err(|e| FileError::from_parse(&name, e))
}
