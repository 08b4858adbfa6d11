//! The rows of an nccl-tests table: whole rows, rows cut by lines other
//! processes printed into them (rejoined when their pieces make exactly
//! one row of the table's shape), and lines that cannot be placed
//! (skipped and counted, or refused with `--strict`: [`Notes::skip`]).
//!
//! [`Notes::skip`]: crate::parse::Notes::skip

use super::super::nccl_table::{
    fit, half_width, out_of_place_row, row, with_empty_redop, with_empty_redop_cell, Col, Fit,
    Table,
};
use super::super::text::{is_note_start, is_uint};
use super::super::ParseError;
use super::Parser;
use collbench_core::CaseResult;

/// The most pieces one row is rejoined from: a row cut more often than
/// this is skipped.
const MAX_PIECES: usize = 4;

/// The first pieces of a row that other processes' lines cut.
#[derive(Debug)]
pub(super) struct Fragment {
    tokens: Vec<String>,
    /// The line of its first piece, which the row is reported at.
    line: usize,
    pieces: usize,
}

impl Parser<'_> {
    /// The row a comment line holds, when it is a whole row of the
    /// current table commented out with the rest of its block (a run kept
    /// as comments in a Makefile or script: `#     1048576  262144  float
    /// none  0  461.9 ...`): the line with its `#` blanked, so its cells
    /// stay in their columns. Any other comment (`#  Rank  0 ...`, `#[a2a-
    /// devtime] ...`, a footer) is not a row of the table's shape.
    pub(super) fn commented_row(&self, raw: &str, body: &str, line_no: usize) -> Option<String> {
        let table = self.cols.as_ref().filter(|t| t.units_seen)?;
        let tokens: Vec<&str> = body.split_whitespace().collect();
        if !tokens.first().is_some_and(|t| is_uint(t)) {
            return None;
        }
        matches!(fit(table, &tokens, line_no), Fit::Row(..)).then(|| raw.replacen('#', " ", 1))
    }

    /// A line that starts with a size: a row, the first piece of one, a
    /// row the log was cut in, or a line that cannot be placed.
    pub(super) fn row_line(
        &mut self,
        raw: &str,
        tokens: &[&str],
        line_no: usize,
    ) -> Result<(), ParseError> {
        // A note after the row's figures (`<- here`, `# slow`) is not
        // part of it, whatever the row's layout (an old alltoall's empty
        // redop cell included).
        // The fewest cells a row may have: its out-of-place half (builds
        // that time one placement), or one fewer than the header (an old
        // alltoall's empty redop).
        let fewest = self.cols.as_ref().map_or(usize::MAX, |t| {
            let whole = t.cols.len().saturating_sub(1);
            half_width(t).map_or(whole, |h| h.min(whole))
        });
        let (raw, tokens) = without_note(raw, tokens, fewest);
        let tokens = tokens.as_slice();
        // A pending piece that the next row did not complete.
        let next_is_half = self
            .cols
            .as_ref()
            .and_then(half_width)
            .is_some_and(|w| w == tokens.len());
        if next_is_half {
            self.end_fragment()?;
        } else {
            self.drop_fragment()?;
        }
        // The writer stopped inside this row: even a row that reads as
        // numbers may hold a cut one ("338.8" of "338.82").
        // A file saved without a final line end is common, though: a row
        // with all its cells whose last is #wrong (or the old error) is
        // whole, as a cut could only have shortened that count.
        let cut = line_no == self.last_line && self.notes.cut_last_line && !self.flattened;
        let (width, fitted) = match &self.cols {
            None => return Ok(()),
            Some(t) if cut && !whole_at_end(t, tokens) => {
                (t.cols.len(), Fit::Bad(ParseError::whole("cut")))
            }
            Some(t) => {
                let fitted = match fit(t, tokens, line_no) {
                    // An empty redop cell (old alltoall) is one token short.
                    Fit::Short => match with_empty_redop(t, raw) {
                        Some(cells) => fit(t, &cells, line_no),
                        None => Fit::Short,
                    },
                    other => other,
                };
                (t.cols.len(), fitted)
            }
        };
        match fitted {
            Fit::Row(row, max_error) => self.accept(*row, max_error, line_no),
            _ if line_no == self.last_line
                && (tokens.len() < width || self.notes.cut_last_line) =>
            {
                self.cut_mid_row(line_no);
                Ok(())
            }
            Fit::Short => {
                self.fragment = Some(Fragment {
                    tokens: tokens.iter().map(|t| t.to_string()).collect(),
                    line: line_no,
                    pieces: 1,
                });
                Ok(())
            }
            Fit::Bad(e) => self.notes.skip(e),
        }
    }

    /// Tries `tokens` as the next piece of the pending fragment: true when
    /// they were taken (a whole row now, or a longer fragment).
    pub(super) fn rejoin(&mut self, tokens: &[&str], line_no: usize) -> Result<bool, ParseError> {
        let (Some(frag), Some(table)) = (self.fragment.take(), &self.cols) else {
            return Ok(false);
        };
        let mut joined: Vec<&str> = frag.tokens.iter().map(String::as_str).collect();
        joined.extend_from_slice(tokens);
        let fitted = match fit(table, &joined, frag.line) {
            // An old alltoall's row, one cell short: its empty redop.
            Fit::Short => match with_empty_redop_cell(table, &joined) {
                Some(cells) => fit(table, &cells, frag.line),
                None => Fit::Short,
            },
            other => other,
        };
        match fitted {
            Fit::Row(row, max_error) if line_no > frag.line => {
                self.accept(*row, max_error, frag.line)?;
                Ok(true)
            }
            Fit::Short if frag.pieces < MAX_PIECES => {
                self.fragment = Some(Fragment {
                    tokens: joined.iter().map(|t| t.to_string()).collect(),
                    line: frag.line,
                    pieces: frag.pieces + 1,
                });
                Ok(true)
            }
            // Not its rest: the line is read on its own, and the fragment
            // waits for what ends it (a row, a comment).
            _ => {
                self.fragment = Some(frag);
                Ok(false)
            }
        }
    }

    /// A pending fragment that nothing completed (a comment, a new table
    /// or row came first) is skipped.
    pub(super) fn drop_fragment(&mut self) -> Result<(), ParseError> {
        match self.fragment.take() {
            Some(frag) => self.skip_fragment(frag),
            None => Ok(()),
        }
    }

    /// A fragment pending when the text ends: the log ends mid-row (the
    /// run died while printing it, other processes' lines after it).
    pub(super) fn fragment_at_end(&mut self) {
        if let Some(frag) = self.fragment.take() {
            self.cut_mid_row(frag.line);
        }
    }

    /// A pending fragment where its table ends (a comment line), or before
    /// a row that is itself an out-of-place half: one that is exactly the
    /// out-of-place half of a row is that row (builds that time one
    /// placement print no in-place half; counted in one warning per table);
    /// any other is skipped. A half row among whole ones stays skipped.
    pub(super) fn end_fragment(&mut self) -> Result<(), ParseError> {
        let Some(frag) = self.fragment.take() else {
            return Ok(());
        };
        let tokens: Vec<&str> = frag.tokens.iter().map(String::as_str).collect();
        let half = self
            .cols
            .as_ref()
            .and_then(|t| out_of_place_row(t, &tokens, frag.line));
        match half {
            Some((row, max_error)) => {
                self.half_rows.get_or_insert((frag.line, 0)).1 += 1;
                self.accept(row, max_error, frag.line)
            }
            None => self.skip_fragment(frag),
        }
    }

    fn skip_fragment(&mut self, frag: Fragment) -> Result<(), ParseError> {
        let Some(table) = &self.cols else {
            return Ok(());
        };
        let tokens: Vec<&str> = frag.tokens.iter().map(String::as_str).collect();
        // The row's own error names what is missing (as --strict reports).
        let e = match row(table, &tokens, frag.line) {
            Err(e) => e,
            Ok(_) => ParseError::at(frag.line, "a row cut by other lines that does not rejoin"),
        };
        self.notes.skip(e)
    }

    fn cut_mid_row(&mut self, line_no: usize) {
        let n = self.cur.results.len();
        self.notes.cut_short(
            line_no,
            format!(
                "partial: the log ends mid-row at line {line_no}; \
                 the {n} complete row(s) before it are kept"
            ),
        );
        self.avg_seen = true;
    }

    fn accept(
        &mut self,
        row: CaseResult,
        max_error: Option<f64>,
        line_no: usize,
    ) -> Result<(), ParseError> {
        if let Some(e) = max_error {
            if self.max_error.is_none_or(|(m, _)| e > m) {
                self.max_error = Some((e, line_no));
            }
        }
        self.interleave_rows(row.size_bytes, line_no)?;
        self.push_row(row);
        Ok(())
    }
}

/// Whether `tokens`, the text's last line without a line end, are a whole
/// row of `t`: every cell there, the last a count (#wrong, old `error`,
/// a placement extension's).
fn whole_at_end(t: &Table, tokens: &[&str]) -> bool {
    tokens.len() == t.cols.len()
        && matches!(
            t.cols.last(),
            Some(Col::Wrong(_) | Col::MaxError(_) | Col::Extension(..))
        )
}

/// `raw` and `tokens` less a note after the row's figures: from the first
/// token that starts with punctuation no cell starts with
/// ([`is_note_start`]) to the end of the line, where the tokens before it
/// are at least the `fewest` cells a row has. Anything shorter is no row
/// with a note (another process's `61983 61985 [0] ncclProxyConnect ...`
/// line) and is left whole.
fn without_note<'a>(raw: &'a str, tokens: &[&'a str], fewest: usize) -> (&'a str, Vec<&'a str>) {
    let note = tokens.iter().skip(1).position(|t| is_note_start(t));
    match note.filter(|&k| k + 1 >= fewest) {
        Some(k) => {
            let at = raw.find(tokens[k + 1]).unwrap_or(raw.len());
            // `find` of the note's first token could match inside an
            // earlier cell only if a cell held punctuation, which none does.
            (&raw[..at], tokens[..=k].to_vec())
        }
        None => (raw, tokens.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use crate::parse::Notes;

    /// Held-out log (MJChku/nccl-tests `run.mk`): a run kept as comments
    /// at the end of a Makefile, its one row commented out too, was
    /// refused ("no result rows found").
    #[test]
    fn a_row_commented_out_with_its_block_is_read() {
        let text = "\
# Collective test starting: broadcast_perf
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
#     1048576        262144     float    none       0    461.9    2.27    2.27      0    401.4    2.61    2.61      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 2.4413 
";
        let mut notes = Notes::default();
        let records = parse(text, "run.mk", &mut notes).unwrap();
        let row = &records[0].results[0];
        assert_eq!((row.op.as_str(), row.size_bytes), ("broadcast", 1048576));
        assert_eq!(row.out_of_place.as_ref().unwrap().time_us, 461.9);
        assert_eq!(row.in_place.as_ref().unwrap().busbw_gbps, 2.61);
        assert_eq!(notes.skipped, 0);
    }

    /// A comment that only starts with a number is no row: a rank line
    /// shape or a size alone is left a comment.
    #[test]
    fn a_comment_of_another_shape_is_no_row() {
        let text = "\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
#  8  sizes were skipped
           8             2     float     sum      -1    16.30    0.00    0.00      0    16.16    0.00    0.00      0
";
        let mut notes = Notes::default();
        let records = parse(text, "log", &mut notes).unwrap();
        assert_eq!(records[0].results.len(), 1);
        assert_eq!(records[0].results[0].size_bytes, 8);
    }
}
