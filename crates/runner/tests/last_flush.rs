//! The last resort ends a process even when another thread holds stdout:
//! issue 27's faults stage saw a stopped peer's `check` survivors print
//! their line and then stay until killed, because the main thread held
//! stdout's lock (the check's table writer) while NCCL's teardown waited
//! on the stopped peer, and the last resort's flush waited on that lock.
//!
//! The test runs itself again as a child (`LAST_FLUSH_CHILD`), where the
//! main thread takes stdout's lock and never gives it back, and another
//! thread calls [`end_process_now`]: the child must exit with its code.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use collbench_runner::watchdog::end_process_now;

/// A console that flushes stdout, as the binary's does.
struct Flushing;

impl collbench_core::diag::Console for Flushing {
    fn line(&self, text: &str) {
        eprintln!("{text}");
    }

    fn flush(&self) {
        let _ = std::io::stdout().flush();
    }
}

#[test]
fn a_held_stdout_does_not_keep_the_last_resort_from_ending_the_process() {
    if std::env::var_os("LAST_FLUSH_CHILD").is_some() {
        collbench_core::diag::install(Box::new(Flushing));
        let _held = std::io::stdout().lock();
        std::thread::spawn(|| end_process_now(7));
        std::thread::sleep(Duration::from_secs(30));
        panic!("still here 30 s after end_process_now");
    }
    let started = Instant::now();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_held_stdout_does_not_keep_the_last_resort_from_ending_the_process",
            "--nocapture",
        ])
        .env("LAST_FLUSH_CHILD", "1")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(7), "child ended with {status}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the child took {:?}",
        started.elapsed()
    );
}
