//! Reading a log file without reading what is not a log, in bounded
//! memory, from any source (a file, `/dev/stdin`, a FIFO).
//!
//! `report` used to read whole files before looking at them: a 1 GB file
//! of random bytes took 35 s and 7 GB before its refusal, 1 GiB of junk
//! after a valid header 3.4 GB (and exit 0), one 1 GiB line 4.2 GB, and
//! `(header; yes junk) | collbench report /dev/stdin` grew until the kernel
//! stopped it. Now:
//!
//! * the first KiB says whether the file is text at all;
//! * a JSON file is read through a `Take` of [`read_limit::JSON_BYTES`];
//! * a text is read line by line, each line through a `Take` of
//!   [`MAX_LINE`]; a large text must show some tool's header within its
//!   first MiB, [`JUNK_RUN`] bytes of lines in a row that no benchmark
//!   prints end the read ([`is_log_line`]), and the text kept is at most
//!   [`MAX_TEXT`].
//!
//! So memory is bounded by [`MAX_TEXT`] (or the JSON limit) whatever the
//! input, and junk is refused within its first MiB.

use super::{detect, FileError, Format};
use collbench_core::read_limit::{self, bytes_in_words};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Bytes that tell text from binary data.
const HEAD: usize = 1024;

/// How far into a large text a tool's header must appear (launcher and
/// job-script lines may come first; NCCL's INFO lines come after it).
const WINDOW: usize = 1 << 20;

/// The longest line read: a log's lines are short (a flattened table, the
/// longest seen, is a few KiB).
pub const MAX_LINE: usize = 1 << 20;

/// The most bytes of lines in a row that no benchmark prints.
pub const JUNK_RUN: usize = 1 << 20;

/// The most text kept of one log (the largest real logs, with every
/// NCCL INFO line of a large job, are some MiB).
pub const MAX_TEXT: usize = 64 << 20;

/// The bytes of the log at `path`, or why it is not one. With `format`
/// forced, the header window does not apply (the user says what it is);
/// every other bound does.
pub fn read_log(path: &Path, format: Option<Format>) -> Result<Vec<u8>, FileError> {
    let name = || path.display().to_string();
    let io = |source| FileError::Io {
        path: name(),
        source,
    };
    let mut file = BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut head = Vec::new();
    (&mut file)
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    if is_binary(&head) {
        return Err(FileError::NotText { path: name() });
    }
    let json = crate::input::scan::looks_like_json(&String::from_utf8_lossy(&head));
    if json {
        let limit = read_limit::JSON_BYTES;
        file.take(limit + 1 - head.len() as u64)
            .read_to_end(&mut head)
            .map_err(io)?;
        if head.len() as u64 > limit {
            return Err(FileError::TooLarge {
                path: name(),
                limit: bytes_in_words(limit),
                fix: "split it into files",
            });
        }
        return Ok(head);
    }
    let source = std::io::Cursor::new(head).chain(file);
    read_lines(source, format.is_none(), &name())
}

/// Reads a text line by line within the bounds above; `need_header`: a
/// text longer than [`WINDOW`] must show a tool's header in it.
fn read_lines(
    mut source: impl BufRead,
    need_header: bool,
    name: &str,
) -> Result<Vec<u8>, FileError> {
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut line_no = 0;
    // Where the current run of non-log lines began, and its length.
    let mut junk: Option<(usize, Vec<u8>)> = None;
    let mut junk_bytes = 0;
    let mut header_checked = !need_header;
    loop {
        line.clear();
        let n = (&mut source)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|source| FileError::Io {
                path: name.to_string(),
                source,
            })?;
        if n == 0 {
            return Ok(out);
        }
        line_no += 1;
        if line.len() > MAX_LINE {
            return Err(FileError::LineTooLong {
                path: name.to_string(),
                line: line_no,
                limit: bytes_in_words(MAX_LINE as u64),
            });
        }
        if is_log_line(&line) {
            junk = None;
            junk_bytes = 0;
        } else {
            junk.get_or_insert_with(|| (line_no, line.clone()));
            junk_bytes += line.len();
            if junk_bytes > JUNK_RUN {
                // A text that never showed a header is not a log at all.
                if !header_checked && !has_header(&out) {
                    return Err(FileError::NoHeader {
                        path: name.to_string(),
                        window: "MiB".to_string(),
                    });
                }
                let (at, first) = junk.take().unwrap_or_default();
                return Err(FileError::Junk {
                    path: name.to_string(),
                    line: at,
                    first: quote(&first),
                    run: bytes_in_words(JUNK_RUN as u64),
                });
            }
        }
        if out.len() + line.len() > MAX_TEXT {
            return Err(FileError::TooLarge {
                path: name.to_string(),
                limit: bytes_in_words(MAX_TEXT as u64),
                fix: "split it into files, or leave out NCCL's INFO lines (grep -v 'NCCL INFO')",
            });
        }
        out.extend_from_slice(&line);
        if !header_checked && out.len() >= WINDOW {
            header_checked = true;
            if !has_header(&out[..WINDOW]) {
                return Err(FileError::NoHeader {
                    path: name.to_string(),
                    window: "MiB".to_string(),
                });
            }
        }
    }
}

/// Whether a line looks like one some benchmark, launcher or library
/// prints: blank, a comment or header (`#`), a line naming a tool or
/// library, a crash line, or a table row (two numbers or more). Anything
/// else (`yes junk`, base64, prose) counts towards [`JUNK_RUN`]; job
/// scripts' own lines come between log lines and never add up to it.
pub fn is_log_line(line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() || text.contains('#') {
        return true;
    }
    const WORDS: [&str; 8] = [
        "NCCL",
        "nccl",
        "RCCL",
        "rccl",
        "OSU",
        "NVSHMEM",
        "nvshmem",
        "collbench",
    ];
    static LOG_WORDS: crate::input::scan::Needles = crate::input::scan::Needles::new(&WORDS);
    if LOG_WORDS.find(text).is_some() || crate::input::fault::is_crash_line(text) {
        return true;
    }
    let numbers = text
        .split(|c: char| c.is_whitespace() || c == '|' || c == ',')
        .filter(|t| !t.is_empty() && t.parse::<f64>().is_ok())
        .count();
    numbers >= 2
}

/// The first 60 characters of a line, for an error message.
fn quote(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

/// Whether the first bytes are not text: a NUL, or more than one in 20
/// that are neither printable UTF-8 nor the white space and colour codes
/// of a terminal log. A stray byte or two (logs copied from terminals)
/// stays text.
fn is_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    let text = String::from_utf8_lossy(head);
    // A multi-byte character cut at the end of the head is not binary.
    let text = text.trim_end_matches('\u{FFFD}');
    let odd = text
        .chars()
        .filter(|&c| {
            c == '\u{FFFD}'
                || (c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\x1b' | '\x0c'))
        })
        .count();
    odd * 20 > head.len()
}

/// Whether some tool's header is in `window`, launcher prefixes removed.
fn has_header(window: &[u8]) -> bool {
    let text = String::from_utf8_lossy(window);
    detect::detect(&text).is_some()
        || crate::input::clean::clean(&text)
            .streams
            .iter()
            .any(|s| detect::detect(&s.text).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_told_from_text() {
        assert!(is_binary(b"abc\0def"));
        let random: Vec<u8> = (0u32..1024)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
            .collect();
        assert!(is_binary(&random));
        assert!(!is_binary(b"# nThread 1 nGpus 1\n\x1b[32m ok\x1b[0m\n"));
        // One stray byte in a line of text.
        assert!(!is_binary(
            b"#  size  count \xff type  time  algbw  busbw\n"
        ));
        // A character cut at the end of the head.
        assert!(!is_binary("size µs".as_bytes().split_at(6).0));
    }

    #[test]
    fn log_lines_are_told_from_junk() {
        for line in [
            "",
            "#  size  count  type",
            "       8    2   float  sum  -1   9.63  0.00  0.00  0",
            "[1,0]<stdout>:     1024     256  float",
            "h:1:1 [0] NCCL INFO Bootstrap",
            "1024  12.5",
            "| 1024 | 256 | 3.2 |",
            "Segmentation fault (core dumped)",
        ] {
            assert!(is_log_line(line.as_bytes()), "{line}");
        }
        for line in ["junk", "aGVsbG8gd29ybGQ=", "the quick brown fox 1"] {
            assert!(!is_log_line(line.as_bytes()), "{line}");
        }
    }

    const HEADER: &str = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n#  size count type redop root time algbw busbw #wrong\n";

    #[test]
    fn junk_after_a_header_is_refused_within_its_first_mib() {
        let mut text = HEADER.as_bytes().to_vec();
        let junk_line = b"junk\n";
        // An endless source: refused after about JUNK_RUN bytes.
        let source = std::io::Cursor::new(text.clone()).chain(std::io::repeat(b'j').take(u64::MAX));
        let e = read_lines(BufReader::new(source), true, "x").unwrap_err();
        assert!(matches!(e, FileError::LineTooLong { line: 3, .. }), "{e}");
        for _ in 0..(JUNK_RUN / junk_line.len() + 2) {
            text.extend_from_slice(junk_line);
        }
        let e = read_lines(&text[..], true, "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x:3: not a benchmark log from this line on: 1 MiB of lines in a row that no benchmark prints (first: `junk`); cut the log before this line, or name the right file"
        );
    }

    #[test]
    fn a_log_with_some_other_lines_is_read_whole() {
        let text = format!("{HEADER}srun: job 5 started\nloading modules\n       8    2   float  sum  -1   9.63  0.00  0.00  0\n");
        assert_eq!(
            read_lines(text.as_bytes(), true, "x").unwrap(),
            text.as_bytes()
        );
    }
}
