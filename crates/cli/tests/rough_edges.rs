//! Issue 18's rough edges in the runner and the CPU backend, as a new user
//! meets them: a sweep larger than memory, huge -n / -m, huge --ranks.
//! Each ends in one line on stderr and a non-zero exit, or runs in bounded
//! memory; none is killed by the kernel, panics or hangs.

mod common;

use assert_cmd::Command;
use common::one_line_refusal;
use std::time::Duration;

fn collbench() -> Command {
    let mut c = common::collbench();
    c.timeout(Duration::from_secs(120));
    c
}

/// Item 1: the largest case is sized against the memory the process may
/// take (here a fake 128 MiB) before anything is allocated.
#[test]
fn sweep_larger_than_memory_is_refused_naming_a_size_that_fits() {
    let out = collbench()
        .env("COLLBENCH_MEM_LIMIT_BYTES", (128u64 << 20).to_string())
        .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
        .args(["-b", "8", "-e", "256M", "-f", "2", "-n", "1", "-w", "0"])
        .output()
        .unwrap();
    // 2 ranks x (send + receive + staging) x 256 MiB + the check's 256 MiB
    // = 1.75 GiB; 7 x 16 MiB fits in 128 MiB, 7 x 32 MiB does not.
    assert_eq!(
        one_line_refusal(&out, 4).trim_end(),
        "collbench: all_reduce -e 256M needs 1.8 GiB of host memory with 2 ranks; \
         0.1 GiB is available: use -e 16M or fewer --ranks"
    );
    // Refused before the first row, not after a minute of growing.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.lines().any(
            |l| l.contains("float") && l.trim_start().starts_with(|c: char| c.is_ascii_digit())
        ),
        "{stdout}"
    );
}

/// Item 1: a sweep that fits still runs under the same probe.
#[test]
fn sweep_that_fits_runs() {
    collbench()
        .env("COLLBENCH_MEM_LIMIT_BYTES", (128u64 << 20).to_string())
        .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
        .args(["-b", "8", "-e", "16M", "-f", "16", "-n", "1", "-w", "0"])
        .assert()
        .success();
}

/// Runs collbench under an address-space limit (`ulimit -v`, KiB): memory
/// that grew with -n or -m (72 bytes per operation before) fails there.
fn run_with_address_space_limit(kib: u64, args: &str) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec {} {args}", bin.display()))
        // One malloc arena per thread would reserve 64 MiB of address space each.
        .env("MALLOC_ARENA_MAX", "1")
        .output()
        .unwrap()
}

/// Item 2: per-iteration storage is bounded, whatever -n and -m say.
#[test]
fn many_iterations_run_in_bounded_memory() {
    for args in [
        "run all_reduce --backend cpu --ranks 1 -b 8 -e 8 -w 0 -c 0 -n 5000000 --format json",
        "run all_reduce --backend cpu --ranks 1 -b 8 -e 8 -w 0 -c 0 -n 1 -m 5000000 --format json",
    ] {
        let out = run_with_address_space_limit(256 << 10, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args}: {err}");
        let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let p = &rec["results"][0]["out_of_place"];
        let n: u64 = if args.contains("-n 1 ") { 1 } else { 5_000_000 };
        assert_eq!(p["stats"]["samples"], n, "{args}");
        assert_eq!(p["iterations"], 5_000_000u64, "{args}");
        for f in [
            "mean_us", "min_us", "p50_us", "p99_us", "max_us", "stdev_us",
        ] {
            assert!(p["stats"][f].is_number(), "{args}: {f}");
        }
        let s = &p["stats"];
        let (min, p50, p99, max) = (
            s["min_us"].as_f64().unwrap(),
            s["p50_us"].as_f64().unwrap(),
            s["p99_us"].as_f64().unwrap(),
            s["max_us"].as_f64().unwrap(),
        );
        assert!(min <= p50 && p50 <= p99 && p99 <= max, "{args}: {s}");
    }
}

/// Item 3: more ranks than the CPU backend runs is one line, exit 2,
/// before any thread starts (was: "failed to spawn thread" and a hang).
#[test]
fn too_many_ranks_is_a_usage_error() {
    for ranks in ["40000", "100000", "4097"] {
        let out = collbench()
            .args(["run", "all_reduce", "--backend", "cpu", "--ranks", ranks])
            .args(["-b", "8", "-e", "8"])
            .output()
            .unwrap();
        assert_eq!(
            one_line_refusal(&out, 2).trim_end(),
            format!(
                "collbench: --ranks {ranks} is more than the CPU backend's limit of 4096 rank threads: \
                 use --ranks 4096 or fewer (or a GPU backend for larger jobs)"
            )
        );
        assert!(out.stdout.is_empty());
    }
}

/// Item 1: a GPU baseline on the CPU backend says it does not apply, before
/// running anything (was: its 8G cases grew until the kernel killed it).
#[test]
fn gpu_baseline_on_the_cpu_backend_does_not_apply() {
    let out = collbench()
        .env("COLLBENCH_MEM_LIMIT_BYTES", (1u64 << 30).to_string())
        .args([
            "check",
            "--backend",
            "cpu",
            "--baseline",
            "h200x2",
            "--quick",
        ])
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    let line = err.trim_end();
    assert!(
        line.starts_with("collbench: baseline 'h200x2' (2 x NVIDIA H200")
            && line.ends_with(
                "does not apply to the CPU backend: use --baseline cpu-ci here, or run on the GPUs it describes"
            ),
        "{line}"
    );
}
