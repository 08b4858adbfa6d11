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

/// `line` with its leading `collbench` replaced by `prefix`.
fn reword(line: &str, prefix: Option<&str>) -> String {
    match (prefix, line.strip_prefix("collbench")) {
        (Some(p), Some(rest)) if rest.starts_with([':', ' ']) => format!("{p}{rest}"),
        _ => line.to_string(),
    }
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
