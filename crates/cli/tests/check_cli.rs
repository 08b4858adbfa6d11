//! `collbench check` as a user runs it on the CPU backend: verdicts
//! against a baseline file, exit codes, JSON and Prometheus output, and
//! localisation of a slowed rank. Small sizes and few iterations keep
//! each test to a few seconds on a 2-core machine with a debug build.

mod common;

use common::collbench;
use std::path::Path;

/// A baseline for 4 CPU ranks at 1 MiB; `all_gather_gbps` lets a test
/// set one op impossibly high. Other figures are far below what even a
/// debug build on a busy machine measures.
fn baseline(dir: &Path, all_gather_gbps: f64) -> std::path::PathBuf {
    let text = format!(
        r#"name = "test-cpu"
description = "4 CPU rank threads"
gpus_per_node = 4
nodes = 1
interconnect = "shared memory"
source = "written by the test"

[[expect]]
op = "all_reduce"
size = "1M"
busbw_gbps = 0.001
small_size = "8"
max_time_us = 1000000.0

[[expect]]
op = "all_gather"
size = "1M"
busbw_gbps = {all_gather_gbps}
"#
    );
    let path = dir.join("cpu.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(args: &[&str], extra: &[&Path]) -> (i32, String, String) {
    common::run(
        collbench()
            .args(args)
            .args(extra)
            .timeout(std::time::Duration::from_secs(60)),
    )
}

/// Asserts that every one of `lines` is in the metrics file `prom`.
fn assert_metrics(prom: &Path, lines: &[&str]) {
    let metrics = std::fs::read_to_string(prom).unwrap();
    for line in lines {
        assert!(metrics.contains(line), "{line:?} missing:\n{metrics}");
    }
}

/// `check` on 4 ranks (3 with `--test-slow-rank 0`) larger than the
/// caches, with a stricter pair fraction: on a busy 2-core CI machine
/// healthy pairs jitter by 2x, the slowed rank is 5-10x slower.
fn slowed(ranks: &str, slow_rank: &str, rest: &[&str], extra: &[&Path]) -> (i32, String, String) {
    let head = ["check", "--backend", "cpu", "--ranks", ranks, "--quick"];
    let slow = [
        "--size",
        "16M",
        "--pair-fraction",
        "0.4",
        "--test-slow-rank",
        slow_rank,
    ];
    run(&[&head[..], &slow, rest].concat(), extra)
}

const CPU4: [&str; 7] = [
    "check",
    "--backend",
    "cpu",
    "--ranks",
    "4",
    "--quick",
    "--baseline",
];

#[test]
fn passes_against_a_cpu_baseline_and_writes_json_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let b = baseline(dir.path(), 0.001);
    let json = dir.path().join("check.json");
    let prom = dir.path().join("check.prom");
    let (code, stdout, stderr) = run(
        &CPU4,
        &[
            &b,
            Path::new("--json"),
            &json,
            Path::new("--prometheus"),
            &prom,
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("baseline 'test-cpu'"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert_eq!(last, "collbench check: PASS (baseline 'test-cpu')");
    // Both stated ops and the latency line, each at the stated size.
    for (op, size) in [
        ("all_reduce", "1M"),
        ("all_gather", "1M"),
        ("all_reduce", "8"),
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(op)
                && l.split_whitespace().nth(1) == Some(size)
                && l.ends_with("PASS")),
            "{op} {size} PASS missing:\n{stdout}"
        );
    }

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["status"], "PASS");
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["baseline"], "test-cpu");
    assert_eq!(report["no_baseline"], false);
    let lines = report["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 3, "{report}");
    assert_eq!(lines[0]["op"], "all_reduce");
    assert_eq!(lines[0]["size_bytes"], 1 << 20);
    assert!(lines[0]["measured"].as_f64().unwrap() > 0.001);
    assert_eq!(lines[0]["wrong"], 0);

    assert_metrics(
        &prom,
        &[
            "collbench_busbw_gbps{op=\"all_gather\",size_bytes=\"1048576\"} ",
            "collbench_verdict{op=\"all_gather\"} 0\n",
            "collbench_check_status 0\n",
            "# TYPE collbench_check_timestamp_seconds gauge\n",
        ],
    );
}

#[test]
fn a_baseline_set_too_high_fails_with_exit_2_naming_the_op() {
    let dir = tempfile::tempdir().unwrap();
    let b = baseline(dir.path(), 1.0e5);
    let prom = dir.path().join("check.prom");
    let (code, stdout, stderr) = run(&CPU4, &[&b, Path::new("--prometheus"), &prom]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    let gather = stdout
        .lines()
        .find(|l| l.starts_with("all_gather"))
        .unwrap();
    assert!(gather.ends_with("FAIL"), "{gather}");
    let reduce = stdout
        .lines()
        .find(|l| l.starts_with("all_reduce"))
        .unwrap();
    assert!(reduce.ends_with("PASS"), "{reduce}");
    assert!(
        stdout.contains("# FAIL all_gather: busbw"),
        "the reason is spelled out: {stdout}"
    );
    assert_eq!(
        stdout.lines().last().unwrap(),
        "collbench check: FAIL (baseline 'test-cpu'): all_gather"
    );
    assert_metrics(
        &prom,
        &[
            "collbench_verdict{op=\"all_gather\"} 2\n",
            "collbench_check_status 2\n",
        ],
    );
}

#[test]
fn localisation_names_the_slowed_rank() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let (code, stdout, stderr) = slowed("4", "2", &["--json"], &[&json]);
    assert_eq!(
        code, 1,
        "slow pairs without a baseline warn\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("WITHOUT a baseline"), "{stdout}");
    assert!(stdout.contains("# slow rank: r2 on host "), "{stdout}");
    assert!(
        !stdout.contains("slow rank: r0")
            && !stdout.contains("slow rank: r1")
            && !stdout.contains("slow rank: r3")
    );
    assert!(
        stdout.lines().last().unwrap().contains("no baseline used"),
        "{stdout}"
    );
    // The heatmap: row r2 is all dark-light cells.
    let row = stdout.lines().find(|l| l.starts_with("r2 ")).unwrap();
    assert_eq!(row.matches('░').count(), 3, "{row}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["no_baseline"], true);
    let loc = &report["localization"];
    assert_eq!(loc["culprits"][0]["rank"], 2);
    assert_eq!(loc["culprits"].as_array().unwrap().len(), 1);
    let m = loc["matrix"]["gbps"].as_array().unwrap();
    assert_eq!(m.len(), 4);
    assert!(m[2][2].is_null());
    assert!(m[0][2].as_f64().unwrap() < m[0][1].as_f64().unwrap());
    assert_eq!(loc["matrix"]["labels"][2], "r2");
}

#[test]
fn a_short_result_triggers_localisation_with_a_baseline() {
    // A short result (all_gather stated impossibly high) makes check go on
    // to the pairwise tests by itself, and they find the slowed rank.
    let dir = tempfile::tempdir().unwrap();
    let b = baseline(dir.path(), 1.0e5);
    let (code, stdout, stderr) = slowed("3", "0", &["--baseline"], &[&b]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stdout.contains("pairwise sendrecv busbw"), "{stdout}");
    assert!(stdout.contains("# slow rank: r0 "), "{stdout}");
}

#[test]
fn unknown_baseline_is_one_line_listing_the_known_ones() {
    let (code, stdout, stderr) = run(
        &[
            "check",
            "--backend",
            "cpu",
            "--ranks",
            "2",
            "--baseline",
            "nope",
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unknown baseline 'nope'") && stderr.contains("h200x2"),
        "{stderr}"
    );
}

#[test]
fn baselines_list_and_show() {
    let (code, stdout, _) = run(&["baselines", "list"], &[]);
    assert_eq!(code, 0);
    let header = stdout.lines().next().unwrap();
    for col in ["name", "GPUs", "interconnect", "source"] {
        assert!(header.contains(col), "{header}");
    }
    let h200 = stdout.lines().find(|l| l.starts_with("h200x2 ")).unwrap();
    assert!(h200.contains("1x2") && h200.contains("NVLink"), "{h200}");
    assert!(stdout.lines().any(|l| l.starts_with("cpu-ci ")));
    assert!(stdout.lines().any(|l| l.starts_with("gke-a4x-2node ")));

    let (code, toml, _) = run(&["baselines", "show", "h200x2"], &[]);
    assert_eq!(code, 0);
    assert!(toml.contains("busbw_gbps = 349.6"), "{toml}");
    assert!(toml.lines().any(|l| l == "name = \"h200x2\""), "{toml}");
    let (code, _, stderr) = run(&["baselines", "show", "h200"], &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown baseline 'h200'"), "{stderr}");
}

/// The pairwise matrix that `check --json` writes is drawn by `report`.
#[test]
fn report_draws_the_check_matrix_as_a_heatmap() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let run = dir.path().join("run.json");
    let html = dir.path().join("r.html");
    let out = collbench()
        .args([
            "check",
            "--backend",
            "cpu",
            "--ranks",
            "3",
            "--localize",
            "--size",
            "1M",
            "--iters",
            "2",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::cpu_run("all_reduce", "2")
        .args(["-b", "1K", "-e", "4K", "-q", "--output"])
        .arg(&run)
        .assert()
        .success();
    // `collbench report RUN --matrix MATRIX -o HTML`
    let report = |matrix: &Path, html: &Path| {
        let mut c = collbench();
        c.arg("report").arg(&run).arg("--matrix").arg(matrix);
        c.arg("-o").arg(html);
        c
    };
    report(&json, &html).assert().success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Pairwise sendrecv bandwidth"),
        "no heatmap section"
    );
    assert!(page.matches("<svg").count() >= 3, "charts and heatmap");
    // A file that is not check output is one clear error.
    let (code, _, stderr) = common::run(&mut report(&run, &dir.path().join("second.html")));
    assert_eq!(code, 2);
    assert!(stderr.contains("localization.matrix"));
}
