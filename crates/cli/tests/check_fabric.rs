//! `check` says which path it measured, gates it (`--require-transport`)
//! and runs the fabric variants, each against its own ceiling (issue #50,
//! docs/transport.md), as a user runs it on the CPU backend: one process,
//! and processes on emulated hosts (the test hook
//! `COLLBENCH_TEST_CPU_PER_PROCESS=1`, NCCL_HOSTID naming each host).

mod common;

use common::{collbench, finish, free_port, torchrun_rank, Finished};
use std::path::Path;
use std::time::{Duration, Instant};

fn report(json: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(json).expect("rank 0 wrote --json"))
        .expect("JSON")
}

/// `check` on 2 CPU rank threads at 1M, `extra` added; exit code, stdout
/// and the JSON report.
fn one_process(extra: &[&str]) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let (code, out, err) = common::run(
        collbench()
            .args(["check", "--backend", "cpu", "--ranks", "2", "--quick"])
            .args(["--size", "1M", "--json"])
            .arg(&json)
            .args(extra)
            .timeout(Duration::from_secs(120)),
    );
    assert!(json.exists(), "no JSON; stderr: {err}");
    (code, out, report(&json))
}

fn variant<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["transport"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["variant"] == name)
        .unwrap_or_else(|| panic!("no {name} variant: {v}"))
}

#[test]
fn one_process_says_its_path_and_each_variant_against_its_ceiling() {
    let (code, out, v) = one_process(&[]);
    // No baseline: pair tests on a busy machine may warn; never
    // incomplete or failed.
    assert!(code == 0 || code == 1, "{code}: {out}");
    let cpu_path = "cpu backend: shared memory between 2 rank threads of one process (no network)";
    assert!(
        out.contains(&format!("# path measured: {cpu_path}")),
        "{out}"
    );
    for row in ["#  all paths ", "#  network only ", "#  within hosts "] {
        assert!(out.contains(row), "{row}: {out}");
    }
    assert!(
        out.contains("# network only: skipped: the cpu backend moves no data between processes"),
        "{out}"
    );
    let all = variant(&v, "all_paths");
    let busbw = all["busbw_gbps"].as_f64().unwrap();
    assert!(busbw > 0.0, "{all}");
    assert_eq!(all["path"]["summary"], cpu_path);
    // The CPU backend's ceiling is host memory's copy rate (a probe).
    assert!(all["ceiling_gbps"].as_f64().unwrap() > 0.0, "{all}");
    assert_eq!(all["bottleneck"], "host memory");
    let net = variant(&v, "network");
    assert!(
        net["busbw_gbps"].is_null() && net["path"].is_null(),
        "{net}"
    );
    assert!(net["skipped"]
        .as_str()
        .unwrap()
        .contains("no data between processes"));
    // One host: within it is what the battery measured.
    let intra = variant(&v, "intra");
    assert_eq!(intra["busbw_gbps"].as_f64(), Some(busbw));
    assert!(intra["skipped"].is_null(), "{intra}");
    assert!(intra["note"]
        .as_str()
        .unwrap()
        .starts_with("the job has one host, so the battery measured within it"));
    assert_eq!(v["transport"]["gate"].as_array().unwrap().len(), 0);
}

#[test]
fn fabric_none_keeps_the_path_line_and_runs_no_variant() {
    let (_, out, v) = one_process(&["--fabric", "none"]);
    assert!(out.contains("# path measured: cpu backend"), "{out}");
    assert!(!out.contains("#  network only "), "{out}");
    let variants = v["transport"]["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 1, "all paths only: {variants:?}");
}

#[test]
fn a_required_transport_the_cpu_backend_cannot_take_fails_naming_its_path() {
    let (code, out, v) = one_process(&["--require-transport", "ib", "--fabric", "none"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("# FAIL transport: expected NET/IB (required), the job used cpu backend: shared memory between 2 rank threads of one process (no network); cause: the cpu backend does not use NCCL: run with --backend nccl"),
        "{out}"
    );
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("collbench check: FAIL"), "{last}");
    assert!(last.contains("transport gate"), "{last}");
    let gate = &v["transport"]["gate"][0];
    assert_eq!(gate["status"], "FAIL");
    assert_eq!(gate["expected"], "NET/IB");
    assert_eq!(v["transport"]["required"][0], "ib");
    assert_eq!(v["exit_code"], 2);
}

/// Two processes on emulated hosts `n0` and `n1`, `ranks` rank threads
/// each; rank 0 writes `json`.
fn two_hosts(ranks: &str, json: &Path) -> Vec<Finished> {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(240);
    let children: Vec<_> = (0..2)
        .map(|r| {
            torchrun_rank(r, 2, port)
                .args(["check", "--backend", "cpu", "--ranks", ranks])
                .args(["--size", "1M", "-n", "5", "--quick", "--json"])
                .arg(json)
                .env("COLLBENCH_TEST_CPU_PER_PROCESS", "1")
                .env("NCCL_HOSTID", format!("n{r}"))
                .spawn()
                .expect("start collbench")
        })
        .collect();
    children.into_iter().map(|c| finish(c, deadline)).collect()
}

#[test]
fn two_hosts_measure_within_each_host_and_name_the_slowest() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let done = two_hosts("2", &json);
    for d in &done {
        assert!(matches!(d.code, Some(0 | 1)), "{d:?}");
    }
    let v = report(&json);
    let intra = variant(&v, "intra");
    let note = intra["note"].as_str().unwrap();
    assert!(note.starts_with("slowest of 2 hosts n"), "{note}");
    assert!(intra["busbw_gbps"].as_f64().unwrap() > 0.0, "{intra}");
    assert_eq!(
        intra["path"]["summary"],
        "cpu backend: shared memory between 2 rank threads of one process (no network)"
    );
    // Within one host, the CPU ceiling applies; across hosts, none is
    // known (the CPU backend has no network), and that is said.
    assert_eq!(intra["bottleneck"], "host memory", "{intra}");
    let all = variant(&v, "all_paths");
    assert!(all["ceiling_gbps"].is_null(), "{all}");
    assert!(
        all["note"].as_str().unwrap().contains("no ceiling"),
        "{all}"
    );
    assert!(variant(&v, "network")["skipped"].is_string());
    assert!(
        done[0]
            .stdout
            .contains("each of 2 processes (no data crosses processes)"),
        "{}",
        done[0].stdout
    );
}

#[test]
fn one_rank_per_host_skips_the_within_hosts_variant_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let done = two_hosts("1", &json);
    assert!(matches!(done[0].code, Some(0 | 1)), "{:?}", done[0]);
    let intra = variant(&report(&json), "intra").clone();
    assert_eq!(
        intra["skipped"],
        "one rank per host: nothing within hosts to measure"
    );
    assert!(
        done[0]
            .stdout
            .contains("# within hosts: skipped: one rank per host"),
        "{}",
        done[0].stdout
    );
}
