//! Placement extensions: a check measured per placement beyond its time
//! and `#wrong` (docs/architecture.md, "Placement extensions"), as one
//! type that owns everything about it that is not the measurement: its
//! field of [`Placement`] and of [`RunSettings`], how processes' shares
//! merge, its text cells and lines in nccl-tests' layout, its `-J` keys,
//! how a log shows it and how to read it back, and what a failure of it
//! says. The runner measures it (`runner::PlacementCheck`); printers,
//! parsers, `compare`'s faults and the exit code iterate
//! [`crate::extension_list::extensions`] and name none of them, as printers read
//! [`crate::Collective`]'s table.

use crate::record::{CaseResult, Placement, Record, RunSettings};
use serde_json::Value;

/// The words of the table header that every layout shares: the time
/// column's name and the timestamp column's width, name and unit (`-S`).
#[derive(Debug, Clone, Copy)]
pub struct HeaderWords<'a> {
    /// `time` or `cputime` (`-C`).
    pub time: &'a str,
    /// Width of the timestamp column (0 without `-S`).
    pub pad: usize,
    /// The timestamp column's name (empty without `-S`).
    pub label: &'a str,
    /// The timestamp column's unit line (empty without `-S`).
    pub format: &'a str,
}

/// What a `#` line of a log was to an extension (see
/// [`PlacementExtension::read_line`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineRead {
    /// Not one of its lines.
    NotMine,
    /// Read into the run.
    Read,
    /// One of its lines that says the run failed the check: read, and a
    /// warning for people.
    Warn(String),
    /// One of its lines that could not be read (why, for the parser's
    /// skipped-line count).
    Unreadable(String),
}

/// One per-placement check's facts. Implementations are unit structs in
/// [`crate::extension_list::extensions`]'s list; every method but the three
/// merges and reads is a fact of nccl-tests' layout.
pub trait PlacementExtension: Sync {
    /// Its short name (the record field it owns).
    fn name(&self) -> &'static str;
    /// Whether the run's settings turned it on.
    fn active(&self, settings: &RunSettings) -> bool;
    /// Adds `from`'s share (another process's ranks) into `into`.
    fn merge(&self, into: &mut Placement, from: &Placement);
    /// Placements of `rows` that failed it; `None` where no placement
    /// was checked (the extension was off).
    fn failures(&self, rows: &[CaseResult]) -> Option<u64>;
    /// What the run says when `n` placements failed (it then exits as
    /// for wrong results), after `collbench: `.
    fn failure_line(&self, n: u64) -> String;
    /// What a failed placement says in `report` and `compare`, `case`
    /// naming the row and placement; `None` where it passed or was not
    /// checked.
    fn fault(&self, p: &Placement, case: &str) -> Option<String>;

    /// The line under nccl-tests' run settings (with its line end);
    /// empty where off.
    fn report_line(&self, settings: &RunSettings) -> String;
    /// The three header lines of the table when it is on (`per_iter`:
    /// `-I`'s columns follow its own).
    fn table_header(&self, words: HeaderWords<'_>, per_iter: bool) -> String;
    /// Width of its one cell per placement (after two spaces).
    fn cell_width(&self) -> usize;
    /// A placement's cell, a count printed as nccl-tests' `%g`; `None`
    /// prints `N/A`.
    fn cell(&self, p: Option<&Placement>) -> Option<u64>;
    /// Lines printed under a row (with line ends); empty for most.
    fn row_lines(&self, r: &CaseResult) -> String;
    /// The footer's label for [`PlacementExtension::failures`]
    /// (`# LABEL : N OK|FAILED`).
    fn footer_label(&self) -> &'static str;

    /// `-J`: its `config` key and value, where on.
    fn json_config(&self, settings: &RunSettings) -> Option<(&'static str, u64)>;
    /// `-J`: a placement's object key and fields (`None`: `null`).
    #[allow(clippy::type_complexity)]
    fn json_placement(
        &self,
        p: &Placement,
    ) -> Option<(&'static str, Vec<(&'static str, Option<u64>)>)>;
    /// `-J`: the top-level key of its `{count, okay}` object.
    fn json_failures_key(&self) -> &'static str;

    /// The names its column has in a table header.
    fn column_names(&self) -> &'static [&'static str];
    /// A cell of its column, read as a count (`None`: `N/A`).
    fn read_cell(&self, p: &mut Placement, count: Option<u64>);
    /// A `#` line (`tokens`: after the `#`) of a log of `run`, whose last
    /// row is the one the line is under.
    fn read_line(&self, tokens: &[&str], run: &mut Record) -> LineRead;
    /// What a parsed placement takes from its run's settings once its
    /// row is read.
    fn settle(&self, p: &mut Placement, settings: &RunSettings);
    /// `-J`'s `config` object read back.
    fn read_json_config(&self, config: &Value, settings: &mut RunSettings);
    /// `-J`'s placement object read back (`path` names it for errors).
    fn read_json_placement(
        &self,
        json: &Value,
        p: &mut Placement,
        path: &str,
    ) -> Result<(), String>;
}
