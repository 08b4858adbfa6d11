//! Ctrl-C (SIGINT), SIGTERM or SIGHUP during `run`, or a closed stdout
//! (`| head -1`): keep what was measured. An hour of sweep used to be lost but for stdout, because the
//! files were written only at the end.
//!
//! [`Keeper`] holds the record as rows arrive (through [`Keeping`], the
//! observer that wraps the printer); the signal handler, on ctrlc's own
//! thread, marks it partial, writes every output file and a non-text
//! stdout from it, says so in one line and ends the process with 130.
//! Wherever the main thread is (inside a long collective, waiting for
//! peers) it is not asked to stop: the process ends from the handler.

use crate::observer::TextObserver;
use collbench_core::{CaseResult, Collective, Record};
use collbench_output::Format;
use collbench_runner::{MemoryUsage, RunObserver};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// `run`'s exit code after an interrupt (128 + SIGINT, as shells report it).
const INTERRUPTED: i32 = crate::exit::Outcome::Interrupted.code();
/// A failed write is a usage failure (exit 2), as in every command.
const WRITE_FAILED: i32 = crate::exit::Outcome::Usage.code();

/// A file `run` writes at its end, and so also on an interrupt.
#[derive(Debug, Clone)]
pub struct OutputFile {
    /// The flag that named it (`--output`, `-J`), for messages.
    pub flag: &'static str,
    pub path: PathBuf,
    pub format: Format,
}

/// Where the run is, as the handler needs to know it.
enum State {
    /// No row yet (opening the backend, waiting for peers, the first case).
    Waiting,
    /// This process is not rank 0: rank 0 keeps the rows and writes files.
    NotRoot,
    /// Rows are arriving: the record so far.
    Measuring(Box<Kept>),
    /// The main thread has the whole record and writes it; an interrupt
    /// now changes nothing.
    Done,
}

/// The record so far, and where `-N 0`'s cycles begin in it.
struct Kept {
    record: Record,
    /// Index of the current collective's first row.
    collective_start: usize,
    /// Index of the current cycle's first row (`-N 0`).
    cycle_start: usize,
    /// Rows measured, kept or not (`-N 0` drops old cycles).
    measured: u64,
}

/// What ended the run early; each keeps the rows measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// Standard output was closed (`| head -1`): nobody reads the rows.
    StdoutClosed,
    /// Standard output refused a row (`> /dev/full`, a full disk): the
    /// failure's line ([`collbench_core::stdout::StdoutError`]).
    StdoutFailed(String),
}

impl Stop {
    /// What a failed write to stdout means: a reader that went away ends
    /// the run as Ctrl-C does; any other refusal is exit 2.
    pub fn from_write(e: &std::io::Error) -> Stop {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Stop::StdoutClosed
        } else {
            Stop::StdoutFailed(collbench_core::stdout::StdoutError::from(e).to_string())
        }
    }

    /// The first words of the line and of the record's `partial`.
    fn words(&self) -> &str {
        match self {
            Stop::Signal => "interrupted",
            Stop::StdoutClosed => "standard output closed",
            Stop::StdoutFailed(line) => line,
        }
    }

    /// The exit code: 130 for what ends a run as Ctrl-C does, 2 for a
    /// failed write (the code every command gives it).
    fn code(&self) -> i32 {
        match self {
            Stop::Signal | Stop::StdoutClosed => INTERRUPTED,
            Stop::StdoutFailed(_) => WRITE_FAILED,
        }
    }
}

struct Shared {
    state: Mutex<State>,
    files: Vec<OutputFile>,
    /// `--format` of stdout, when it is not the streamed text.
    stdout: Option<Format>,
    /// What of that document is on stdout already: its first line, once
    /// the run has begun (`doc_stdout`).
    stdout_written: std::sync::OnceLock<Vec<u8>>,
}

/// The rows measured so far, for the signal handler.
#[derive(Clone)]
pub struct Keeper(Arc<Shared>);

impl Keeper {
    /// Installs the handler (SIGINT, SIGTERM, SIGHUP). `stdout` is the
    /// format printed at the end when it is not the streamed text.
    pub fn install(files: Vec<OutputFile>, stdout: Option<Format>) -> Keeper {
        let keeper = Keeper(Arc::new(Shared {
            state: Mutex::new(State::Waiting),
            files,
            stdout,
            stdout_written: std::sync::OnceLock::new(),
        }));
        let handler = keeper.clone();
        if let Err(e) = ctrlc::set_handler(move || handler.stop(&Stop::Signal)) {
            crate::stdout::say(format!(
                "collbench: Ctrl-C will end the run without writing its files ({e})"
            ));
        }
        keeper
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves the rows as they were: still worth
        // keeping.
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This process is not rank 0 (set once the job is known).
    pub fn not_root(&self) {
        *self.lock() = State::NotRoot;
    }

    /// A non-text stdout (`--format json|csv|md`) gets its document's
    /// first line as the run begins; the stop a refused write means, if
    /// it was refused.
    fn begin_stdout(&self, record: &Record) -> Option<Stop> {
        let format = self.0.stdout?;
        let head = crate::doc_stdout::first_line(format, record);
        let written = {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(&head).and_then(|()| out.flush())
        };
        match written {
            Ok(()) => {
                let _ = self.0.stdout_written.set(head);
                None
            }
            Err(e) => Some(Stop::from_write(&e)),
        }
    }

    /// Whether a non-text stdout that has begun has lost its reader.
    fn stdout_reader_gone(&self) -> bool {
        self.0.stdout_written.get().is_some() && crate::doc_stdout::reader_gone()
    }

    /// What of `whole`, stdout's document, is still to be written.
    pub fn stdout_rest<'a>(&self, whole: &'a [u8]) -> &'a [u8] {
        match self.0.stdout_written.get() {
            Some(head) => crate::doc_stdout::rest(whole, head),
            None => whole,
        }
    }

    /// The run ended by itself: the main thread writes the files now.
    pub fn done(&self) {
        *self.lock() = State::Done;
    }

    fn begin(&self, record: &Record) {
        *self.lock() = State::Measuring(Box::new(Kept {
            record: record.clone(),
            collective_start: record.results.len(),
            cycle_start: record.results.len(),
            measured: 0,
        }));
    }

    fn begin_collective(&self) {
        if let State::Measuring(kept) = &mut *self.lock() {
            kept.collective_start = kept.record.results.len();
            kept.cycle_start = kept.collective_start;
        }
    }

    fn row(&self, row: &CaseResult) {
        if let State::Measuring(kept) = &mut *self.lock() {
            kept.record.results.push(row.clone());
            kept.measured += 1;
        }
    }

    /// `-N 0` begins another cycle: keep the last complete one and this
    /// one, as the runner does (memory stays flat however long it runs).
    fn endless_cycle(&self) {
        if let State::Measuring(kept) = &mut *self.lock() {
            let done = kept.record.results.len() - kept.cycle_start;
            kept.record
                .results
                .drain(kept.collective_start..kept.cycle_start);
            kept.cycle_start = kept.collective_start + done;
        }
    }

    /// The end of the run before its end (a signal, or a closed stdout):
    /// write what was measured and end with 130. Holding the lock to the
    /// end keeps the main thread from starting its own writes meanwhile.
    pub fn stop(&self, stop: &Stop) {
        let mut state = self.lock();
        let words = stop.words();
        let line = match std::mem::replace(&mut *state, State::Done) {
            // The complete files are being written: let that finish.
            State::Done => return,
            State::NotRoot => format!("{words}: rank 0 keeps the rows measured"),
            State::Waiting if self.0.files.is_empty() => format!("{words} before the first row"),
            State::Waiting => format!("{words} before the first row: no file written"),
            State::Measuring(kept) => {
                let mut record = kept.record;
                let when = match (kept.measured, record.results.len()) {
                    (0, _) => "before the first row".to_string(),
                    (1, _) => "after 1 row".to_string(),
                    (n, k) if n == k as u64 => format!("after {n} rows"),
                    (n, k) => format!(
                        "after {n} rows (-N 0 keeps the last complete cycle and the one in progress: {k} rows)"
                    ),
                };
                let by = match stop {
                    Stop::Signal => "interrupted by a signal",
                    Stop::StdoutClosed => "stopped: standard output was closed",
                    Stop::StdoutFailed(_) => "stopped: standard output refused a write",
                };
                record.partial = Some(format!("{by} {when}"));
                self.write_partial(&record, stop, &when)
            }
        };
        let code = stop.code();
        crate::stdout::say(format!("collbench: {line} (exit {code})"));
        collbench_runner::watchdog::end_process_now(code)
    }

    /// Writes every output (and a non-text stdout) from the partial
    /// record; the line says which files hold the rows.
    fn write_partial(&self, record: &Record, stop: &Stop, when: &str) -> String {
        let mut written = Vec::new();
        let mut failed = Vec::new();
        for f in &self.0.files {
            let bytes = f.format.exporter().serialize(record);
            match std::fs::write(&f.path, bytes) {
                Ok(()) => written.push(format!("{} {}", f.flag, f.path.display())),
                Err(e) => failed.push(format!(
                    "cannot write {} {}: {}",
                    f.flag,
                    f.path.display(),
                    crate::outputs::io_reason(&e)
                )),
            }
        }
        if let (Some(format), Stop::Signal) = (self.0.stdout, stop) {
            let whole = format.exporter().serialize(record);
            let text = String::from_utf8_lossy(self.stdout_rest(&whole)).into_owned();
            if let Err(e) = crate::stdout::print(&text) {
                failed.push(e.to_string());
            }
        }
        let mut line = match stop {
            Stop::StdoutFailed(why) => format!("{why}: stopped {when}"),
            _ => format!("{} {when}", stop.words()),
        };
        if !written.is_empty() {
            let what = if record.results.is_empty() {
                "wrote"
            } else {
                "wrote them to"
            };
            line += &format!(": {what} {}, marked partial", written.join(" and "));
        }
        if !failed.is_empty() {
            line += &format!("; {}", failed.join("; "));
        }
        line
    }
}

/// The printer, with every row also kept for the handler.
pub struct Keeping<'a> {
    pub inner: &'a mut TextObserver,
    pub keeper: &'a Keeper,
}

impl Keeping<'_> {
    /// A reader that went away (`| head -1`) ends the run as Ctrl-C does,
    /// at the next row: measuring on for nobody only loses the files. Any
    /// other failed write (`> /dev/full`) ends it there too, exit 2: the
    /// rows after it could not be printed either.
    fn stop_if_stdout_closed(&self) {
        if let Some(e) = &self.inner.write_error {
            self.keeper.stop(&Stop::from_write(e));
        }
        // `--format json|csv|md`: nothing more is written until the end,
        // so a reader that left is asked for.
        if self.keeper.stdout_reader_gone() {
            self.keeper.stop(&Stop::StdoutClosed);
        }
    }
}

impl RunObserver for Keeping<'_> {
    fn begin(&mut self, record: &Record) {
        self.keeper.begin(record);
        self.inner.begin(record);
        if let Some(stop) = self.keeper.begin_stdout(record) {
            self.keeper.stop(&stop);
        }
    }

    fn begin_collective(&mut self, coll: Collective, record: &Record) {
        self.keeper.begin_collective();
        self.inner.begin_collective(coll, record);
        self.stop_if_stdout_closed();
    }

    fn row(&mut self, coll: Collective, row: &CaseResult) {
        self.keeper.row(row);
        self.inner.row(coll, row);
        self.stop_if_stdout_closed();
    }

    fn endless_cycle(&mut self, _coll: Collective) {
        self.keeper.endless_cycle();
    }

    fn memory(&mut self, usage: &MemoryUsage) {
        self.inner.memory(usage);
    }

    fn end_collective(&mut self, coll: Collective, rows: &[CaseResult]) {
        self.inner.end_collective(coll, rows);
    }

    fn note(&mut self, text: &str) {
        self.inner.note(text);
    }
}
