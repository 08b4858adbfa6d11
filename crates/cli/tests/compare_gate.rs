//! `collbench compare` as a gate: correctness comes first. A NEW with
//! wrong results, an out-of-bounds FAILED line, a crash line or a cut-off
//! log fails (exit 1) whatever its speed, over collbench's own failing
//! logs (made with its `--test-corrupt` hook, a real Ctrl-C, a truncated
//! log) and public failing nccl-tests logs; a BASE with wrong results is
//! no reference (exit 2).

mod common;

use common::{collbench, write_file};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../report/tests/fixtures")
        .join(rel)
}

/// `run all_reduce all_gather` on the CPU backend, 8 B to `max` by 4x.
fn sweep_args(max: &str) -> Vec<&str> {
    let args = "run all_reduce all_gather --backend cpu -b 8 -f 4 -e";
    let mut v: Vec<&str> = args.split(' ').collect();
    v.push(max);
    v
}

/// A small CPU sweep of two ops into `dir/name` (text on stdout, or
/// `--output` when `name` ends in .json), with `extra` flags.
fn sweep(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut c = collbench();
    c.current_dir(dir)
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .args(sweep_args("1M"))
        .args(extra);
    let out = if name.ends_with(".json") {
        c.args(["--output", name, "-q"]).output().unwrap()
    } else {
        c.output().unwrap()
    };
    if !name.ends_with(".json") {
        std::fs::write(&path, &out.stdout).unwrap();
    }
    path
}

/// `compare BASE NEW` (plus `extra`): exit code and stdout.
fn compare(base: &Path, new: &Path, extra: &[&str]) -> (i32, String) {
    let out = collbench()
        .arg("compare")
        .arg(base)
        .arg(new)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn wrong_results_fail_the_gate_in_json_and_text() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["json", "txt"] {
        let good = sweep(dir.path(), &format!("good.{ext}"), &[]);
        let bad = sweep(dir.path(), &format!("bad.{ext}"), &["--test-corrupt"]);
        let (code, out) = compare(&good, &bad, &[]);
        assert_eq!(code, 1, "{ext}: {out}");
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("FAILED: NEW") && last.contains("wrong results"),
            "{ext}: {last}"
        );
        // The JSON says the same.
        let (code, json) = compare(&good, &bad, &["--format", "json"]);
        assert_eq!(code, 1);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["verdict"], "failed");
        assert_eq!(doc["exit_code"], 1);
        assert!(doc["failures"][0]
            .as_str()
            .unwrap()
            .contains("wrong results"));
        // A BASE with wrong results is no reference: exit 2, unless trusted.
        let (code, _) = compare(&bad, &good, &[]);
        assert_eq!(code, 2, "{ext}");
        let (code, out) = compare(&bad, &good, &["--trust-base"]);
        assert_ne!(code, 2, "{ext}: {out}");
    }
}

#[test]
fn an_out_of_bounds_failed_footer_fails_and_says_wrong_results() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = fixture("anchors/all_reduce.txt");
    let text = std::fs::read_to_string(&anchor).unwrap();
    let failed = text.replace(
        "# Out of bounds values : 0 OK",
        "# Out of bounds values : 3 FAILED",
    );
    assert_ne!(failed, text);
    let new = write_file(dir.path(), "oob.txt", &failed);
    let (code, out) = compare(&anchor, &new, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("wrong results: nccl-tests found 3 value(s) outside tolerance"),
        "{out}"
    );
}

#[test]
fn public_crash_logs_fail_the_gate() {
    // NVIDIA/nccl-tests#322 (rows, then `Test NCCL failure`) and #280.
    for log in [
        "failing/nccl_tests_322_test_nccl_failure.txt",
        "failing/nccl_tests_280_test_failure.txt",
    ] {
        let (code, out) = compare(
            &fixture("anchors/all_reduce.txt"),
            &fixture(log),
            &["--subset"],
        );
        assert_eq!(code, 1, "{log}: {out}");
        assert!(out.contains("FAILED: NEW"), "{log}: {out}");
        assert!(
            out.contains("crashed") || out.contains("Test"),
            "{log}: {out}"
        );
    }
}

#[test]
fn a_log_cut_mid_sweep_fails_unless_a_subset_is_meant() {
    let dir = tempfile::tempdir().unwrap();
    let good = sweep(dir.path(), "good.txt", &[]);
    let text = std::fs::read_to_string(&good).unwrap();
    // Cut in the middle of the first op's table, mid-row.
    let at = text.find("  131072").unwrap() + 20;
    let cut = write_file(dir.path(), "cut.txt", &text[..at]);
    let (code, out) = compare(&good, &cut, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cut short"), "{out}");
    // Complete rows of fewer sizes, on purpose.
    let fewer = sweep(dir.path(), "fewer.json", &["-e", "64K"]);
    let base = sweep(dir.path(), "base.json", &[]);
    assert_eq!(compare(&base, &fewer, &[]).0, 1);
    assert_ne!(compare(&base, &fewer, &["--subset"]).0, 1);
}

#[test]
fn a_run_stopped_by_ctrl_c_fails_as_cut_short() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let base = sweep(dir.path(), "base.json", &["-e", "128M", "-n", "2"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_collbench"))
        .current_dir(dir.path())
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .args(sweep_args("128M"))
        .args(["-n", "200", "--output", "new.json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (mut rows, mut line) = (0, String::new());
    let started = std::time::Instant::now();
    while rows < 3 && started.elapsed() < std::time::Duration::from_secs(60) {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        rows += usize::from(line.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let (code, out) = compare(&base, &dir.path().join("new.json"), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cut short") && out.contains("interrupted"),
        "{out}"
    );
}

#[test]
fn a_new_that_crashed_before_its_first_row_still_fails() {
    let dir = tempfile::tempdir().unwrap();
    let new = write_file(
        dir.path(),
        "died.txt",
        "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n\
         # Collective test starting: all_reduce_perf\n\
         node1: Test NCCL failure common.cu:1204 'unhandled system error'\n",
    );
    let (code, out) = compare(&fixture("anchors/all_reduce.txt"), &new, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("crashed: node1: Test NCCL failure"), "{out}");
}

#[test]
fn a_renamed_mpi_binary_is_the_same_op() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = fixture("anchors/all_reduce.txt");
    let text = std::fs::read_to_string(&anchor).unwrap();
    let renamed = text.replace("all_reduce_perf", "all_reduce_perf_mpi");
    assert_ne!(renamed, text);
    let new = write_file(dir.path(), "mpi.txt", &renamed);
    let (code, out) = compare(&anchor, &new, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("OK: no regression in 62 common cases"),
        "{out}"
    );
}

#[test]
fn collbench_text_is_one_run_and_matches_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let text = sweep(dir.path(), "run.txt", &[]);
    let report = collbench().args(["report"]).arg(&text).output().unwrap();
    let md = String::from_utf8_lossy(&report.stdout);
    assert!(md.contains("collbench"), "{md}");
    assert!(!md.contains("nccl-tests"), "{md}");
    // The same run as text against its own figures: same cases, no failure.
    let (code, out) = compare(&text, &text, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("BASE "), "{out}");
    assert!(out.contains("collbench"), "{out}");
}
