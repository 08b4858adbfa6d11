//! Lines for people (warnings, progress, debug notes) from library code,
//! sent to the console the binary installs.
//!
//! No library crate writes to stdout or stderr itself: the CLI decides
//! where every line goes. These lines come from deep places (a backend's
//! setup, a group guard's `Drop`, the control plane's hub thread, the
//! watchdog thread) that no options struct reaches, so the console is one
//! per process, installed once by the binary at start ([`install`]),
//! rather than a writer threaded through every constructor. Until one is
//! installed (library unit tests) the lines are dropped.
//!
//! A command's results are not lines for people: libraries return them,
//! or write them to a writer they are given (`crate::stdout::write`).

use std::sync::OnceLock;

/// Where the lines go: the binary's terminal (stderr), or a test's buffer.
pub trait Console: Send + Sync {
    /// One line, without its newline; written whole (lines of two threads
    /// never interleave).
    fn line(&self, text: &str);
    /// Pushes out whatever the process holds buffered on its standard
    /// streams, before it exits without unwinding (the watchdog's
    /// grace-period exit).
    fn flush(&self) {}
}

static CONSOLE: OnceLock<Box<dyn Console>> = OnceLock::new();

/// Installs the process's console; the first call wins (later ones are
/// ignored, so a test harness and the binary cannot fight over it).
pub fn install(console: Box<dyn Console>) {
    let _ = CONSOLE.set(console);
}

/// Sends one line to the console (dropped when none is installed).
pub fn line(text: &str) {
    if let Some(c) = CONSOLE.get() {
        c.line(text);
    }
}

/// Flushes the process's standard streams through the console.
pub fn flush() {
    if let Some(c) = CONSOLE.get() {
        c.flush();
    }
}
