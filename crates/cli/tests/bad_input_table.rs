//! docs/bad-input.md's table is what the binary says: every row's command
//! runs here and must end with the row's exit code and its one stderr line
//! (issue 18's bad inputs: write errors, overwrites, check's output paths,
//! the CPU backend under a multi-process launcher, usage errors).
//!
//! `COLLBENCH_BLESS=1` rewrites the exit and message columns instead.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/bad-input.md");
const BIN: &str = env!("CARGO_BIN_EXE_collbench");

/// How `check`'s progress lines on stderr begin (the table leaves them out).
const CHECK_PROGRESS: &str = "collbench check: ";

/// Launcher variables of the machine running the tests must not leak in.
const LAUNCHER_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "JOB_COMPLETION_INDEX",
    "COLLBENCH_RANK",
    "COLLBENCH_WORLD_SIZE",
    "COLLBENCH_RENDEZVOUS",
];

struct Row {
    input: String,
    exit: i32,
    message: String,
}

fn unescape(cell: &str) -> String {
    cell.replace("\\|", "|")
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The table's rows, split on unescaped `|`.
fn rows(text: &str) -> Vec<Row> {
    let start = text
        .find("| input | exit | message |")
        .expect("table header");
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
            let mut cells = Vec::new();
            let mut cell = String::new();
            let mut chars = inner.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'|') => {
                        cell.push_str("\\|");
                        chars.next();
                    }
                    '|' => cells.push(std::mem::take(&mut cell)),
                    c => cell.push(c),
                }
            }
            cells.push(cell);
            assert_eq!(cells.len(), 3, "row with three cells: {line}");
            Row {
                input: unescape(cells[0].trim().trim_matches('`')),
                exit: cells[1].trim().parse().expect("exit code"),
                message: unescape(cells[2].trim()),
            }
        })
        .collect()
}

/// A scratch folder with the inputs the rows name (`in.md`, `exists.json`,
/// the log `in.txt`), and `collbench` plus two `_perf` names on PATH.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in ["collbench", "foo_perf", "all_gather_perf"] {
        std::os::unix::fs::symlink(BIN, bin.join(name)).unwrap();
    }
    std::fs::write(dir.path().join("in.md"), "# a log\n").unwrap();
    std::fs::write(dir.path().join("exists.json"), "{}\n").unwrap();
    std::fs::write(dir.path().join("in.txt"), common::SMALL_LOG).unwrap();
    dir
}

/// Runs one row's shell line; returns the exit code and stderr.
fn run_row(dir: &Path, input: &str) -> (i32, String) {
    run_row_as(dir, input, "collbench")
}

/// [`run_row`] with every user-facing line's leading `collbench` written
/// as `word` (COLLBENCH_TEST_MESSAGE_PREFIX).
fn run_row_as(dir: &Path, input: &str, word: &str) -> (i32, String) {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(input)
        .current_dir(dir)
        .env("PATH", path)
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2");
    if word != "collbench" {
        cmd.env("COLLBENCH_TEST_MESSAGE_PREFIX", word);
    }
    for var in LAUNCHER_VARS {
        cmd.env_remove(var);
    }
    let started = Instant::now();
    let out = cmd.output().unwrap();
    // A refusal comes at once: no rank waits for peers (the launch
    // timeout is 60 s).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{input}: took {:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    // `check` says on stderr what it is measuring; the line that matters
    // comes after that progress.
    let err: Vec<&str> = err
        .trim_end()
        .lines()
        .filter(|l| !l.starts_with(&CHECK_PROGRESS.replacen("collbench", word, 1)))
        .collect();
    (out.status.code().unwrap_or(-1), err.join("\n"))
}

#[test]
fn every_row_of_docs_bad_input_md_is_what_collbench_says() {
    let text = std::fs::read_to_string(TABLE).unwrap();
    let rows = rows(&text);
    assert!(rows.len() >= 30, "the table lost rows");
    let bless = std::env::var("COLLBENCH_BLESS").as_deref() == Ok("1");
    let mut blessed = text.clone();
    let mut wrong = Vec::new();
    for row in &rows {
        let dir = scratch();
        let (exit, err) = run_row(dir.path(), &row.input);
        assert!(
            err.lines().count() <= 1,
            "{}: not one line: {err}",
            row.input
        );
        assert!(!err.contains("panicked"), "{}: {err}", row.input);
        assert!(
            !err.contains("collbench: collbench"),
            "{}: prefix twice: {err}",
            row.input
        );
        assert!(
            !err.contains("(os error"),
            "{}: Rust's error suffix: {err}",
            row.input
        );
        if exit != row.exit || err != row.message {
            wrong.push(format!(
                "{}\n  table: {} {}\n  now:   {exit} {err}",
                row.input, row.exit, row.message
            ));
        }
        if bless {
            let old = text
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", escape(&row.input))))
                .unwrap();
            let new = format!("| `{}` | {exit} | {} |", escape(&row.input), escape(&err));
            blessed = blessed.replace(old, &new);
        }
    }
    if bless {
        std::fs::write(TABLE, blessed).unwrap();
        return;
    }
    assert!(
        wrong.is_empty(),
        "docs/bad-input.md differs:\n{}",
        wrong.join("\n")
    );
}

/// A refusal of an input or an existing file leaves the file as it was.
#[test]
fn refused_overwrites_leave_the_file_alone() {
    let dir = scratch();
    for input in [
        "collbench report in.md -o in.md --force",
        "collbench gen mpirun --hosts h1:8 -o in.md",
    ] {
        let (exit, _) = run_row(dir.path(), input);
        assert_eq!(exit, 2, "{input}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("in.md")).unwrap(),
            "# a log\n"
        );
    }
    // With --force an existing output file is replaced.
    let (exit, err) = run_row(
        dir.path(),
        "collbench gen mpirun --hosts h1:8 -o exists.json --force",
    );
    assert_eq!(exit, 0, "{err}");
    let text = std::fs::read_to_string(dir.path().join("exists.json")).unwrap();
    assert!(text.contains("mpirun"), "{text}");
    // A new file is written, and a failed probe leaves none behind.
    let (exit, err) = run_row(
        dir.path(),
        "collbench run all_reduce --backend cpu --ranks 2 -b 8 -e 8 -q --output new.json",
    );
    assert_eq!(exit, 0, "{err}");
    assert!(dir.path().join("new.json").exists());
    let (exit, _) = run_row(
        dir.path(),
        "collbench run all_reduce --backend cpu --ranks 2 -b 1M -e 8 --output never.json",
    );
    assert_eq!(exit, 2);
    assert!(!dir.path().join("never.json").exists());
}

/// `check --json` to a folder that does not exist fails before the battery
/// runs (it used to run every test first).
#[test]
fn check_refuses_an_unwritable_json_before_any_work() {
    let dir = scratch();
    let started = Instant::now();
    let (exit, err) = run_row(
        dir.path(),
        "collbench check --backend cpu --ranks 2 -n 50 --json /nonexistent/c.json",
    );
    assert_eq!(exit, 2, "{err}");
    assert!(err.starts_with("collbench: cannot write --json"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Help states what the README says: `run`'s default sweep, and doctor's
/// exit codes (README's table: 1 on WARN).
#[test]
fn help_states_defaults_and_exit_codes() {
    let help = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).replace('\n', " ")
    };
    let run = help(&["run", "--help"]);
    assert!(run.contains("Default sweep"), "{run}");
    assert!(run.contains("8 B to 128M with -f 2"), "{run}");
    let top = help(&["--help"]);
    assert!(top.contains("1 warn, 2 fail"), "{top}");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    assert!(readme.contains("| `doctor` | 1 | a check warns |"));
}

/// "with 1 rank threads" was the CPU note for one rank.
#[test]
fn one_rank_is_one_rank_thread() {
    let out = Command::new(BIN)
        .args(["run", "all_reduce", "--ranks", "1", "-b", "8", "-e", "8"])
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("using the built-in CPU backend") {
        assert!(err.contains("with 1 rank thread\n"), "{err}");
    }
}

/// No exit code follows a message's wording: with every line's leading
/// `collbench` rewritten, each row ends with the same code, and its line
/// is the table's with the new word.
#[test]
fn rewording_every_line_keeps_every_exit_code() {
    let rows = rows(&std::fs::read_to_string(TABLE).unwrap());
    let mut wrong = Vec::new();
    for row in &rows {
        let dir = scratch();
        let (exit, err) = run_row_as(dir.path(), &row.input, "XYZ");
        let want = match row.message.strip_prefix("collbench") {
            Some(rest) if rest.starts_with([':', ' ']) => format!("XYZ{rest}"),
            _ => row.message.clone(),
        };
        if exit != row.exit || err != want {
            wrong.push(format!(
                "{}\n  want: {} {want}\n  now:  {exit} {err}",
                row.input, row.exit
            ));
        }
    }
    assert!(wrong.is_empty(), "reworded:\n{}", wrong.join("\n"));
}
