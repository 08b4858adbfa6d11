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

/// The libraries' lines go to stderr, one whole line at a time.
struct Stderr;

impl collbench_core::diag::Console for Stderr {
    fn line(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{text}");
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
