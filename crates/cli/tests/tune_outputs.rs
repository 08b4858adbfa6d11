//! `collbench tune --csv FILE --json FILE` on the scripted fake
//! (`--test-fake`): the table on stdout and the shell lines with it, the
//! same report as JSON in its file, the winners as a tuner CSV that
//! `run --tuner-config` reads; an existing file is refused in one line
//! before anything is measured (exit 2, the file untouched) unless
//! `--force`; the two flags cannot name one file.

mod common;

use common::{collbench, env_of, TUNE_SEARCH};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn tune(extra: &[&str], files: &[(&str, &Path)]) -> std::process::Output {
    let mut cmd = collbench();
    cmd.args(TUNE_SEARCH)
        .args(["--test-fake", "ok"])
        .args(extra)
        .timeout(Duration::from_secs(120));
    for (flag, path) in files {
        cmd.arg(flag).arg(path);
    }
    cmd.output().unwrap()
}

#[test]
fn json_and_csv_files_beside_the_table_and_shell_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("t.csv"), dir.path().join("t.json"));
    let out = tune(&["--shell"], &[("--csv", &csv), ("--json", &json)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("export NCCL_BUFFSIZE=8388608\n"),
        "{stdout}"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let bands = report["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 2, "{report}");
    for b in bands {
        assert_eq!(env_of(&b["outcome"]["setting"]), "NCCL_BUFFSIZE=8388608");
    }
    let rules = std::fs::read_to_string(&csv).unwrap();
    assert!(rules.lines().any(|l| l.starts_with('#')), "{rules}");
    // An environment winner is no tuner rule: the file says so in comments.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wrote = format!("wrote {} (0 rules)", csv.display());
    assert!(stderr.contains(&wrote), "{stderr}");
}

#[test]
fn an_existing_file_is_refused_before_measuring_and_kept_unless_force() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    std::fs::write(&json, "keep\n").unwrap();
    let out = tune(&[], &[("--json", &json)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = common::one_line_refusal(&out, 2);
    assert!(
        err.contains("--json") && err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "keep\n");
    let out = tune(&["--force"], &[("--json", &json)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["bands"].as_array().unwrap().len(), 2);
}

#[test]
fn csv_and_json_on_one_file_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let both = dir.path().join("t.out");
    let out = tune(&[], &[("--csv", &both), ("--json", &both)]);
    let err = common::one_line_refusal(&out, 2);
    assert!(err.contains("--csv and --json both name"), "{err}");
    assert!(!both.exists(), "a refused run created {}", both.display());
}
