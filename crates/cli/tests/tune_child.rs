//! `collbench tune`'s child-process fallback end to end, without a GPU:
//! the hidden `--test-fake` puts the scripted fake in place of NCCL in the
//! parent and in its children (`collbench tune --serve-measure`), where
//! `NCCL_BUFFSIZE=8388608` takes 10% less time and NCCL's default spelled
//! out none.

mod common;

use common::{collbench, env_of, TUNE_SEARCH};
use serde_json::Value;
use std::time::{Duration, Instant};

fn tune(mode: &str, extra: &[&str]) -> (std::process::Output, Duration) {
    let t = Instant::now();
    let out = collbench()
        .args(TUNE_SEARCH)
        .args(["--test-fake", mode])
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (out, t.elapsed())
}

/// A band's candidate that is NCCL's default buffer size spelled out.
fn spelled_default(band: &Value) -> &Value {
    band["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| env_of(&c["setting"]) == "NCCL_BUFFSIZE=4194304")
        .expect("the default buffer size is a candidate")
}

#[test]
fn env_candidates_run_in_children_and_only_the_real_one_gains() {
    let (out, _) = tune("ok", &["--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("starting 4 child processes"), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bands = report["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 2);
    for b in bands {
        let outcome = &b["outcome"];
        assert_eq!(outcome["kind"], "gain", "{outcome}");
        assert_eq!(env_of(&outcome["setting"]), "NCCL_BUFFSIZE=8388608");
        let r = outcome["ratio"]["estimate"].as_f64().unwrap();
        assert!((r - 0.9).abs() < 0.03, "{r}");
        // NCCL's default spelled out was measured, and is no gain.
        let spelled = spelled_default(b);
        assert_eq!(spelled["status"]["kind"], "screened", "{spelled}");
        assert!(
            spelled["status"]["ratio"]["hi"].as_f64().unwrap() > 0.98,
            "{spelled}"
        );
    }
}

#[test]
fn a_child_that_dies_ends_the_search_in_one_line() {
    let (out, took) = tune("die", &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("collbench tune: stopped: measurement failed: child process with NCCL_BUFFSIZE=8388608: exited")
            && last.contains("this child dies"),
        "{stderr}"
    );
}

#[test]
fn a_child_that_hangs_is_killed_at_the_timeout() {
    let (out, took) = tune("hang", &["--test-child-timeout-s", "2"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap();
    assert!(
        last.contains("child process with NCCL_BUFFSIZE=8388608: no answer within 2 s"),
        "{stderr}"
    );
}

/// The spelled-out default must come out no gain even when a process's
/// speed depends on its own history: under `--test-fake aging` every
/// child is 0.5% slower with each repeat it has answered. With one
/// default child shared by all candidates (as on a GPU, where
/// `NCCL_BUFFSIZE=4194304` came out a steady 7% "gain" at 16 MiB), the
/// default side has served the other candidate's pairs first and looks
/// slower.
#[test]
fn the_default_spelled_out_is_no_gain_when_processes_age() {
    let out = collbench()
        .args([
            "tune",
            "all_reduce",
            "all_gather",
            "-b",
            "1M",
            "-e",
            "16M",
            "-f",
            "16",
            "--budget",
            "60s",
            "--format",
            "json",
            "--test-fake",
            "aging",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bands = report["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 4);
    for b in bands {
        let outcome = &b["outcome"];
        assert_ne!(
            env_of(&outcome["setting"]),
            "NCCL_BUFFSIZE=4194304",
            "{outcome}"
        );
        let spelled = spelled_default(b);
        let r = &spelled["status"]["ratio"];
        let (lo, hi) = (r["lo"].as_f64().unwrap(), r["hi"].as_f64().unwrap());
        assert!(lo < 1.02 && hi > 0.98, "{spelled}");
    }
}
