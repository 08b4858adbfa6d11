//! Rows of fixed-width tables (OSU, nccom-test) as the field leaves them
//! (issue #49): a note after a row's figures (`<- here`) is left out, and
//! a row that other processes' lines cut in two (`NCCL INFO ...`, UCX or
//! libfabric warnings under MPI) is rejoined when its pieces make exactly
//! one row of the table's width. A piece that does not rejoin is skipped
//! and counted, never guessed. nccl-tests' tables, whose width depends on
//! the build, have their own in `nccl_tests/rows.rs`.

use super::text::{is_figure, is_note_start, partial_row};
use super::{Notes, ParseError};

/// Why a piece of a row was skipped.
const NOT_REJOINED: &str = "a row cut by other lines that does not rejoin";

/// The most pieces one row is rejoined from.
const MAX_PIECES: usize = 4;

/// `tokens` less a note after exactly `width` cells; as they are otherwise.
pub(crate) fn without_note<'a, 'b>(tokens: &'b [&'a str], width: usize) -> &'b [&'a str] {
    match tokens.get(width) {
        Some(t) if is_note_start(t) => &tokens[..width],
        _ => tokens,
    }
}

/// The first pieces of a row, waiting for the rest.
#[derive(Debug, Default)]
pub(crate) struct Pieces {
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    tokens: Vec<String>,
    line: usize,
    pieces: usize,
}

/// What [`Pieces::offer`] made of a line.
#[derive(Debug, PartialEq)]
pub(crate) enum Offer {
    /// A whole row: its cells and the line it started on.
    Row(Vec<String>, usize),
    /// Taken as a piece of a row.
    Piece,
    /// Not a piece: read the line on its own.
    Line,
}

impl Pieces {
    /// Offers a line's `tokens` (note already left out) to a table of
    /// `width` cells. `starts_row`: the line begins with a size, so a short
    /// one is the first piece of a row. Also returns the line of a pending
    /// piece that this line ended without completing (skip and count it).
    pub(crate) fn offer(
        &mut self,
        tokens: &[&str],
        line: usize,
        width: usize,
        starts_row: bool,
    ) -> (Offer, Option<usize>) {
        // A line that held only another process's text (left out by
        // `own_part`) leaves the pending piece waiting.
        if tokens.is_empty() {
            return (Offer::Line, None);
        }
        let mut dropped = None;
        if let Some(p) = self.pending.take() {
            let joined = p.tokens.len() + tokens.len();
            if tokens.first().is_some_and(|t| is_figure(t)) && joined <= width {
                let mut cells = p.tokens;
                cells.extend(tokens.iter().map(|t| t.to_string()));
                if joined == width {
                    return (Offer::Row(cells, p.line), None);
                }
                if p.pieces < MAX_PIECES {
                    let pieces = p.pieces + 1;
                    let line = p.line;
                    self.pending = Some(Pending {
                        tokens: cells,
                        line,
                        pieces,
                    });
                    return (Offer::Piece, None);
                }
                dropped = Some(p.line);
            } else if starts_row {
                dropped = Some(p.line);
            } else {
                // Another process's line between the pieces: the piece
                // waits for its rest.
                self.pending = Some(p);
                return (Offer::Line, None);
            }
        }
        if starts_row && !tokens.is_empty() && tokens.len() < width {
            self.pending = Some(Pending {
                tokens: tokens.iter().map(|t| t.to_string()).collect(),
                line,
                pieces: 1,
            });
            return (Offer::Piece, dropped);
        }
        (Offer::Line, dropped)
    }

    /// Ends the table (a header, a title, the end of the text): the line of
    /// a pending piece, which nothing completed.
    pub(crate) fn end(&mut self) -> Option<usize> {
        self.pending.take().map(|p| p.line)
    }

    /// The row a table line of `width` cells makes, with the line it
    /// started on: the note after it left out, a short line that starts
    /// with a size held as a piece (`None` until its rest comes), pieces
    /// rejoined. A piece the line ends is skipped and counted in `notes`.
    /// The text's `last` line is never held: a short one there is the
    /// log's cut, which the parser reports.
    pub(crate) fn row_of(
        &mut self,
        all: &[&str],
        line: usize,
        (width, starts_row, last): (usize, bool, bool),
        notes: &mut Notes,
    ) -> Result<Option<(Vec<String>, usize)>, ParseError> {
        let tokens = without_note(all, width);
        let (offer, dropped) = self.offer(tokens, line, width, starts_row && !last);
        if let Some(at) = dropped {
            notes.skip(ParseError::at(at, NOT_REJOINED))?;
        }
        Ok(match offer {
            Offer::Row(cells, at) => Some((cells, at)),
            Offer::Line if starts_row => {
                Some((tokens.iter().map(|t| t.to_string()).collect(), line))
            }
            Offer::Piece | Offer::Line => None,
        })
    }

    /// A table ends (a header, a title, an average line): a pending piece
    /// is skipped and counted.
    pub(crate) fn end_table(&mut self, notes: &mut Notes) -> Result<(), ParseError> {
        match self.end() {
            Some(at) => notes.skip(ParseError::at(at, NOT_REJOINED)),
            None => Ok(()),
        }
    }

    /// The text ends: a pending piece is the log's cut (`kept` rows of
    /// the table before it).
    pub(crate) fn end_text(&mut self, notes: &mut Notes, kept: usize) {
        if let Some(at) = self.end() {
            notes.cut_short(at, partial_row(at, kept));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_cut_by_a_foreign_line_is_rejoined_and_a_stray_piece_is_not() {
        let mut p = Pieces::default();
        assert_eq!(p.offer(&["1024", "2.5"], 10, 3, true), (Offer::Piece, None));
        // The foreign line between the pieces is not offered (it does not
        // start with a figure, so the parser reads it as text).
        let (row, dropped) = p.offer(&["400.1"], 12, 3, false);
        assert_eq!(
            row,
            Offer::Row(vec!["1024".into(), "2.5".into(), "400.1".into()], 10)
        );
        assert_eq!(dropped, None);
        // Another process's words between the pieces leave it waiting.
        assert_eq!(p.offer(&["2048", "2.5"], 13, 3, true), (Offer::Piece, None));
        assert_eq!(
            p.offer(&["UCX", "WARN", "x"], 14, 3, false),
            (Offer::Line, None)
        );
        // A new row before its rest: the piece is dropped, the row read.
        assert_eq!(
            p.offer(&["4096", "1.0", "7.0"], 15, 3, true),
            (Offer::Line, Some(13))
        );
        assert_eq!(p.end(), None);
        // A piece the text ends with is the end's.
        assert_eq!(p.offer(&["8192"], 16, 3, true), (Offer::Piece, None));
        assert_eq!(p.end(), Some(16));
    }

    #[test]
    fn a_note_is_left_out_only_after_a_whole_row() {
        assert_eq!(without_note(&["8", "1.5", "<-", "here"], 2), ["8", "1.5"]);
        assert_eq!(without_note(&["8", "<-", "1.5"], 2), ["8", "<-", "1.5"]);
        assert_eq!(without_note(&["8", "1.5", "2.0"], 2), ["8", "1.5", "2.0"]);
    }
}
