//! Readers of benchmark logs. Every format becomes the same
//! [`collbench_core::Record`], so reports and comparisons work on any of them.
//!
//! One module per format; [`detect`] guesses the format from the text, and
//! [`parse_file`] / [`parse_paths`] are what the commands call. A parser
//! never panics on bad input: it returns a [`ParseError`] naming the line and
//! what it expected there.

pub mod collbench_json;
pub mod detect;
pub mod nccl_json;
pub mod nccl_tests;
pub mod nccom;
pub mod nvshmem;
pub mod osu;
pub mod rccl;
mod text;

use collbench_core::Record;
use std::path::{Path, PathBuf};

/// The log formats collbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// nccl-tests text output (any version, also the flattened one-line form).
    NcclTests,
    /// nccl-tests `-J` JSON (version 3, and the older 1 and 2).
    NcclJson,
    /// rccl-tests text output.
    Rccl,
    /// AWS Neuron nccom-test tables.
    Nccom,
    /// OSU Micro-Benchmarks (collective latency, osu_bw, osu_latency, ...).
    Osu,
    /// NVSHMEM perftest tables.
    Nvshmem,
    /// collbench's own JSON (one Record, or an array of them).
    CollbenchJson,
}

impl Format {
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
/// from a file name such as `all_reduce.txt`.
pub fn parse_str(
    text: &str,
    format: Option<Format>,
    origin: &str,
) -> Result<Vec<Record>, ParseError> {
    let format = match format {
        Some(f) => f,
        None => detect::detect(text).ok_or_else(|| {
            ParseError::whole(
                "cannot tell the format (expected nccl-tests/rccl-tests text or JSON, nccom-test, OSU, \
                 NVSHMEM perftest or collbench JSON); use --format to force one",
            )
        })?,
    };
    let mut records = match format {
        Format::NcclTests => nccl_tests::parse(text, origin)?,
        Format::NcclJson => nccl_json::parse(text)?,
        Format::Rccl => rccl::parse(text, origin)?,
        Format::Nccom => nccom::parse(text)?,
        Format::Osu => osu::parse(text)?,
        Format::Nvshmem => nvshmem::parse(text)?,
        Format::CollbenchJson => collbench_json::parse(text)?,
    };
    for r in &mut records {
        if r.origin.is_none() {
            r.origin = Some(origin.to_string());
        }
    }
    Ok(records)
}

/// Reads and parses one file.
pub fn parse_file(path: &Path, format: Option<Format>) -> Result<Vec<Record>, FileError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| FileError::Io {
        path: name.clone(),
        source,
    })?;
    // Logs copied from terminals sometimes carry stray non-UTF-8 bytes;
    // they never sit inside the numbers we read.
    let text = String::from_utf8_lossy(&bytes);
    parse_str(&text, format, &name).map_err(|e| FileError::from_parse(&name, e))
}

/// Parses files and directories. A directory contributes every file in it
/// (recursively, sorted by name) whose format can be detected; other files
/// there are skipped, while a file named directly must parse.
pub fn parse_paths(paths: &[PathBuf], format: Option<Format>) -> Result<Vec<Record>, FileError> {
    let mut records = Vec::new();
    for path in paths {
        if path.is_dir() {
            for file in files_under(path)? {
                if format.is_none() && !detectable(&file) {
                    continue;
                }
                records.append(&mut parse_file(&file, format)?);
            }
        } else {
            records.append(&mut parse_file(path, format)?);
        }
    }
    Ok(records)
}

/// Whether a file found in a directory looks like a log we read.
fn detectable(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| detect::detect(&String::from_utf8_lossy(&b)).is_some())
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let io = |source| FileError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.append(&mut files_under(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}
