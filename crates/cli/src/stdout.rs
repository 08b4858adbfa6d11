//! The process's own streams: results printed on stdout, and the console
//! that carries the libraries' lines for people to stderr
//! ([`collbench_core::diag`]). The only place, with the CLI's own
//! messages, that writes to them.

use collbench_core::stdout::StdoutError;
use std::io::Write;

/// Prints `text` on standard output and flushes it (a failure is a
/// [`StdoutError`]: exit 2, one line).
pub fn print(text: &str) -> Result<(), StdoutError> {
    collbench_core::stdout::write(&mut std::io::stdout().lock(), text)
}

/// Tests set this to a word that replaces the leading `collbench` of
/// every line [`say`] writes (`collbench: ...`, `collbench check: ...`):
/// exit codes must not change with it, since none may follow a message's
/// wording (tests/bad_input_table.rs, tests/stuck.rs). Hidden: not for
/// users.
const TEST_PREFIX_ENV: &str = "COLLBENCH_TEST_MESSAGE_PREFIX";

/// `text` with the leading `collbench` of each of its lines replaced by
/// `prefix` (a failure may name several malformed lines, one each).
fn reword(text: &str, prefix: Option<&str>) -> String {
    let one = |line: &str| match (prefix, line.strip_prefix("collbench")) {
        (Some(p), Some(rest)) if rest.starts_with([':', ' ']) => format!("{p}{rest}"),
        _ => line.to_string(),
    };
    text.split('\n').map(one).collect::<Vec<_>>().join("\n")
}

/// Writes one line for people to stderr, whole: the libraries' lines
/// (through the console) and the CLI's final error and stop lines.
pub fn say(line: impl std::fmt::Display) {
    static PREFIX: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| std::env::var(TEST_PREFIX_ENV).ok());
    // One write: stderr is unbuffered, and a line written in two pieces can
    // be split by a row on stdout where both go to one file (`2>&1`).
    let whole = reword(&line.to_string(), prefix.as_deref()) + "\n";
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}

/// Refuses to start with standard output closed (`>&-`): Rust's runtime
/// then puts `/dev/null` on descriptor 1, so every command printed nothing
/// and ended with exit 0. The runtime opens it read-write, which a shell's
/// `> /dev/null` never does; that is how the two are told apart (Linux).
pub fn refuse_closed() -> Result<(), &'static str> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (Ok(out), Ok(null)) = (
        std::fs::metadata("/proc/self/fd/1"),
        std::fs::metadata("/dev/null"),
    ) else {
        return Ok(());
    };
    let is_null = out.file_type().is_char_device() && out.rdev() == null.rdev();
    let flags = std::fs::read_to_string("/proc/self/fdinfo/1")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("flags:"))?;
            u32::from_str_radix(line["flags:".len()..].trim(), 8).ok()
        });
    // O_ACCMODE is 3, O_RDWR 2.
    match (is_null, flags) {
        (true, Some(f)) if f & 3 == 2 => Err("standard output is closed, so no result could be printed: redirect it (> FILE, or > /dev/null) instead of closing it"),
        _ => Ok(()),
    }
}

/// The libraries' lines go to stderr, one whole line at a time.
struct Stderr;

impl collbench_core::diag::Console for Stderr {
    fn line(&self, text: &str) {
        say(text);
    }

    fn flush(&self) {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
    }
}

/// Installs stderr as the libraries' console (first thing in `main`).
pub fn install_console() {
    collbench_core::diag::install(Box::new(Stderr));
}

#[cfg(test)]
mod tests {
    use super::reword;

    #[test]
    fn only_the_leading_word_is_rewritten() {
        let p = Some("XYZ");
        assert_eq!(reword("collbench: bad", p), "XYZ: bad");
        assert_eq!(reword("collbench check: a", p), "XYZ check: a");
        assert_eq!(reword("collbenchx: a", p), "collbenchx: a");
        assert_eq!(reword("collbench: bad", None), "collbench: bad");
    }
}
