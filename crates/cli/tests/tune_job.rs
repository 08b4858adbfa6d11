//! `collbench tune` under a launcher (torchrun variables on loopback), on
//! the scripted fake (`--test-fake`) over the real control plane: every
//! process runs the search in lock step, only rank 0 prints, every process
//! exits with rank 0's code, and a killed peer ends the job with the usual
//! line naming it (exit 3) within a deadline.

mod common;

use common::{finish, free_port, torchrun_rank, Finished, TUNE_SEARCH};
use serde_json::Value;
use std::process::Child;
use std::time::{Duration, Instant};

/// Rank `rank` of 2 processes, each its own emulated host over sockets.
fn spawn(rank: usize, port: u16, args: &[&str]) -> Child {
    torchrun_rank(rank, 2, port)
        .args(TUNE_SEARCH)
        .args(["--timeout-s", "5"])
        .args(args)
        .env("NCCL_HOSTID", format!("emu{rank}"))
        .env("NCCL_IB_DISABLE", "1")
        .env_remove("NCCL_NET")
        .spawn()
        .expect("start collbench")
}

fn job(args: &[&str]) -> Vec<Finished> {
    let port = free_port();
    let children: Vec<Child> = (0..2).map(|r| spawn(r, port, args)).collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    children.into_iter().map(|c| finish(c, deadline)).collect()
}

#[test]
fn two_processes_tune_in_lock_step_and_only_rank_0_prints() {
    let done = job(&["--test-fake", "ok", "--format", "json"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    assert!(done[1].stdout.is_empty(), "{}", done[1].stdout);
    assert!(done[1].stderr.is_empty(), "{}", done[1].stderr);
    let report: Value = serde_json::from_str(&done[0].stdout).unwrap();
    assert_eq!(report["bands"].as_array().unwrap().len(), 2);
    assert_eq!(report["n_nodes"], 2);
    assert_eq!(report["world_size"], 2);
    assert!(
        done[0]
            .stderr
            .contains("environment candidates not measured"),
        "{}",
        done[0].stderr
    );
}

#[test]
fn the_plan_of_two_hosts_lists_socket_knobs_on_rank_0_only() {
    let done = job(&["--list-candidates"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let plan = &done[0].stdout;
    assert!(
        plan.starts_with(
            "# collbench tune: 2 host(s), 2 ranks; between hosts: NET/Socket (NCCL_IB_DISABLE=1)"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2"),
        "{plan}"
    );
    assert!(
        plan.contains("not measured: environment candidates across processes"),
        "{plan}"
    );
    assert!(done[1].stdout.is_empty(), "{}", done[1].stdout);
}

/// Kills `victim` 1.5 s into a search whose repeats take 20 ms each: the
/// other process names it and exits 3 within 15 s of the kill.
fn killed_peer_ends_the_job(victim: usize) {
    let port = free_port();
    let args = ["--test-fake", "ok", "--test-repeat-ms", "20"];
    let mut children: Vec<Child> = (0..2).map(|r| spawn(r, port, &args)).collect();
    std::thread::sleep(Duration::from_millis(1500));
    children[victim].kill().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let done: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    let other = &done[1 - victim];
    assert_eq!(other.code, Some(3), "{}", other.stderr);
    assert!(
        other.stderr.contains(&format!("rank {victim}")),
        "{}",
        other.stderr
    );
}

#[test]
fn a_killed_peer_ends_the_search_with_its_name() {
    killed_peer_ends_the_job(1);
}

#[test]
fn a_killed_rank_0_ends_the_search_too() {
    killed_peer_ends_the_job(0);
}
