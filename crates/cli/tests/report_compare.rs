//! `collbench report` and `collbench compare` as a user runs them.

mod common;

use common::collbench;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn anchor(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../report/tests/fixtures/anchors")
        .join(name)
}

/// A copy of all_reduce.txt with the out-of-place busbw (8th column) of the
/// row for `size` lowered by 10%, keeping the column layout.
fn lowered_copy(dir: &Path, size: &str) -> PathBuf {
    let text = std::fs::read_to_string(anchor("all_reduce.txt")).unwrap();
    let mut changed = 0;
    let mut out = String::new();
    for line in text.lines() {
        let tokens: Vec<(usize, &str)> = line
            .split_whitespace()
            .map(|t| (t.as_ptr() as usize - line.as_ptr() as usize, t))
            .collect();
        if tokens.len() == 13 && tokens[0].1 == size {
            changed += 1;
            let (at, busbw) = tokens[7];
            let lowered = format!("{:.2}", busbw.parse::<f64>().unwrap() * 0.9);
            // Right-aligned column: the new value ends where the old one did.
            let end = at + busbw.len();
            out.push_str(&line[..end - lowered.len()]);
            out.push_str(&lowered);
            out.push_str(&line[end..]);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    assert_eq!(changed, 1);
    let path = dir.join("all_reduce_slower.txt");
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn compare_flags_a_ten_percent_busbw_drop_and_names_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let slower = lowered_copy(dir.path(), "8589934592");
    let text = std::fs::read_to_string(&slower).unwrap();
    assert!(
        text.contains("349.58  314.62"),
        "busbw lowered, algbw kept:\n{text}"
    );
    collbench()
        .arg("compare")
        .arg(anchor("all_reduce.txt"))
        .arg(&slower)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("REGRESSION: 1 of 62 cases"))
        .stdout(predicate::str::contains(
            "all_reduce float sum 8 GiB (8589934592 B) out-of-place busbw x0.900",
        ))
        .stdout(predicate::str::contains("**REGRESSION**"));
}

#[test]
fn compare_against_itself_passes() {
    collbench()
        .arg("compare")
        .arg(anchor("all_reduce.txt"))
        .arg(anchor("all_reduce.txt"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "OK: no regression in 62 common cases",
        ));
}

#[test]
fn compare_text_against_json_of_the_same_run_passes() {
    collbench()
        .arg("compare")
        .arg(anchor("all_reduce.txt"))
        .arg(anchor("all_reduce.json"))
        .assert()
        .code(0);
}

#[test]
fn compare_threshold_can_absorb_the_drop() {
    let dir = tempfile::tempdir().unwrap();
    let slower = lowered_copy(dir.path(), "8589934592");
    collbench()
        .args(["compare", "--threshold", "15"])
        .arg(anchor("all_reduce.txt"))
        .arg(&slower)
        .assert()
        .code(0);
}

#[test]
fn compare_unreadable_input_exits_2() {
    collbench()
        .arg("compare")
        .arg(anchor("all_reduce.txt"))
        .arg("/nonexistent/new.txt")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/new.txt"));
}

#[test]
fn report_writes_markdown_and_html() {
    collbench()
        .arg("report")
        .arg(anchor("all_reduce.txt"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "| all_reduce | float | all_reduce.txt | 349.58 | 8 GiB |",
        ));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    collbench()
        .arg("report")
        .arg(anchor("all_reduce.txt"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(
        page.contains("<svg")
            && page.contains("all_reduce: bus bandwidth")
            && !page.contains("<script")
    );
}
