//! `run` in a batch job (stderr is a file or pipe, never a terminal):
//! after a quiet first interval, a progress line as each collective starts
//! and at least every interval, so a Slurm output file or a pod's log
//! never looks hung; `-q` silences them, and a run shorter than the
//! interval has none. The interval is 10 s; the hidden test hook shortens
//! it so a short run shows several (bench/results/dist.md measures the
//! real one).

mod common;

use common::{cpu_run, BIN};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EVERY_MS: u64 = 200;

/// The progress lines of a run, each with the time it arrived.
fn progress_lines(args: &[&str]) -> (Vec<(Instant, String)>, Duration) {
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .env("COLLBENCH_TEST_PROGRESS_EVERY_MS", EVERY_MS.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("# collbench:") {
            lines.push((Instant::now(), line));
        }
    }
    assert!(child.wait().unwrap().success());
    (lines, start.elapsed())
}

#[test]
fn a_line_at_each_collective_and_then_every_interval() {
    // One large case runs for seconds: only the timer can speak then.
    let args = [
        "run",
        "all_reduce",
        "broadcast",
        "--backend",
        "cpu",
        "--ranks",
        "2",
        "-b",
        "8",
        "-e",
        "64M",
        "-f",
        "8388608",
        "-n",
        "20",
    ];
    let (lines, took) = progress_lines(&args);
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert!(
        text[0].starts_with("# collbench: all_reduce 1/2, "),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|l| l.starts_with("# collbench: broadcast 2/2, 8 B, ")),
        "{text:#?}"
    );
    // Once the 8 B case is measured, each line estimates the rest.
    let big: Vec<&&str> = text.iter().filter(|l| l.contains(", 64 MiB, ")).collect();
    assert!(!big.is_empty(), "{text:#?}");
    for l in big {
        assert!(l.contains(" elapsed, ~") && l.ends_with(" left"), "{l}");
    }
    // The timer's lines: far more than the two collective starts. A
    // loaded test machine may wake the thread late, never 5 intervals.
    let expected = took.as_millis() as u64 / EVERY_MS;
    assert!(
        lines.len() as u64 >= expected / 2,
        "{} lines in {took:?}: {text:#?}",
        lines.len()
    );
    let longest = lines.windows(2).map(|w| w[1].0 - w[0].0).max().unwrap();
    assert!(
        longest < Duration::from_millis(5 * EVERY_MS),
        "silent for {longest:?}: {text:#?}"
    );
}

/// A short run (and one that fails at once) keeps stderr to its own lines.
#[test]
fn a_run_shorter_than_the_interval_writes_none() {
    let out = cpu_run("all_reduce", "2")
        .args(["-b", "8", "-e", "1M"])
        .env("COLLBENCH_TEST_PROGRESS_EVERY_MS", "60000")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("# collbench:"), "{stderr}");
}

#[test]
fn quiet_writes_no_progress_lines() {
    let out = cpu_run("all_reduce", "2")
        .args(["-b", "8", "-e", "16M", "-q"])
        .env("COLLBENCH_TEST_PROGRESS_EVERY_MS", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("# collbench:"), "{stderr}");
}
