//! Small helpers shared by the text parsers: tokens and numbers with errors
//! that say which line and what was expected.

use super::ParseError;

/// The lines of `text` with their 1-based numbers, as errors name them.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(idx, line)| (idx + 1, line))
}

/// Parses `tok` as a number, or says which `what` was expected on `line`.
pub(crate) fn num<T: std::str::FromStr>(
    tok: &str,
    line: usize,
    what: &str,
) -> Result<T, ParseError> {
    tok.parse::<T>()
        .map_err(|_| ParseError::at(line, format!("expected {what} (a number), found '{tok}'")))
}

/// Parses a float, rejecting NaN and infinities spelled as text.
pub(crate) fn float(tok: &str, line: usize, what: &str) -> Result<f64, ParseError> {
    let v: f64 = num(tok, line, what)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(ParseError::at(
            line,
            format!("expected {what} (a finite number), found '{tok}'"),
        ))
    }
}

/// Refuses a row of `tokens` whose count is not the header's `want`
/// columns (named `names`).
pub(crate) fn expect_values(
    tokens: &[&str],
    want: usize,
    names: &str,
    line: usize,
) -> Result<(), ParseError> {
    if tokens.len() == want {
        return Ok(());
    }
    Err(ParseError::at(
        line,
        format!("expected {want} values ({names}), found {}", tokens.len()),
    ))
}

/// Whether `tok` is an unsigned integer (a table row starts with one).
pub(crate) fn is_uint(tok: &str) -> bool {
    !tok.is_empty() && tok.len() <= 20 && tok.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `tok` reads as a figure of a row (a number, `N/A`, or
/// rccl-tests' `12*`).
pub(crate) fn is_figure(tok: &str) -> bool {
    tok == "N/A" || tok.trim_end_matches('*').parse::<f64>().is_ok()
}

/// Whether `tok` starts a note someone put after a row's figures (`<-
/// protocol switch`, `# here`, `(slow)`): punctuation that no cell of a
/// table starts with. A word or a figure there is never taken for one:
/// it may be the piece of another row.
pub(crate) fn is_note_start(tok: &str) -> bool {
    !is_figure(tok) && tok.starts_with(|c: char| !c.is_alphanumeric())
}

/// The value after `key` among `tokens` (`nGpus 2` -> `2`).
pub(crate) fn after<'a>(tokens: &[&'a str], key: &str) -> Option<&'a str> {
    tokens
        .iter()
        .position(|t| *t == key)
        .and_then(|i| tokens.get(i + 1).copied())
}

/// The 1-based number of the last non-empty line (0 for an empty text): a
/// row that fails to parse there is one the log was cut in.
pub(crate) fn last_line(text: &str) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()
        .map_or(0, |(i, _)| i + 1)
}

/// The warning for a log cut inside its last row.
pub(crate) fn partial_row(line: usize, kept: usize) -> String {
    format!("partial: the log ends mid-row at line {line}; the {kept} complete row(s) before it are kept")
}

/// The version NCCL prints at start-up, `NCCL version 2.18.3+cuda12.2`
/// (bare with `NCCL_DEBUG=VERSION`, after `NCCL INFO` with `=INFO`), as
/// `2.18.3`; `None` on any other line.
pub(crate) fn nccl_version_line(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("NCCL version ")?;
    let version = rest.split_whitespace().next()?;
    let version = version.split('+').next()?;
    let ok = version.split('.').count() >= 2
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some(version)
}
