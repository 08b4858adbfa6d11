//! `collbench report` and `collbench compare` as a user runs them.

mod common;

use common::{assert_says, collbench, write_file};
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn anchor(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../report/tests/fixtures/anchors")
        .join(name)
}

/// `collbench compare all_reduce.txt NEW`: the anchor as BASE.
fn compare_with_anchor(new: impl AsRef<std::ffi::OsStr>) -> assert_cmd::Command {
    let mut c = collbench();
    c.arg("compare").arg(anchor("all_reduce.txt")).arg(new);
    c
}

/// A copy of all_reduce.txt with the busbw of the row for `size` lowered
/// by 10% in the columns `columns` (7: out-of-place, 11: in-place),
/// keeping the column layout.
fn lowered_copy(dir: &Path, size: &str, columns: &[usize]) -> PathBuf {
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
            let mut done = 0;
            for &c in columns {
                let (at, busbw) = tokens[c];
                let lowered = format!("{:.2}", busbw.parse::<f64>().unwrap() * 0.9);
                // Right-aligned column: the new value ends where the old one did.
                let end = at + busbw.len();
                out.push_str(&line[done..end - lowered.len()]);
                out.push_str(&lowered);
                done = end;
            }
            out.push_str(&line[done..]);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    assert_eq!(changed, 1);
    write_file(dir, "all_reduce_slower.txt", &out)
}

#[test]
fn compare_flags_a_ten_percent_busbw_drop_and_names_the_size() {
    let dir = tempfile::tempdir().unwrap();
    // Both placements of the size: a real slowdown slows both.
    let slower = lowered_copy(dir.path(), "8589934592", &[7, 11]);
    let text = std::fs::read_to_string(&slower).unwrap();
    assert!(
        text.contains("349.58  314.62"),
        "busbw lowered, algbw kept:\n{text}"
    );
    compare_with_anchor(&slower)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("REGRESSION: 2 of 62 cases"))
        .stdout(predicate::str::contains(
            "first: all_reduce float sum 8 GiB (8589934592 B) out-of-place",
        ))
        .stdout(predicate::str::contains(
            "| all_reduce | float | sum | 8 GiB | 8589934592 | out-of-place | busbw (GB/s) | 349.58 | 314.62 | 0.900 | [",
        ))
        .stdout(predicate::str::contains("**REGRESSION**"))
        .stdout(predicate::str::contains("| log scatter |"));
}

#[test]
fn compare_of_one_slower_case_alone_cannot_tell_and_passes() {
    let dir = tempfile::tempdir().unwrap();
    let slower = lowered_copy(dir.path(), "8589934592", &[7]);
    compare_with_anchor(&slower)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("cannot tell (one case only)"))
        .stdout(predicate::str::contains(
            "OK: no regression in 62 common cases",
        ))
        .stdout(predicate::str::contains("1 case(s) cannot tell"));
}

#[test]
fn compare_against_itself_passes() {
    compare_with_anchor(anchor("all_reduce.txt"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "OK: no regression in 62 common cases",
        ));
}

#[test]
fn compare_text_against_json_of_the_same_run_passes() {
    compare_with_anchor(anchor("all_reduce.json"))
        .assert()
        .code(0)
        // The JSON lists one device of the process's two: still 2 ranks.
        .stdout(predicate::str::contains("rank counts differ").not());
}

#[test]
fn compare_threshold_can_absorb_the_drop() {
    let dir = tempfile::tempdir().unwrap();
    let slower = lowered_copy(dir.path(), "8589934592", &[7, 11]);
    compare_with_anchor(&slower)
        .args(["--threshold", "15"])
        .assert()
        .code(0);
}

#[test]
fn compare_unreadable_input_exits_2() {
    compare_with_anchor("/nonexistent/new.txt")
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

/// A copy of all_reduce.txt 20% slower from 64 MiB up: both placements'
/// times x1.25, their bandwidths x0.8.
fn slower_copy(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(anchor("all_reduce.txt")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut t: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if t.len() == 13 && t[0].parse::<u64>().is_ok_and(|s| s >= 64 << 20) {
            for (i, f) in [
                (5, 1.25),
                (6, 0.8),
                (7, 0.8),
                (9, 1.25),
                (10, 0.8),
                (11, 0.8),
            ] {
                t[i] = format!("{:.2}", t[i].parse::<f64>().unwrap() * f);
            }
            out.push_str(&t.join("  "));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    write_file(dir, "all_reduce_slower.txt", &out)
}

#[test]
fn compare_writes_an_html_page_under_the_output_rule() {
    let dir = tempfile::tempdir().unwrap();
    let slower = slower_copy(dir.path());
    let out = dir.path().join("cmp.html");
    let html = |path: &Path, force: bool| {
        let mut c = compare_with_anchor(&slower);
        c.arg("--html").arg(path);
        if force {
            c.arg("--force");
        }
        c
    };
    html(&out, false).assert().code(1);
    let page = std::fs::read_to_string(&out).unwrap();
    assert_says(
        &page,
        &[
            "<h1>collbench compare</h1>",
            "BASE (out-of-place)",
            "NEW (out-of-place)",
            "NEW 95% interval",
            "\nregression\n</text>",
            "<strong>REGRESSION</strong>",
            "<th>95% interval</th>",
        ],
    );
    assert!(!page.contains("<script"));
    // The rule of every output file: an existing one needs --force ...
    let refused = html(&out, false).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_says(&stderr, &["--html", "already exists", "--force"]);
    html(&out, true).assert().code(1);
    // ... and an input is never overwritten, --force or not, checked
    // before anything is read.
    let before = std::fs::read_to_string(&slower).unwrap();
    let refused = html(&slower, true).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_says(&stderr, &["is also an input", "never overwrites an input"]);
    assert!(refused.stdout.is_empty(), "nothing compared");
    assert_eq!(std::fs::read_to_string(&slower).unwrap(), before);
}

/// all_reduce.txt (2 ranks) as if run on 8: six more `# Rank` lines, and
/// every busbw from 64 MiB up lowered by 20%.
fn eight_rank_copy(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(anchor("all_reduce.txt")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.len() == 13 && tokens[0].parse::<u64>().is_ok_and(|s| s >= 64 << 20) {
            let mut t: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
            for i in [7, 11] {
                t[i] = format!("{:.2}", t[i].parse::<f64>().unwrap() * 0.8);
            }
            out.push_str(&t.join("  "));
        } else {
            out.push_str(line);
        }
        out.push('\n');
        if line.contains("Rank  1 Group") {
            for r in 2..8 {
                out.push_str(&line.replace("Rank  1", &format!("Rank  {r}")));
                out.push('\n');
            }
        }
    }
    write_file(dir, "all_reduce_8ranks.txt", &out)
}

#[test]
fn compare_of_2_and_8_ranks_warns_and_prints_overall_and_regressions() {
    let dir = tempfile::tempdir().unwrap();
    let eight = eight_rank_copy(dir.path());
    let out = compare_with_anchor(&eight)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert_says(
        &out,
        &[
            "BASE ",
            "2 rank(s)",
            "8 rank(s)",
            "warning: rank counts differ (BASE 2, NEW 8)",
            "overall (NEW/BASE, geometric mean): all_reduce busbw x0.800 (16 cases >= 64 MiB), time x1.000",
            "Regressions:",
            "| all_reduce | float | sum | 8 GiB | 8589934592 | out-of-place | busbw (GB/s) |",
            "REGRESSION: 16 of 62 cases",
        ],
    );
}

#[test]
fn compare_lists_sizes_found_on_one_side_only() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(anchor("all_reduce.txt")).unwrap();
    let short: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("8589934592"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = write_file(dir.path(), "short.txt", &short);
    // NEW lacks cases BASE has: it was cut short, whatever its speed.
    compare_with_anchor(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "only in BASE (2): all_reduce float sum 8 GiB out-of-place, all_reduce float sum 8 GiB in-place",
        ))
        .stdout(predicate::str::contains(
            "FAILED: NEW",
        ))
        .stdout(predicate::str::contains(
            "cut short: 2 case(s) of BASE missing (first: all_reduce float sum 8 GiB out-of-place)",
        ));
    // --subset waives the missing cases, not the log's own word that it
    // stopped before its header's maxBytes.
    compare_with_anchor(&path).arg("--subset").assert().code(1);
    // A sweep that ends where its header says, on purpose: passes.
    let fewer = write_file(
        dir.path(),
        "fewer.txt",
        &short.replace("maxBytes 8589934592", "maxBytes 4294967296"),
    );
    compare_with_anchor(&fewer).arg("--subset").assert().code(0);
}

fn foreign_logs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/foreign-logs")
}

#[test]
fn report_on_the_foreign_logs_folder_skips_only_its_index() {
    let dir = foreign_logs();
    if !dir.is_dir() {
        eprintln!("skipped: {} not present", dir.display());
        return;
    }
    let out = collbench()
        .arg("report")
        .arg(&dir)
        .assert()
        .code(6)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains(" skipped ")).collect();
    assert_eq!(skipped.len(), 1, "{stderr}");
    assert!(skipped[0].contains("INDEX.md"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("## Data quality"), "{stdout}");
    // Figures from INDEX.md: nccl-tests busbw 338.82, OSU bandwidth 101.40 MB/s.
    assert!(stdout.contains("| 338.82 |"), "{stdout}");
    assert!(stdout.contains("| 101.40 |"), "{stdout}");
    // --strict makes the skipped file an error.
    collbench()
        .args(["report", "--strict"])
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("INDEX.md"));
}
