//! `collbench run` on the CPU backend as a user runs it: every collective,
//! type and operator checked exactly, for several rank counts; the fault
//! hook caught; machine-readable outputs valid.

mod common;

use common::{
    assert_corrupted_once, collbench, cpu_run, ok_stdout, one_line_refusal, rows, stdout_ok,
};
use std::path::Path;

#[test]
fn every_op_type_and_redop_is_exact_for_several_rank_counts() {
    for ranks in ["1", "2", "3", "5", "8"] {
        let out = collbench()
            .args(["run", "all", "--backend", "cpu", "--ranks", ranks])
            .args([
                "-b", "8", "-e", "64K", "-f", "8", "-d", "all", "-o", "all", "-w", "0", "-n", "1",
            ])
            .output()
            .unwrap();
        let stdout = ok_stdout(out, &format!("ranks {ranks}"));
        let rows = rows(&stdout);
        // 11 collectives; reducing ones x 6 ops; all x 12 types; 5 sizes.
        assert!(rows.len() > 1000, "ranks {ranks}: only {} rows", rows.len());
        for r in &rows {
            let (size, ip) = (r.size, &r.ip);
            assert_eq!(r.oop, "0", "ranks {ranks} size {size}");
            assert!(ip == "0" || ip == "N/A", "ranks {ranks} size {size}: {ip}");
        }
        assert!(!stdout.contains("FAILED"));
    }
}

#[test]
fn a_corrupted_element_is_counted_once_and_fails_the_run() {
    for op in collbench_core::Collective::ALL.map(|c| c.name()) {
        let out = cpu_run(op, "4")
            .args(["-b", "4K", "-e", "4K", "--test-corrupt"])
            .output()
            .unwrap();
        let stdout = assert_corrupted_once(&out, op);
        assert!(stdout.contains("# Out of bounds values : "), "{op}");
    }
}

#[test]
fn json_output_validates_against_the_schema() {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/record.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let out = stdout_ok(
        cpu_run("all_reduce", "3")
            .arg("broadcast")
            .args(["-b", "1K", "-e", "64K", "-f", "4", "--format", "json"]),
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(doc["schema_version"], 6);
    assert_eq!(doc["backend"], "cpu");
    assert_eq!(doc["results"].as_array().unwrap().len(), 8);
    let p = &doc["results"][0]["out_of_place"];
    for k in ["time_us", "algbw_gbps", "busbw_gbps", "wrong", "iterations"] {
        assert!(p.get(k).is_some(), "missing {k}");
    }
    for k in [
        "mean_us", "min_us", "p50_us", "p99_us", "max_us", "stdev_us",
    ] {
        assert!(p["stats"].get(k).is_some(), "missing stats.{k}");
    }
    // A document that breaks the schema is refused, so the check is real.
    let mut bad = doc.clone();
    bad["results"][0]["size_bytes"] = serde_json::json!("big");
    assert!(!validator.is_valid(&bad));
}

#[test]
fn csv_has_one_header_and_a_row_per_case_and_placement() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.csv");
    cpu_run("alltoall", "2")
        .args(["-b", "1K", "-e", "4K", "-f", "2", "-q", "--output"])
        .arg(&file)
        .assert()
        .success()
        .stdout("");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "op");
    let body: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(body.len(), 6, "3 sizes x 2 placements");
    for r in &body {
        assert_eq!(r.len(), header.len());
        assert_eq!(r[0], "alltoall");
        let busbw: f64 = r[9].parse().unwrap();
        assert!(busbw >= 0.0);
    }
    // alltoall in-place is not checked: its wrong column is empty.
    assert!(body.iter().any(|r| r[6] == "in_place" && r[10].is_empty()));
}

#[test]
fn markdown_and_json_files_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("r.md");
    let json = dir.path().join("r.json");
    cpu_run("sendrecv", "2")
        .args(["-b", "64", "-e", "64", "--output"])
        .arg(&md)
        .arg("-J")
        .arg(&json)
        .assert()
        .success();
    // The same case table as `collbench report` prints.
    let md = std::fs::read_to_string(&md).unwrap();
    common::assert_says(
        &md,
        &[
            "| size | count | type | redop | root |",
            "| 64 B | 16 | float | sum | -1 |",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // -J writes nccl-tests' own layout.
    assert_eq!(v["version"], 3);
    assert_eq!(v["results"][0]["size"], 64);
}

#[test]
fn auto_backend_without_gpu_says_it_uses_the_cpu() {
    let out = collbench()
        .args(["run", "all_reduce", "-b", "8", "-e", "8", "--ranks", "2"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CPU backend"), "{err}");
}

#[test]
fn nccl_backend_without_gpu_is_one_clear_line() {
    let out = collbench()
        .args([
            "run",
            "all_reduce",
            "--backend",
            "nccl",
            "-b",
            "8",
            "-e",
            "8",
        ])
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 4);
    assert!(err.contains("CUDA") || err.contains("GPU"), "{err}");
}
