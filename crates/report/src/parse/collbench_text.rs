//! collbench's own text output (what `collbench run` prints on stdout):
//! nccl-tests' layout, with one `# Collective test starting:` section per
//! op under one header line
//! `# collbench version V (nccl-tests 2.19 output format) backend: B library: L`.
//!
//! The sections of one header are one run, so they become one [`Record`]
//! with source `collbench`, every op's rows, and the version, backend and
//! library of the header. A file holding several runs (outputs appended
//! one after another) has one header, and one record, per run.

use super::{nccl_tests, Notes, ParseError};
use collbench_core::Record;

/// The line that starts each run's output.
const HEADER: &str = "# collbench version ";

/// Parses collbench's text output; `origin` (a file name) helps name an op
/// whose section lost its `Collective test starting` line.
pub fn parse(text: &str, origin: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let mut out = Vec::new();
    let parts = runs(text);
    let last = parts.len() - 1;
    for (k, (offset, chunk)) in parts.into_iter().enumerate() {
        let mut part = Notes {
            cut_last_line: notes.cut_last_line && k == last,
            ..Notes::new(notes.strictness)
        };
        let shift = |mut e: ParseError| {
            if e.line > 0 {
                e.line += offset;
            }
            e
        };
        let records = nccl_tests::parse_as(chunk, origin, "collbench", &|_, _| false, &mut part);
        notes.absorb_skipped(&mut part, offset);
        let records = records.map_err(shift)?;
        notes.warnings.extend(part.warnings.into_iter().map(shift));
        notes.faults.append(&mut part.faults);
        if let Some(units) = part.units.values().next() {
            notes.units.insert(out.len(), *units);
        }
        let mut run = merge(records);
        if let Some(line) = chunk.lines().find(|l| l.starts_with(HEADER)) {
            header(line, &mut run);
        }
        out.push(run);
    }
    Ok(out)
}

/// The text split before each header line after the first (lines before
/// the first header stay with it), with the number of lines before each
/// part, to keep line numbers those of the whole text.
fn runs(text: &str) -> Vec<(usize, &str)> {
    let mut cuts = vec![(0, 0)];
    let (mut byte, mut seen) = (0, false);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.starts_with(HEADER) {
            if seen {
                cuts.push((i, byte));
            }
            seen = true;
        }
        byte += line.len();
    }
    let ends = cuts.iter().skip(1).map(|(_, b)| *b).chain([text.len()]);
    cuts.iter()
        .zip(ends)
        .map(|((line, from), to)| (*line, &text[*from..to]))
        .collect()
}

/// One record from the sections of one run: the first section's metadata
/// and devices (collbench lists devices once), every section's rows.
fn merge(records: Vec<Record>) -> Record {
    let mut parts = records.into_iter();
    let mut run = parts.next().unwrap_or_else(|| Record::new("collbench"));
    let mut several = false;
    for r in parts {
        several = true;
        run.results.extend(r.results);
    }
    // nccl-tests' average is per op; a run of several ops has none.
    if several {
        run.avg_busbw_gbps = None;
    }
    run
}

/// Reads `# collbench version 0.1.0 (...) backend: cpu library: NCCL 2.28.3`.
fn header(line: &str, run: &mut Record) {
    let rest = &line[HEADER.len()..];
    run.tool_version = rest.split_whitespace().next().map(str::to_string);
    let backend = rest.split_once("backend:").map(|(_, b)| b);
    if let Some(b) = backend.and_then(|b| b.split_whitespace().next()) {
        run.backend = Some(b.to_string()).filter(|b| b != "?");
    }
    if let Some((_, lib)) = rest.split_once("library:") {
        let lib = lib.trim();
        run.library = Some(lib.to_string()).filter(|l| !l.is_empty() && l != "none");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_gives_version_backend_and_library() {
        let mut r = Record::new("collbench");
        header(
            "# collbench version 0.1.0 (nccl-tests 2.19 output format) backend: nccl library: NCCL 2.28.3",
            &mut r,
        );
        assert_eq!(r.tool_version.as_deref(), Some("0.1.0"));
        assert_eq!(r.backend.as_deref(), Some("nccl"));
        assert_eq!(r.library.as_deref(), Some("NCCL 2.28.3"));
        header(
            "# collbench version 0.1.0 (nccl-tests 2.19 output format) backend: cpu library: none",
            &mut r,
        );
        assert_eq!(r.library, None);
    }

    #[test]
    fn appended_runs_split_at_their_headers() {
        let text = "# collbench version 1\na\n# collbench version 2\nb\n";
        let parts = runs(text);
        assert_eq!(
            parts,
            [
                (0, "# collbench version 1\na\n"),
                (2, "# collbench version 2\nb\n")
            ]
        );
        assert_eq!(
            runs("x\n# collbench version 1\n"),
            [(0, "x\n# collbench version 1\n")]
        );
    }
}
