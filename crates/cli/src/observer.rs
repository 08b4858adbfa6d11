//! Prints results as they arrive: nccl-tests text on stdout, a progress
//! bar on stderr when stderr is a terminal, progress lines when it is not
//! (`progress_line`).

use crate::progress_line::{clock, BatchLog, Sweep, Tracker};
use collbench_core::{CaseResult, Collective, Record};
use collbench_output::text::{self, TextOptions};
use collbench_runner::RunObserver;
use std::io::Write;
use std::time::Instant;

/// How the run's progress reaches people on stderr.
enum Progress {
    /// A terminal: the bar, its message carrying the estimate.
    Bar(indicatif::ProgressBar, Tracker),
    /// A batch job's log: a line per collective and every 10 s.
    Lines(BatchLog),
    /// `-q` in a batch job: nothing.
    Off,
}

/// Streams the text layout to stdout (when `print` is on) and drives the
/// progress bar.
pub struct TextObserver {
    pub print: bool,
    pub options: TextOptions,
    /// Print the slowest ranks after each row (`--per-rank`).
    pub per_rank: bool,
    devices: Vec<collbench_core::DeviceInfo>,
    /// GPU memory to print in the next footer (`-M 1`).
    memory: Option<text::memory::GpuMemory>,
    first: bool,
    progress: Progress,
    collectives_done: usize,
    /// The first failed write to stdout; printing stops there and `run`
    /// ends with it (exit 2) instead of losing the results silently.
    pub write_error: Option<std::io::Error>,
}

impl TextObserver {
    /// `sweep` sizes the progress: a bar on a terminal, else progress
    /// lines unless `quiet` (`-q`).
    pub fn new(print: bool, options: TextOptions, sweep: Sweep, quiet: bool) -> TextObserver {
        use std::io::IsTerminal;
        let tracker = Tracker::new(sweep.clone(), Instant::now());
        let progress = if std::io::stderr().is_terminal() {
            let pb = indicatif::ProgressBar::new(sweep.len());
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            Progress::Bar(pb, tracker)
        } else if quiet {
            Progress::Off
        } else {
            Progress::Lines(BatchLog::start(tracker))
        };
        TextObserver {
            print,
            options,
            per_rank: false,
            devices: Vec::new(),
            memory: None,
            first: true,
            progress,
            collectives_done: 0,
            write_error: None,
        }
    }

    fn out(&mut self, s: &str) {
        if !self.print || self.write_error.is_some() {
            return;
        }
        let write = || {
            let mut o = std::io::stdout().lock();
            o.write_all(s.as_bytes())?;
            o.flush()
        };
        let written = match &self.progress {
            Progress::Bar(pb, _) => pb.suspend(write),
            _ => write(),
        };
        self.write_error = written.err();
    }

    /// Ends the run: the summary table for multi-collective runs.
    pub fn finish(&mut self, record: &Record) {
        // Stops the batch log's thread too.
        if let Progress::Bar(pb, _) = std::mem::replace(&mut self.progress, Progress::Off) {
            pb.finish_and_clear();
        }
        if self.collectives_done > 1 {
            self.out(&text::summary(record));
        }
        self.out("\n");
    }
}

/// The bar's message: `all_gather 5/11, 64 MiB, ~40s left`.
fn bar_message(tracker: &Tracker) -> String {
    let mut m = tracker.position().unwrap_or_default();
    if let Some(left) = tracker.left(Instant::now()) {
        m += &format!(", ~{} left", clock(left));
    }
    m
}

impl RunObserver for TextObserver {
    fn begin_collective(&mut self, coll: Collective, record: &Record) {
        let s = text::preamble(record, coll.name(), self.first) + &text::table_header(self.options);
        self.first = false;
        self.devices = record.devices.clone();
        self.out(&s);
        match &mut self.progress {
            Progress::Bar(pb, tracker) => {
                tracker.begin_collective(coll);
                pb.set_message(bar_message(tracker));
            }
            Progress::Lines(log) => log.update(true, |t| t.begin_collective(coll)),
            Progress::Off => {}
        }
    }

    fn row(&mut self, _coll: Collective, row: &CaseResult) {
        let ts = self.options.timestamps.then(crate::meta::utc_now_stamp);
        self.out(&text::row_with(row, ts.as_deref(), self.options));
        if self.per_rank {
            self.out(&text::per_rank(row, &self.devices, 3));
        }
        // Rows carry arrival figures only under --arrival.
        let arrival = text::arrival::lines(row);
        if !arrival.is_empty() {
            self.out(&arrival);
        }
        match &mut self.progress {
            Progress::Bar(pb, tracker) => {
                tracker.row();
                pb.set_message(bar_message(tracker));
                pb.inc(1);
            }
            Progress::Lines(log) => log.update(false, Tracker::row),
            Progress::Off => {}
        }
    }

    fn end_collective(&mut self, coll: Collective, rows: &[CaseResult]) {
        self.collectives_done += 1;
        if self.options.explain {
            self.out(&text::explain_footnotes(rows));
        }
        let memory = self.memory.take();
        self.out(&text::footer_with_memory(
            coll.name(),
            rows,
            memory.as_ref(),
        ));
    }

    fn memory(&mut self, u: &collbench_runner::MemoryUsage) {
        self.memory = Some(text::memory::GpuMemory {
            initialization: u.initialization,
            user_allocated: u.user_allocated,
            collective: u.collective,
        });
    }

    fn note(&mut self, text: &str) {
        self.out(&format!("# {text}\n"));
    }
}
