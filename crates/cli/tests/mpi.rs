//! `--backend mpi` as a user runs it: `mpirun -np 4 collbench run ...`
//! with MPI as the bootstrap (no rendezvous given), every collective, type
//! and operator checked exactly, and the fault hook caught. Needs the `mpi`
//! feature and `mpirun` (Open MPI: apt-get install openmpi-bin
//! libopenmpi-dev); run with `cargo test -p collbench-cli --features mpi
//! --test mpi`.
#![cfg(feature = "mpi")]

use assert_cmd::Command;
use std::process::Output;
use std::time::Duration;

/// `mpirun -np <np> collbench <args>`, as root where CI runs (4 ranks on a
/// 2-core machine need `--oversubscribe`).
fn mpirun(np: usize, args: &[&str]) -> Output {
    let np = np.to_string();
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", &np])
        .arg(env!("CARGO_BIN_EXE_collbench"))
        .args(args)
        .timeout(Duration::from_secs(300))
        .output();
    out.unwrap_or_else(|e| {
        panic!("cannot start mpirun ({e}): install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
    })
}

/// Result rows of nccl-tests text: (size, type, #wrong out-of-place, #wrong in-place).
fn rows(stdout: &str) -> Vec<(u64, String, String, String)> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 13, "row has 13 columns: {l}");
            (
                f[0].parse().unwrap(),
                f[2].to_string(),
                f[8].to_string(),
                f[12].to_string(),
            )
        })
        .collect()
}

/// Asserts a clean run and returns its rows, every one with #wrong 0
/// (in-place N/A where the collective table says it is not checked).
fn exact_rows(out: &Output, what: &str) -> Vec<(u64, String, String, String)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{stderr}",
        out.status.code()
    );
    let rows = rows(&stdout);
    for (size, dtype, oop, ip) in &rows {
        assert_eq!(oop, "0", "{what}: {dtype} size {size} out-of-place");
        assert!(
            ip == "0" || ip == "N/A",
            "{what}: {dtype} size {size} in-place {ip}"
        );
    }
    assert!(!stdout.contains("FAILED"), "{what}");
    rows
}

#[test]
fn every_collective_is_exact_on_4_processes() {
    let out = mpirun(
        4,
        &[
            "run",
            "all",
            "--backend",
            "mpi",
            "-b",
            "8",
            "-e",
            "1M",
            "-f",
            "4",
        ],
    );
    let rows = exact_rows(&out, "run all");
    // 11 collectives (alltoallv included) x 9 sizes (8 B .. 512 KiB):
    // nothing skipped.
    assert_eq!(rows.len(), 99);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("backend: mpi library: "), "{stdout}");
    for rank in 0..4 {
        assert!(
            stdout.contains(&format!("Rank  {rank} Group  0")),
            "rank {rank} listed"
        );
    }
}

#[test]
fn every_type_and_operator_is_exact() {
    let out = mpirun(
        4,
        &[
            "run",
            "all",
            "--backend",
            "mpi",
            "-b",
            "1K",
            "-e",
            "4K",
            "-f",
            "4",
        ],
    );
    exact_rows(&out, "float sum");
    let out = mpirun(
        4,
        &[
            "run",
            "all",
            "--backend",
            "mpi",
            "-b",
            "1K",
            "-e",
            "4K",
            "-f",
            "4",
            "-d",
            "all",
            "-o",
            "all",
            "-w",
            "0",
            "-n",
            "1",
        ],
    );
    let rows = exact_rows(&out, "-d all -o all");
    for dtype in [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16", "f8e4m3", "f8e5m2",
    ] {
        assert!(rows.iter().any(|r| r.1 == dtype), "no row for {dtype}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    for redop in ["sum", "prod", "max", "min", "avg", "mulsum"] {
        assert!(stdout.contains(&format!(" {redop} ")), "no row for {redop}");
    }
}

#[test]
fn a_corrupted_element_is_counted_once_and_fails_the_run() {
    for op in collbench_core::Collective::ALL.map(|c| c.name()) {
        let out = mpirun(
            4,
            &[
                "run",
                op,
                "--backend",
                "mpi",
                "-b",
                "4K",
                "-e",
                "4K",
                "--test-corrupt",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{op}: {stdout}\n{stderr}");
        let rows = rows(&stdout);
        assert_eq!(rows.len(), 1, "{op}");
        assert_eq!(rows[0].2, "1", "{op}: out-of-place #wrong");
        assert!(
            rows[0].3 == "1" || rows[0].3 == "N/A",
            "{op}: in-place #wrong {}",
            rows[0].3
        );
        assert!(stdout.contains("FAILED"), "{op}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("wrong elements"),
            "{op}"
        );
    }
}

/// Plain `mpirun` on one host gives no rank 0 address, but says every rank
/// is local (OMPI_COMM_WORLD_LOCAL_SIZE): the ranks meet on loopback with
/// no COLLBENCH_RENDEZVOUS, as the README's `mpirun ... _perf` lines need.
#[test]
fn plain_mpirun_on_one_host_needs_no_rendezvous() {
    let out = mpirun(2, &["preflight"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("PASS: 2 ranks on 1 host"), "{stdout}");
    assert!(stdout.contains("rank 0 at 127.0.0.1:"), "{stdout}");
}
