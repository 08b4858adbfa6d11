//! Ctrl-C (SIGINT), SIGTERM or SIGHUP during `run`: keep what was
//! measured. An hour of sweep used to be lost but for stdout, because the
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
    Measuring(Box<Record>),
    /// The main thread has the whole record and writes it; an interrupt
    /// now changes nothing.
    Done,
}

struct Shared {
    state: Mutex<State>,
    files: Vec<OutputFile>,
    /// `--format` of stdout, when it is not the streamed text.
    stdout: Option<Format>,
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
        }));
        let handler = keeper.clone();
        if let Err(e) = ctrlc::set_handler(move || handler.interrupted()) {
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

    /// The run ended by itself: the main thread writes the files now.
    pub fn done(&self) {
        *self.lock() = State::Done;
    }

    fn begin(&self, record: &Record) {
        *self.lock() = State::Measuring(Box::new(record.clone()));
    }

    fn row(&self, row: &CaseResult) {
        if let State::Measuring(record) = &mut *self.lock() {
            record.results.push(row.clone());
        }
    }

    /// The handler: write what was measured and end with 130. Holding
    /// the lock to the end keeps the main thread from starting its own
    /// writes meanwhile.
    fn interrupted(&self) {
        let mut state = self.lock();
        let line = match std::mem::replace(&mut *state, State::Done) {
            // The complete files are being written: let that finish.
            State::Done => return,
            State::NotRoot => "interrupted: rank 0 keeps the rows measured".to_string(),
            State::Waiting if self.0.files.is_empty() => {
                "interrupted before the first row".to_string()
            }
            State::Waiting => "interrupted before the first row: no file written".to_string(),
            State::Measuring(mut record) => {
                let when = match record.results.len() {
                    0 => "before the first row".to_string(),
                    1 => "after 1 row".to_string(),
                    n => format!("after {n} rows"),
                };
                record.partial = Some(format!("interrupted by a signal {when}"));
                self.write_partial(&record, &when)
            }
        };
        crate::stdout::say(format!("collbench: {line} (exit {INTERRUPTED})"));
        collbench_runner::watchdog::end_process_now(INTERRUPTED)
    }

    /// Writes every output (and a non-text stdout) from the partial
    /// record; the line says which files hold the rows.
    fn write_partial(&self, record: &Record, when: &str) -> String {
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
        if let Some(format) = self.0.stdout {
            let text = String::from_utf8_lossy(&format.exporter().serialize(record)).into_owned();
            if let Err(e) = crate::stdout::print(&text) {
                failed.push(e.to_string());
            }
        }
        let mut line = format!("interrupted {when}");
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

impl RunObserver for Keeping<'_> {
    fn begin(&mut self, record: &Record) {
        self.keeper.begin(record);
        self.inner.begin(record);
    }

    fn begin_collective(&mut self, coll: Collective, record: &Record) {
        self.inner.begin_collective(coll, record);
    }

    fn row(&mut self, coll: Collective, row: &CaseResult) {
        self.keeper.row(row);
        self.inner.row(coll, row);
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
