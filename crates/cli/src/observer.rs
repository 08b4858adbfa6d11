//! Prints results as they arrive: nccl-tests text on stdout, a progress
//! bar on stderr when stderr is a terminal.

use collbench_core::{CaseResult, Collective, Record};
use collbench_output::text::{self, TextOptions};
use collbench_runner::RunObserver;
use std::io::Write;

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
    progress: Option<indicatif::ProgressBar>,
    collectives_done: usize,
    /// The first failed write to stdout; printing stops there and `run`
    /// ends with it (exit 2) instead of losing the results silently.
    pub write_error: Option<std::io::Error>,
}

impl TextObserver {
    /// `total_cases` sizes the progress bar; it is shown only on a terminal.
    pub fn new(print: bool, options: TextOptions, total_cases: u64) -> TextObserver {
        use std::io::IsTerminal;
        let progress = std::io::stderr().is_terminal().then(|| {
            let pb = indicatif::ProgressBar::new(total_cases);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb
        });
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
            Some(pb) => pb.suspend(write),
            None => write(),
        };
        self.write_error = written.err();
    }

    /// Ends the run: the summary table for multi-collective runs.
    pub fn finish(&mut self, record: &Record) {
        if let Some(pb) = self.progress.take() {
            pb.finish_and_clear();
        }
        if self.collectives_done > 1 {
            self.out(&text::summary(record));
        }
        self.out("\n");
    }
}

impl RunObserver for TextObserver {
    fn begin_collective(&mut self, coll: Collective, record: &Record) {
        let s = text::preamble(record, coll.name(), self.first) + &text::table_header(self.options);
        self.first = false;
        self.devices = record.devices.clone();
        self.out(&s);
        if let Some(pb) = &self.progress {
            pb.set_message(coll.name());
        }
    }

    fn row(&mut self, _coll: Collective, row: &CaseResult) {
        let ts = self.options.timestamps.then(crate::meta::utc_now_stamp);
        self.out(&text::row_with(row, ts.as_deref(), self.options));
        if self.per_rank {
            self.out(&text::per_rank(row, &self.devices, 3));
        }
        if let Some(pb) = &self.progress {
            pb.inc(1);
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
