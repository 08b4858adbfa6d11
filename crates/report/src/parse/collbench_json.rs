//! collbench's own JSON: the serde form of [`Record`], one object or an
//! array of them.

use super::ParseError;
use collbench_core::Record;

/// Parses one record or an array of records.
pub fn parse(text: &str) -> Result<Vec<Record>, ParseError> {
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
