//! Typed failure signals (`Parsed::faults`): real failing logs from public
//! issues (`fixtures/failing/README.md`) and the anchors with a failure
//! written in, each yielding the right `Fault`.

use collbench_report::input::{read_paths, Fault};
use collbench_report::parse::{parse_text, read_file, Parsed};
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn text(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).unwrap()
}

fn crashed(p: &Parsed) -> Vec<&str> {
    p.faults
        .iter()
        .filter_map(|f| match f {
            Fault::Crashed { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect()
}

fn cut_short(p: &Parsed) -> usize {
    p.faults
        .iter()
        .filter(|f| matches!(f, Fault::CutShort { .. }))
        .count()
}

#[test]
fn clean_runs_have_no_faults() {
    for rel in [
        "anchors/all_reduce.txt",
        "anchors/all_reduce.json",
        "collbench/run_all_cpu.txt",
        "foreign/nccl-tests__ztan-a3mega-h100-2node.txt",
    ] {
        let p = read_file(&fixture(rel), None).unwrap();
        assert!(p.faults.is_empty(), "{rel}: {:?}", p.faults);
    }
}

/// NVIDIA/nccl-tests#322: ranks fail after the 16 GiB row.
#[test]
fn issue_322_test_nccl_failure_is_a_crash() {
    let path = fixture("failing/nccl_tests_322_test_nccl_failure.txt");
    let p = read_file(&path, None).unwrap();
    assert_eq!(p.records[0].results.len(), 5);
    assert_eq!(
        crashed(&p),
        [
            "HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
            ".. HCA-128 pid 757466: Test failure common.cu:915",
            "HCA-108: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
            ".. HCA-108 pid 2753866: Test failure common.cu:915",
        ]
    );
    assert_eq!(cut_short(&p), 1, "{:?}", p.faults);
    let name = path.display().to_string();
    assert!(p.faults.iter().all(|f| f.origin() == name));
    assert!(p.faults[0].to_string().starts_with(&name));
}

/// NVIDIA/nccl-tests#280: the failure lines come before the table.
#[test]
fn issue_280_test_failure_is_a_crash() {
    let p = read_file(&fixture("failing/nccl_tests_280_test_failure.txt"), None).unwrap();
    assert_eq!(p.records[0].results.len(), 3);
    assert_eq!(
        crashed(&p),
        [
            "c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'",
            ".. c2211f46f318 pid 3288: Test failure common.cu:891",
        ]
    );
    assert_eq!(cut_short(&p), 1, "{:?}", p.faults);
}

/// A `#wrong` above 0 and the FAILED footer: wrong results, twice typed.
#[test]
fn wrong_rows_and_the_failed_footer_are_wrong_results() {
    let anchor = text("anchors/all_reduce.txt");
    let row = "        1024           256     float     sum      -1    16.59    0.06    0.06       0    17.31    0.06    0.06       0";
    assert!(anchor.contains(row));
    let wrong = anchor
        .replace(row, &row.replacen("0.06       0", "0.06       3", 1))
        .replace(
            "Out of bounds values : 0 OK",
            "Out of bounds values : 3 FAILED",
        );
    let p = parse_text(&wrong, None, "wrong.txt").unwrap();
    assert_eq!(
        p.faults,
        [
            Fault::OutOfBounds {
                origin: "wrong.txt".into(),
                count: 3
            },
            Fault::WrongResults {
                origin: "wrong.txt".into(),
                case: "all_reduce float sum 1 KiB out-of-place".into(),
                count: 3
            },
        ]
    );
    assert_eq!(
        p.faults[1].to_string(),
        "wrong.txt: wrong results: 3 value(s) wrong in all_reduce float sum 1 KiB out-of-place"
    );
    assert!(p
        .warnings
        .iter()
        .any(|w| w.message.contains("outside tolerance") && w.message.contains("wrong results")));
}

/// nccl-tests' JSON: `nwrong` and `out_of_bounds.okay = "false"`.
#[test]
fn nccl_tests_json_wrong_results() {
    let json = text("anchors/all_reduce.json")
        .replacen("\"nwrong\":0.0", "\"nwrong\":2.0", 1)
        .replace(
            "\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"}",
            "\"out_of_bounds\":{\"count\":2,\"okay\":\"false\"}",
        );
    let p = parse_text(&json, None, "j.json").unwrap();
    assert!(p.faults.contains(&Fault::OutOfBounds {
        origin: "j.json".into(),
        count: 2
    }));
    assert!(
        p.faults.iter().any(|f| matches!(
            f,
            Fault::WrongResults { case, count: 2, .. } if case == "all_reduce float sum 8 B out-of-place"
        )),
        "{:?}",
        p.faults
    );
}

/// collbench JSON of a stopped run (`partial`), and a sweep that stops
/// a step short of maxBytes, are cut short.
#[test]
fn partial_runs_are_cut_short() {
    let mut r = collbench_core::Record::new("collbench");
    r.partial = Some("interrupted by a signal after 3 rows".into());
    let p = parse_text(&serde_json::to_string(&r).unwrap(), None, "p.json").unwrap();
    assert_eq!(
        p.faults,
        [Fault::CutShort {
            origin: "p.json".into(),
            reason: "partial: interrupted by a signal after 3 rows; the sweep was not finished"
                .into()
        }]
    );
    let short =
        text("anchors/all_reduce.txt").replace("maxBytes 8589934592", "maxBytes 34359738368");
    let p = parse_text(&short, None, "s.txt").unwrap();
    assert_eq!(cut_short(&p), 1, "{:?}", p.faults);
}

/// Crash and error lines of launchers, runtimes and collbench itself,
/// also where the launcher prefixed each rank's lines.
#[test]
fn launcher_and_runtime_crash_lines() {
    let anchor = text("anchors/all_reduce.txt");
    for line in [
        "Segmentation fault (core dumped)",
        "terminate called after throwing an instance of 'std::runtime_error'",
        "mpirun noticed that process rank 3 with PID 0 on node n1 exited on signal 11 (Segmentation fault).",
        "srun: error: node7: task 3: Exited with exit code 1",
        "Traceback (most recent call last):",
        "collbench: error: rank 1 timed out in all_reduce",
    ] {
        let p = parse_text(&format!("{anchor}{line}\n"), None, "c.txt").unwrap();
        assert_eq!(crashed(&p), [line], "{line}");
    }
    // NCCL's WARN lines are not fatal.
    let warn = format!("{anchor}h:1:2 [0] transport/net.cc:1 NCCL WARN retrying\n");
    assert!(parse_text(&warn, None, "w.txt").unwrap().faults.is_empty());
}

/// Folders: the faults of every file, each naming its own.
#[test]
fn inputs_gather_faults_per_file() {
    let inputs = read_paths(&[fixture("failing")], None, false).unwrap();
    let origins: std::collections::BTreeSet<&str> =
        inputs.parsed.faults.iter().map(|f| f.origin()).collect();
    assert_eq!(origins.len(), 2, "{origins:?}");
    assert!(origins.iter().all(|o| o.contains("nccl_tests_")));
}
