//! `--backend mpi` as a user runs it: `mpirun -np 4 collbench run ...`
//! with MPI as the bootstrap (no rendezvous given), every collective, type
//! and operator checked exactly, and the fault hook caught. Needs the `mpi`
//! feature and `mpirun` (Open MPI: apt-get install openmpi-bin
//! libopenmpi-dev); run with `cargo test -p collbench-cli --features mpi
//! --test mpi`.
#![cfg(feature = "mpi")]

mod common;

use common::{assert_corrupted_once, rows, Row};
use std::process::Output;

/// `mpirun -np <np> collbench <args>`.
fn mpirun(np: usize, args: &[&str]) -> Output {
    common::mpirun(np, &[], args)
}

/// Asserts a clean run and returns its rows, every one with #wrong 0
/// (in-place N/A where the collective table says it is not checked).
fn exact_rows(out: &Output, what: &str) -> Vec<Row> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{stderr}",
        out.status.code()
    );
    let rows = rows(&stdout);
    for Row {
        size,
        dtype,
        oop,
        ip,
    } in &rows
    {
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
    let sweep = [
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
    ];
    exact_rows(&mpirun(4, &sweep), "float sum");
    let every = ["-d", "all", "-o", "all", "-w", "0", "-n", "1"];
    let out = mpirun(4, &[&sweep[..], &every].concat());
    let rows = exact_rows(&out, "-d all -o all");
    for dtype in [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16", "f8e4m3", "f8e5m2",
    ] {
        assert!(rows.iter().any(|r| r.dtype == dtype), "no row for {dtype}");
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
        assert_corrupted_once(&out, op);
    }
}

/// Plain `mpirun` on one host gives no rank 0 address, but says every rank
/// is local (OMPI_COMM_WORLD_LOCAL_SIZE): the ranks meet on loopback with
/// no COLLBENCH_RENDEZVOUS, as the README's `mpirun ... _perf` lines need.
#[test]
fn plain_mpirun_on_one_host_needs_no_rendezvous() {
    let stdout = common::ok_stdout(mpirun(2, &["preflight"]), "preflight");
    assert!(stdout.contains("PASS: 2 ranks on 1 host"), "{stdout}");
    assert!(stdout.contains("rank 0 at 127.0.0.1:"), "{stdout}");
}

/// The MPI backend reports its iterations, so a rank that stops calling
/// is named as the one that never entered, behind ranks that are inside
/// MPI's call (which cannot be interrupted: the watchdog's last resort
/// ends them if mpirun has not).
#[test]
fn a_rank_that_stops_calling_is_named_under_mpi() {
    let hook = "run all_reduce --backend mpi -b 1K -e 1K -w 1 -n 20 -T 2 --test-stop-calling 2:0:5";
    let out = mpirun(4, &hook.split(' ').collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("collbench: stuck collective: "))
        .unwrap_or_else(|| panic!("no stuck line: {stderr}"));
    assert!(
        line.contains("all_reduce 1 KiB iteration 5: rank 2 (host ")
            && line.contains(") never entered; 3 ranks waiting (no progress for 2 s)"),
        "{line}"
    );
}
