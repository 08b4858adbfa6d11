//! collbench's own JSON: the serde form of [`Record`], one object or an
//! array of them.

use super::{detect, Format, Notes, ParseError};
use crate::input::parsed::{Parsed, Warning};
use crate::input::{fault, quality};
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

/// A file of collbench JSON read straight into its records: what
/// [`super::parse_text`] gives for it, without the clean-up that text logs
/// need (a copy of the text and a line table, which with the records took
/// about 11 times the file's size in memory). `None` where `bytes` are not
/// valid collbench JSON (or another format is forced): the ordinary path
/// then reads them and names the error.
pub fn read_whole(bytes: &[u8], format: Option<Format>, origin: &str) -> Option<Parsed> {
    if !matches!(format, None | Some(Format::CollbenchJson)) {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if detect::detect(text) != Some(Format::CollbenchJson) {
        return None;
    }
    let mut notes = Notes::default();
    let records = parse(text, &mut notes).ok()?;
    let mut out = Parsed::default();
    for w in notes.warnings {
        out.warnings.push(Warning::new(origin, w.line, w.message));
    }
    for mut f in notes.faults {
        f.set_origin(origin);
        out.faults.push(f);
    }
    for mut r in records {
        r.origin.get_or_insert_with(|| origin.to_string());
        out.units.push(Default::default());
        out.records.push(r);
    }
    quality::check(&mut out, origin);
    out.faults.extend(fault::crashes(text, origin));
    Some(out)
}
