//! collbench's own JSON: the serde form of [`Record`], one object or an
//! array of them.

use super::{Notes, ParseError};
use collbench_core::Record;

/// Parses one record or an array of records; a record of a stopped run
/// (`partial`, e.g. after Ctrl-C) is a "partial" data-quality warning.
pub fn parse(text: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let records = parse_records(text)?;
    for why in records.iter().filter_map(|r| r.partial.as_deref()) {
        notes.cut_short(0, format!("partial: {why}; the sweep was not finished"));
    }
    Ok(records)
}

fn parse_records(text: &str) -> Result<Vec<Record>, ParseError> {
    let err = |e: serde_json::Error| {
        ParseError::at(e.line().max(1), format!("expected a collbench record: {e}"))
    };
    if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<Record>>(text).map_err(err)
    } else {
        serde_json::from_str::<Record>(text)
            .map(|r| vec![r])
            .map_err(err)
    }
}
