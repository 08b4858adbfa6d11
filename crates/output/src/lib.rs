//! collbench-output: turns a [`collbench_core::Record`] into bytes.
//!
//! [`text`] prints nccl-tests' exact text layout, piece by piece, so a run
//! can stream rows as they are measured; [`Exporter`]s serialise a whole
//! record (JSON, CSV, Markdown, text). A new format is one new file and
//! one [`Format`] arm. Nothing here measures or knows about backends.

#![forbid(unsafe_code)]

mod ceiling_cells;
pub mod csv;
pub mod json;
pub mod markdown;
pub mod metrics;
pub mod nccl_tests_json;
pub mod text;
pub mod units;

use collbench_core::Record;

/// A whole-record output format.
pub trait Exporter {
    /// The record as this format's bytes.
    fn serialize(&self, record: &Record) -> Vec<u8>;
}

/// Output formats, for `--format` and `--output FILE.ext` (the CLI's value
/// enum lists them in `--help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// nccl-tests' text layout.
    Text,
    /// collbench's JSON record (schema/record.schema.json).
    Json,
    /// One row per case and placement.
    Csv,
    /// GitHub tables.
    Markdown,
    /// nccl-tests' own `-J` layout (see [`nccl_tests_json`]); chosen by
    /// `-J`, never by a file extension.
    NcclTestsJson,
}

impl Format {
    /// Picks a format from a file name's extension (.txt .json .csv .md).
    pub fn from_path(path: &std::path::Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" | "log" | "text" => Format::Text,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "md" | "markdown" => Format::Markdown,
            _ => return None,
        })
    }

    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Text => Box::new(text::TextExporter::default()),
            Format::Json => Box::new(json::JsonExporter),
            Format::Csv => Box::new(csv::CsvExporter),
            Format::Markdown => Box::new(markdown::MarkdownExporter),
            Format::NcclTestsJson => Box::new(nccl_tests_json::NcclTestsJsonExporter::default()),
        }
    }
}
