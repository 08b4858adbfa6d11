//! `collbench doctor` as a user runs it: quick, no panic, every check
//! with a status, and GPU checks skipped (with a reason) where there is
//! no NVIDIA driver.

use assert_cmd::Command;
use std::time::{Duration, Instant};

#[test]
fn doctor_finishes_quickly_and_skips_what_it_cannot_check() {
    let start = Instant::now();
    let out = Command::cargo_bin("collbench")
        .unwrap()
        .arg("doctor")
        .env("NCCL_SOCKET_IFNAME", "=no_such_if0")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "doctor took {took:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The interface named in NCCL_SOCKET_IFNAME does not exist: FAIL, exit 2.
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let ifname = stdout
        .lines()
        .find(|l| l.contains("NCCL_SOCKET_IFNAME"))
        .unwrap();
    assert!(ifname.starts_with("FAIL"), "{ifname}");
    for name in [
        "cuda driver",
        "nccl",
        "memlock",
        "/dev/shm",
        "rendezvous port",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(name)))
            .unwrap_or_else(|| panic!("no '{name}' check in:\n{stdout}"));
        assert!(
            ["PASS", "WARN", "FAIL", "SKIP"].contains(&&line[..4]),
            "{line}"
        );
    }
    let summary = stdout.lines().last().unwrap();
    assert!(summary.starts_with("collbench doctor: "), "{summary}");
    if !std::path::Path::new("/dev/nvidiactl").exists() {
        assert!(stdout.contains("SKIP  gpus"), "{stdout}");
        assert!(summary.contains("GPU checks skipped"), "{summary}");
    }
}

/// `--format json` is the JSON switch of every command that prints JSON on
/// stdout; doctor's older `--json` still works.
#[test]
fn doctor_json_lists_every_check() {
    for flags in [&["--format", "json"][..], &["--json"][..]] {
        doctor_json(flags);
    }
}

fn doctor_json(flags: &[&str]) {
    let out = Command::cargo_bin("collbench")
        .unwrap()
        .arg("doctor")
        .args(flags)
        .env_remove("NCCL_SOCKET_IFNAME")
        .env_remove("NCCL_IB_HCA")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = checks.as_array().unwrap();
    assert!(checks.len() >= 7, "{checks:?}");
    for c in checks {
        let s = c["status"].as_str().unwrap();
        assert!(["PASS", "WARN", "FAIL", "SKIP"].contains(&s), "{c}");
        assert!(!c["message"].as_str().unwrap().is_empty(), "{c}");
    }
    assert!(checks.iter().any(|c| c["name"] == "rendezvous port"));
}
