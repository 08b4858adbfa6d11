//! The `<op>_perf` alias prints nccl-tests' table shape, so scripts and
//! parsers written for nccl-tests keep working.

mod common;

use assert_cmd::Command;
use common::{alias, ok_stdout, stdout_ok};

/// The three column-header lines of nccl-tests 2.19 (from the H200 anchor).
fn anchor_header() -> Vec<String> {
    let text = include_str!("fixtures/nccl_tests_all_reduce_header.txt");
    text.lines().map(str::to_string).collect()
}

#[test]
fn all_reduce_perf_prints_the_nccl_tests_table() {
    let dir = tempfile::tempdir().unwrap();
    let exe = alias(dir.path(), "all_reduce_perf");
    let text = stdout_ok(Command::new(&exe).args(["-b", "8", "-e", "1M", "-f", "2"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"# Collective test starting: all_reduce_perf"));
    assert!(lines.iter().any(|l| l.starts_with("# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0")));
    // The column headers match nccl-tests byte for byte.
    let start = lines
        .iter()
        .position(|l| l.contains("out-of-place"))
        .unwrap();
    let header: Vec<String> = lines[start..start + 3]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(header, anchor_header());
    // One row per size, 8 B .. 1 MiB, in nccl-tests' fixed columns.
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 18);
    let sizes: Vec<u64> = rows
        .iter()
        .map(|r| r.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(sizes, (3..=20).map(|p| 1u64 << p).collect::<Vec<_>>());
    for r in &rows {
        // size(12) 2 count(12) 2 type(8) 2 redop(6) 2 root(6) then 2 x (2+7, 2+6, 2+6, 2+6).
        assert_eq!(
            r.len(),
            12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6 + 2 * (9 + 8 + 8 + 8),
            "{r}"
        );
        assert_eq!(&r[26..36], "     float");
    }
    // The regexes people use on nccl-tests logs find what they expect.
    assert!(lines
        .iter()
        .any(|l| l.starts_with("# Out of bounds values : 0 OK")));
    let avg = lines
        .iter()
        .find(|l| l.starts_with("# Avg bus bandwidth    : "))
        .unwrap();
    assert!(avg.ends_with(' '));
    avg.trim_start_matches("# Avg bus bandwidth    : ")
        .trim()
        .parse::<f64>()
        .unwrap();
}

#[test]
fn aliases_take_the_same_flags_and_install() {
    let dir = tempfile::tempdir().unwrap();
    common::collbench()
        .args(["install-aliases"])
        .arg(dir.path())
        .assert()
        .success();
    for op in [
        "all_gather_perf",
        "reduce_scatter_perf",
        "alltoall_perf",
        "sendrecv_perf",
        "hypercube_perf",
    ] {
        let link = dir.path().join(op);
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let out = Command::new(&link)
            .args(["-b", "1K", "-e", "1K", "-g", "4"])
            .output()
            .unwrap();
        let text = ok_stdout(out, op);
        assert!(
            text.contains(&format!("# Collective test starting: {op}")),
            "{op}"
        );
    }
    // A bad flag through an alias is the same one-line usage error.
    common::usage_error(Command::new(dir.path().join("broadcast_perf")).args(["-f", "1"]));
}
