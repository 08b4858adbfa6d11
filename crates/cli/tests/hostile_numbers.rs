//! Every numeric flag of `run`, `check`, `tune`, `preflight` and `compare`
//! at its extremes (0, the largest value and one past it, inf, NaN, a
//! negative number): one line and a non-zero exit, or a right result;
//! never a panic (exit 101), an abort (134) or a hang. And what a closed
//! stdout and `-N 0` leave in the output files.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A value past every integer type collbench reads.
const PAST_U64: &str = "18446744073709551616";

/// Values every flag meets here.
const EXTREMES: [&str; 6] = ["0", "18446744073709551615", PAST_U64, "inf", "NaN", "-1"];

/// `(command before the flag, flags)`. Counts whose largest value is a
/// legal, endless run (`-n`, `-w`, `-m`, `-c`, `-N`) meet it elsewhere
/// (`-n 4294967295` is a long right result, not a bad input); here they
/// meet the others, and `-N 0` runs until stopped (tested below).
const CASES: [(&str, &[&str]); 5] = [
    (
        "run all_reduce --backend cpu --ranks 2 -b 8 -e 8 -n 1 -w 0",
        &[
            "-b",
            "-e",
            "-i",
            "-f",
            "-p",
            "-z",
            "-y",
            "-T",
            "-G",
            "-C",
            "-a",
            "-R",
            "-S",
            "-u",
            "-I",
            "-K",
            "-B",
            "-x",
            "-M",
            "-D",
            "-V",
            "-t",
            "-g",
            "-r",
            "--ranks",
            "--watchdog",
            "--timeout-s",
        ],
    ),
    (
        "check --backend cpu --ranks 2 -n 2 --size 8",
        &[
            "-n",
            "--size",
            "--pair-fraction",
            "-t",
            "-g",
            "--ranks",
            "--watchdog",
            "--timeout-s",
        ],
    ),
    (
        "tune --backend cpu -b 8 -e 8",
        &[
            "-b",
            "-e",
            "-f",
            "--budget",
            "--max-channels",
            "-t",
            "-g",
            "--ranks",
        ],
    ),
    (
        "preflight --timeout-s 1",
        &["--rank", "--world-size", "--local-rank"],
    ),
    ("compare in.txt in.txt", &["--threshold"]),
];

/// Flags whose value-less extremes mean a long, legal run.
const LONG_IF: [(&str, &str); 3] = [("-N", "0"), ("-n", "18446744073709551615"), ("-T", "0")];

/// Runs `collbench ARGS` in `dir` with a hard deadline; (exit, stderr).
fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(common::BIN)
        .args(args)
        .current_dir(dir)
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .env_remove("SLURM_JOB_ID")
        .env_remove("COLLBENCH_RANK")
        .env_remove("COLLBENCH_WORLD_SIZE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Only a hang takes this long, however loaded the machine is.
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("collbench {args:?} did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_numeric_flag_at_its_extremes_is_one_line_or_a_right_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), common::SMALL_LOG).unwrap();
    let mut wrong = Vec::new();
    for (before, flags) in CASES {
        for flag in flags {
            for value in EXTREMES {
                if LONG_IF.contains(&(flag, value)) {
                    continue;
                }
                let mut args: Vec<&str> = before.split(' ').collect();
                args.extend([*flag, value]);
                let (code, err) = run_in(dir.path(), &args);
                // check's progress lines come before its verdict.
                let lines: Vec<&str> = err
                    .lines()
                    .filter(|l| !l.starts_with("collbench check: "))
                    .collect();
                let bad = match code {
                    None => Some("killed by a signal".to_string()),
                    Some(101) | Some(134) => Some("panicked or aborted".to_string()),
                    Some(0) => None,
                    Some(_) if lines.len() != 1 => Some(format!("{} lines", lines.len())),
                    Some(_) => None,
                };
                if let Some(why) = bad.or_else(|| err.contains("panicked").then(|| "panic".into()))
                {
                    wrong.push(format!("{args:?}: {why}, exit {code:?}: {err}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Values that were taken without a word (a thread count of 0 or 2^32-1,
/// check's `-n 0` run as 1, a root no rank has refused only after the
/// table's header): each is now one line and exit 2, with nothing on
/// stdout.
#[test]
fn values_once_taken_silently_are_refused_before_anything_runs() {
    let cases: [(&str, &str); 6] = [
        (
            "run all_reduce --backend cpu --ranks 2 -b 8 -e 64 -t 0",
            "-t takes a thread count from 1 to 4096",
        ),
        (
            "run all_reduce --backend cpu --ranks 2 -b 8 -e 64 -t 4294967295",
            "-t takes a thread count from 1 to 4096",
        ),
        (
            "check --backend cpu --ranks 2 --size 8 -n 0",
            "-n takes a count of timed iterations from 1 to 10000",
        ),
        (
            "check --backend cpu --ranks 2 --size 8 -n 4294967295",
            "-n takes a count of timed iterations from 1 to 10000",
        ),
        (
            "run broadcast --backend cpu --ranks 2 -b 8 -e 64 -r 2",
            "root 2 is out of range for 2 ranks: use -r 0..1 or -r -1",
        ),
        (
            "run reduce --backend cpu --ranks 2 -b 8 -e 64 -r 4294967295",
            "root 4294967295 is out of range for 2 ranks",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(common::BIN)
            .args(args.split(' '))
            .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert_eq!(err.lines().count(), 1, "{args}: {err}");
        assert!(err.contains(says), "{args}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args}: stdout {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// `-N 0` runs until stopped; its partial file keeps the last complete
/// cycle and the one in progress, never every cycle (memory stays flat).
#[test]
fn an_endless_run_keeps_two_cycles_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let child = Command::new(common::BIN)
        .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
        .args(["-b", "8", "-e", "64", "-n", "1", "-w", "0", "-N", "0"])
        .args(["--output", "n.json"])
        .current_dir(dir.path())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for at least 5 cycles of 4 sizes (each row is a line).
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count()
        < 20
    {
        assert!(Instant::now() < until, "no 20 rows within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("n.json")).unwrap()).unwrap();
    let kept = json["results"].as_array().unwrap().len();
    assert!((4..8).contains(&kept), "kept {kept} rows: {json}");
    let partial = json["partial"].as_str().unwrap();
    assert!(
        partial.contains("keeps the last complete cycle and the one in progress"),
        "{partial}"
    );
}

/// A reader that goes away ends `run` at the next row: the files hold
/// what was measured, marked partial, and the exit is the interrupt's.
#[test]
fn a_closed_pipe_ends_the_run_like_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{{ '{}' run all --backend cpu --ranks 2 -e 128M --output r.csv -J j.json; echo $? > rc; }} | head -1 > /dev/null",
            common::BIN
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let rc = std::fs::read_to_string(dir.path().join("rc")).unwrap();
    assert_eq!(rc.trim(), "130", "{err}");
    assert!(
        err.starts_with("collbench: standard output closed after"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let csv = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
    assert!(
        csv.lines()
            .last()
            .unwrap()
            .starts_with("# partial: stopped: standard output was closed"),
        "{csv}"
    );
    let j = std::fs::read_to_string(dir.path().join("j.json")).unwrap();
    assert!(j.contains("standard output was closed"), "{j}");
    // The whole sweep (all ops to 128M) takes far longer than this.
    assert!(started.elapsed() < Duration::from_secs(60));
}
