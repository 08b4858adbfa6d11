//! `collbench gen` as a user runs it: output to stdout or `-o FILE`, and
//! refusals as one line with exit code 2.

mod common;

use common::{collbench, stdout_ok, usage_error};

#[test]
fn mpirun_line_goes_to_stdout() {
    let text = stdout_ok(collbench().args([
        "gen",
        "mpirun",
        "--hosts",
        "h1:8,h2:8",
        "--env",
        "NCCL_DEBUG=INFO",
    ]));
    assert!(
        text.starts_with("mpirun --allow-run-as-root -np 16 -H h1:8,h2:8"),
        "{text}"
    );
    assert!(text.contains("-x NCCL_DEBUG=INFO"), "{text}");
    assert!(text.contains("collbench run all -b 8 -e 8G -f 2"), "{text}");
}

#[test]
fn output_flag_writes_an_executable_script() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.sh");
    // -o after the subcommand's flags and before `--`, as users type it.
    collbench()
        .args(["gen", "slurm", "--nodes", "2", "--gpus-per-node", "4", "-o"])
        .arg(&path)
        .args(["--", "run", "all_reduce"])
        .assert()
        .success()
        .stdout("");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("#!/bin/bash\n"), "{text}");
    assert!(text.contains("collbench run all_reduce"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "executable");
}

#[test]
fn invalid_kubernetes_name_is_one_line_exit_2() {
    let out = collbench()
        // The `--flag=value` spelling, which gen_safety's parser tests do
        // not take through the binary.
        .args([
            "gen",
            "k8s",
            "--kind=jobset",
            "--nodes=2",
            "--gpus-per-node=8",
        ])
        .args(["--image=img:1", "--name=Bad_Name"])
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    let err = common::one_line_refusal(&out, 2);
    assert!(
        err.contains("invalid --name \"Bad_Name\": must be an RFC 1123 label"),
        "{err}"
    );
}

#[test]
fn zero_nodes_is_one_line_exit_2() {
    let err =
        usage_error(collbench().args(["gen", "slurm", "--nodes", "0", "--gpus-per-node", "8"]));
    assert!(
        err.contains("invalid --nodes 0: must be at least 1"),
        "{err}"
    );
}

#[test]
fn both_topology_levels_is_one_line_exit_2() {
    let err = usage_error(collbench().args([
        "gen",
        "k8s",
        "--kind",
        "jobset",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--topology-required",
        "kubernetes.io/hostname",
        "--topology-preferred",
        "cloud.google.com/gce-topology-block",
    ]));
    assert!(err.contains("cannot be used with"), "{err}");
}
