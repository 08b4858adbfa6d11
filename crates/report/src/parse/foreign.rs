//! Text that other processes printed into a table: where it starts on a
//! line, so that the table's part of the line can be read and the rest
//! set aside (issue #49).
//!
//! Every multi-rank run with `NCCL_DEBUG=INFO` leaves rows such as
//!
//! ```text
//!      1048576   262144  float  sum  -1   45.21  23.19  40.59    0node1:123:456 [0] NCCL INFO Channel 00 ...
//!    44.87  23.37  40.90    0
//! ```
//!
//! nccl-tests printed the out-of-place half of the row, NCCL (or another
//! rank, libfabric, UCX) printed a line of its own straight after it, and
//! the in-place half came on the next line. [`foreign_at`] finds where
//! such text starts; the parsers rejoin the row's halves (see
//! `nccl_tests.rs`) or skip what does not rejoin.

use crate::input::fault::crash_marker_at;
use crate::input::scan::Needles;

/// NCCL's debug levels as printed after its `host:pid:tid [dev]` tag.
const NCCL_MARKERS: [&str; 4] = ["NCCL INFO", "NCCL WARN", "NCCL TRACE", "NCCL ABORT"];

static NCCL: Needles = Needles::new(&NCCL_MARKERS);
static LIBFABRIC: Needles = Needles::new(&["libfabric:"]);
static UCX: Needles = Needles::new(&["UCX "]);

/// UCX's log levels as printed after its `[time] [host:pid:tid] file:line`.
const UCX_LEVELS: [&str; 7] = ["INFO", "WARN", "ERROR", "DEBUG", "DIAG", "TRACE", "PRINT"];

/// The byte offset in `line` where text of another process starts (0: the
/// whole line is theirs), or `None` when the line holds none: NCCL's
/// `host:pid:tid [dev] NCCL INFO ...`, libfabric's `libfabric:pid:...`,
/// UCX's `[time] [host:pid:tid] file.c:N UCX INFO ...`, and crash lines
/// (`Test NCCL failure ...`, `Segmentation fault`, ...) glued to a row.
pub fn foreign_at(line: &str) -> Option<usize> {
    let mut found: Option<usize> = None;
    let mut keep = |at: usize| found = Some(found.map_or(at, |f: usize| f.min(at)));
    if let Some(at) = NCCL.find(line) {
        keep(nccl_tag_start(line, at));
    }
    if let Some(at) = LIBFABRIC.find(line) {
        keep(at);
    }
    if let Some(at) = ucx_start(line) {
        keep(at);
    }
    if let Some(at) = crash_marker_at(line) {
        keep(at);
    }
    found
}

/// The part of `line` before any text of another process ([`foreign_at`]).
pub fn own_part(line: &str) -> &str {
    foreign_at(line).map_or(line, |at| &line[..at])
}

/// Where NCCL's tag in front of the marker at `marker` starts: the
/// `[dev]` and `host:pid:tid` tokens before it, less any figure of a row
/// glued in front of the host name (`0node1:123:456` -> `node1:...`).
fn nccl_tag_start(line: &str, marker: usize) -> usize {
    let before = line[..marker].trim_end();
    let mut start = before.len();
    let mut rest = before;
    // `[0]`: the device.
    if let Some(open) = rest.strip_suffix(']').and_then(|r| r.rfind('[')) {
        if rest[open + 1..rest.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            start = open;
            rest = rest[..open].trim_end();
        }
    }
    // `host:pid:tid`.
    let token_at = rest.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let token = &rest[token_at..];
    let mut parts = token.rsplitn(3, ':');
    let (tid, pid, host) = (parts.next(), parts.next(), parts.next());
    let digits =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    if digits(tid) && digits(pid) && host.is_some_and(|h| !h.is_empty()) {
        return token_at + glued_figure_len(token);
    }
    if start == before.len() {
        // No tag: the marker itself starts the foreign text.
        return marker;
    }
    start
}

/// The length of a row's figure glued in front of a host name (`0` of
/// `0node1`, `40.59` of `40.59gpu-7`, `N/A` of `N/Anode1`); 0 when the
/// token starts with the host name.
fn glued_figure_len(token: &str) -> usize {
    if let Some(rest) = token.strip_prefix("N/A") {
        if rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return 3;
        }
    }
    let sign = usize::from(token.starts_with('-'));
    let n = sign
        + token[sign..]
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
    let next = token[n..].chars().next();
    if n > sign && next.is_some_and(|c| c.is_ascii_alphabetic()) {
        n
    } else {
        0
    }
}

/// Where UCX's `[1700000000.123456] [host:pid:tid]` starts on a line that
/// holds `UCX  LEVEL`.
fn ucx_start(line: &str) -> Option<usize> {
    let at = UCX.find(line)?;
    let level = line[at + 4..].trim_start();
    if !UCX_LEVELS.iter().any(|l| level.starts_with(l)) {
        return None;
    }
    // The timestamp: `[digits.digits]`, the first on the line before `UCX`.
    let mut from = 0;
    while let Some(open) = line[from..at].find('[').map(|o| o + from) {
        let close = line[open..at].find(']').map(|c| c + open)?;
        let inner = &line[open + 1..close];
        let stamp = inner.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && (a.bytes().chain(b.bytes())).all(|c| c.is_ascii_digit())
        });
        if stamp {
            return Some(open);
        }
        from = close;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_lines_glued_to_a_row_are_found() {
        let row = "     1048576   262144  float  sum  -1   45.21  23.19  40.59    0";
        let line = format!("{row}node1:123:456 [0] NCCL INFO Channel 00 via P2P");
        assert_eq!(foreign_at(&line), Some(row.len()));
        let cut = "       8388608       2097152     float     sum      -1";
        let line = format!("{cut}mew0:65704:65704 [1] NCCL INFO AllReduce: opCount 0");
        assert_eq!(foreign_at(&line), Some(cut.len()));
        let line = format!("{row} node-2:123:456 [3] NCCL WARN oops");
        assert_eq!(foreign_at(&line), Some(row.len() + 1));
        assert_eq!(foreign_at("gpu1:7:8 [0] NCCL INFO NET/IB"), Some(0));
        assert_eq!(foreign_at("NCCL INFO Bootstrap"), Some(0));
        let na = row.replace("    0", "  N/A");
        let line = format!("{na}gpu1:7:8 [0] NCCL INFO x");
        assert_eq!(foreign_at(&line), Some(na.len()));
    }

    #[test]
    fn libfabric_ucx_and_crashes_are_found() {
        assert_eq!(
            foreign_at("  8  2  libfabric:1234:1700::efa:core:x"),
            Some(8)
        );
        let ucx = "[1633961344.215574] [gpu1:12345:0]  ucp_context.c:1530 UCX  INFO  ucp_context";
        assert_eq!(foreign_at(&format!("  8   1.2{ucx}")), Some(9));
        assert_eq!(
            foreign_at("  8   1.2  0Test NCCL failure common.cu:1"),
            Some(12)
        );
        assert_eq!(
            foreign_at("   8   2   float   sum   -1   1.0   0.0   0.0   0"),
            None
        );
        assert_eq!(foreign_at("# nccl-tests version 2.19.6"), None);
    }
}
