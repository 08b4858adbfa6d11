//! `collbench report FILE...` without the CLI around it: the library call
//! the command makes (`report_main`), Markdown on stdout and the lines for
//! people on stderr. For timing the reader in a release build without
//! building every crate of the CLI (bench/parse-linear.sh).

use collbench_report::{report_main, ReportOptions};
use std::io::Write;

/// The console the CLI installs, reduced to stderr.
struct Stderr;

impl collbench_core::diag::Console for Stderr {
    fn line(&self, text: &str) {
        eprintln!("{text}");
    }
}

fn main() {
    collbench_core::diag::install(Box::new(Stderr));
    if std::env::var_os("REPORT_LOG_PHASES").is_some() {
        return phases();
    }
    let inputs: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let options = ReportOptions {
        inputs,
        output: None,
        format: None,
        matrix: Vec::new(),
        strict: false,
        topology: None,
    };
    match report_main(&options) {
        Ok((_, Some(markdown))) => {
            let _ = std::io::stdout().write_all(markdown.as_bytes());
        }
        Ok((_, None)) => {}
        Err(e) => {
            eprintln!("report_log: {e}");
            std::process::exit(2);
        }
    }
}

/// With `REPORT_LOG_PHASES` set: how long reading, the quality section and
/// the Markdown each take, on stderr (where the time of a slow report
/// goes); `REPORT_LOG_PHASES=read` stops after reading (its memory alone).
fn phases() {
    let inputs: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let start = std::time::Instant::now();
    let read = collbench_report::read_paths(&inputs, None, false);
    let read_s = start.elapsed().as_secs_f64();
    let Ok(read) = read else {
        eprintln!("report_log: cannot read");
        std::process::exit(2);
    };
    if std::env::var("REPORT_LOG_PHASES").as_deref() == Ok("read") {
        eprintln!(
            "read {read_s:.2} s, {} record(s)",
            read.parsed.records.len()
        );
        return;
    }
    let start = std::time::Instant::now();
    let quality = read.quality_markdown();
    let quality_s = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    let markdown = collbench_report::render::markdown::render(&read.parsed.records);
    let render_s = start.elapsed().as_secs_f64();
    eprintln!(
        "read {read_s:.2} s, quality {quality_s:.2} s, markdown {render_s:.2} s ({} bytes)",
        markdown.len() + quality.len()
    );
}
