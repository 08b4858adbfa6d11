//! Writing a command's results as a fallible step.
//!
//! `print!` panics when stdout fails (`> /dev/full`, a full disk, a closed
//! pipe), which ended commands with exit 101 and a backtrace. Results go
//! through [`write()`] to the writer the CLI gives (its stdout) instead, and
//! the [`StdoutError`] is handed up, so the binary can end with its one line
//! and exit 2, as for any failed write.

use std::io::Write;

/// Standard output did not take what a command printed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the results to standard output: {reason}")]
pub struct StdoutError {
    /// The I/O error's text, without Rust's "(os error N)" suffix.
    pub reason: String,
}

impl From<std::io::Error> for StdoutError {
    fn from(e: std::io::Error) -> StdoutError {
        StdoutError::from(&e)
    }
}

impl From<&std::io::Error> for StdoutError {
    fn from(e: &std::io::Error) -> StdoutError {
        let text = e.to_string();
        let reason = match text.find(" (os error ") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        StdoutError { reason }
    }
}

/// Writes `text` to `out` (the CLI's standard output) and flushes it, so a
/// failure shows here rather than at exit, where it would go unseen.
pub fn write(out: &mut dyn Write, text: &str) -> Result<(), StdoutError> {
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_drops_the_os_error_suffix() {
        let e = StdoutError::from(std::io::Error::from_raw_os_error(28));
        assert_eq!(
            e.to_string(),
            "cannot write the results to standard output: No space left on device"
        );
    }
}
