//! Reading a log file without reading what is not a log.
//!
//! `report` used to read whole files before looking at them: a 1 GB file
//! of random bytes took 35 s and 7 GB before its refusal, 1 GB of text 11 s
//! and 3.4 GB. Now the first KiB says whether the file is text at all, and
//! a large text must show some tool's header within its first MiB before
//! the rest is read; anything else is refused at once, with memory bounded
//! by that window.

use super::{detect, FileError, Format};
use std::io::Read;
use std::path::Path;

/// Bytes that tell text from binary data.
const HEAD: usize = 1024;

/// How far into a large text a tool's header must appear (launcher and
/// job-script lines may come first; NCCL's INFO lines come after it).
const WINDOW: usize = 1 << 20;

/// The bytes of the log at `path`, or why it is not one. With `format`
/// forced, only the binary check applies (the user says what it is).
pub fn read_log(path: &Path, format: Option<Format>) -> Result<Vec<u8>, FileError> {
    let name = || path.display().to_string();
    let io = |source| FileError::Io {
        path: name(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    (&mut file)
        .take(HEAD as u64)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if is_binary(&bytes) {
        return Err(FileError::NotText { path: name() });
    }
    let json = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| matches!(b, b'{' | b'['));
    if format.is_none() && !json {
        (&mut file)
            .take((WINDOW - bytes.len()) as u64)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        // A text that ends inside the window is judged by the parsers as
        // before; a longer one must show a header in it.
        let longer = bytes.len() == WINDOW;
        if longer && !has_header(&bytes) {
            return Err(FileError::NoHeader {
                path: name(),
                window: "MiB".to_string(),
            });
        }
    }
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
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
        || crate::input::clean(&text)
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
}
