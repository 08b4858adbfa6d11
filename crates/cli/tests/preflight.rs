//! `collbench preflight` end to end: several processes of the real binary
//! on loopback, started with torchrun-style variables (no launcher needed).

mod common;

use common::{finish, free_port, Finished, BIN};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// `collbench preflight` as rank `rank` of `n`, torchrun style, on loopback.
fn rank_command(rank: usize, n: usize, port: u16) -> Command {
    let mut cmd = common::torchrun_rank(rank, n, port);
    cmd.arg("preflight");
    cmd
}

fn spawn_all(n: usize, port: u16, extra: impl Fn(usize, &mut Command)) -> Vec<Child> {
    (0..n)
        .map(|rank| {
            let mut cmd = rank_command(rank, n, port);
            extra(rank, &mut cmd);
            cmd.spawn().expect("start collbench")
        })
        .collect()
}

#[test]
fn four_torchrun_style_processes_pass_preflight() {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(60);
    let children = spawn_all(4, port, |_, cmd| {
        cmd.args(["--timeout-s", "30"]);
    });
    let outcomes: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    let root = &outcomes[0];
    root.assert_passed_saying(&[
        "collbench preflight: 4 ranks on 1 host",
        "launcher torchrun",
    ]);
    assert!(
        root.stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("PASS: 4 ranks on 1 host"),
        "{}",
        root.stdout
    );
    // One table line per rank, in rank order.
    let rank_column: Vec<&str> = root
        .stdout
        .lines()
        .skip(2)
        .take(4)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(rank_column, ["0", "1", "2", "3"], "{}", root.stdout);
    for (rank, other) in outcomes.iter().enumerate().skip(1) {
        assert_eq!(other.code, Some(0), "rank {rank}: {other:?}");
        assert_eq!(
            other.stdout, "",
            "rank {rank} must print nothing on success"
        );
    }
}

#[test]
fn json_report_lists_every_rank() {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(60);
    let children = spawn_all(2, port, |_, cmd| {
        cmd.args(["--format", "json", "--timeout-s", "30"]);
    });
    let outcomes: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    assert_eq!(outcomes[0].code, Some(0), "{:?}", outcomes[0]);
    let report: serde_json::Value =
        serde_json::from_str(&outcomes[0].stdout).expect("rank 0 prints JSON");
    assert_eq!(report["verdict"], "PASS");
    assert_eq!(report["world_size"], 2);
    assert_eq!(report["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(report["ranks"][1]["rank"], 1);
    assert!(
        report["ranks"][1]["info"]["collbench_version"].is_string(),
        "{report}"
    );
}

#[test]
fn a_rank_killed_mid_way_is_named_and_everyone_exits_non_zero_quickly() {
    let timeout_s = 10;
    let port = free_port();
    let start = Instant::now();
    let children = spawn_all(4, port, |_, cmd| {
        cmd.args(["--timeout-s", &timeout_s.to_string()])
            .env("COLLBENCH_TEST_DIE_AFTER_CONNECT", "2");
    });
    let outcomes: Vec<Finished> = children
        .into_iter()
        .map(|c| finish(c, start + Duration::from_secs(timeout_s + 30)))
        .collect();
    assert!(
        start.elapsed() < Duration::from_secs(timeout_s + 5),
        "took {:?}",
        start.elapsed()
    );
    for (rank, outcome) in outcomes.iter().enumerate() {
        assert_ne!(outcome.code, Some(0), "rank {rank}: {outcome:?}");
        assert!(outcome.code.is_some(), "rank {rank} hung: {outcome:?}");
        if rank != 2 {
            assert_eq!(outcome.code, Some(3), "rank {rank}: {outcome:?}");
            assert!(
                outcome.stderr.contains("rank 2 on host"),
                "rank {rank} must name rank 2: {}",
                outcome.stderr
            );
            assert!(
                outcome.stderr.contains("disconnected"),
                "rank {rank}: {}",
                outcome.stderr
            );
        }
    }
}

#[test]
fn a_client_with_a_wrong_token_is_refused_and_the_job_still_passes() {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(60);
    let root = rank_command(0, 2, port)
        .args(["--timeout-s", "30"])
        .spawn()
        .unwrap();
    let stray = rank_command(1, 2, port)
        .args(["--timeout-s", "30", "--token", "another-job"])
        .spawn()
        .unwrap();
    let stray = finish(stray, deadline);
    assert_eq!(stray.code, Some(3), "{stray:?}");
    assert!(
        stray.stderr.contains("refused") && stray.stderr.contains("wrong job token"),
        "{}",
        stray.stderr
    );
    let good = rank_command(1, 2, port)
        .args(["--timeout-s", "30"])
        .spawn()
        .unwrap();
    let good = finish(good, deadline);
    let root = finish(root, deadline);
    assert_eq!(
        (root.code, good.code),
        (Some(0), Some(0)),
        "{root:?} {good:?}"
    );
    let refusal = root.the_refusal("refused");
    assert!(refusal.contains("wrong job token"), "{refusal}");
}

#[test]
fn missing_ranks_fail_with_a_table_naming_them() {
    let port = free_port();
    let start = Instant::now();
    let children = spawn_all(2, port, |_, cmd| {
        // A world of 3 of which only ranks 0 and 1 start.
        cmd.env("WORLD_SIZE", "3").args(["--timeout-s", "2"]);
    });
    let outcomes: Vec<Finished> = children
        .into_iter()
        .map(|c| finish(c, start + Duration::from_secs(30)))
        .collect();
    assert!(
        start.elapsed() < Duration::from_secs(2 + 5),
        "took {:?}",
        start.elapsed()
    );
    let root = &outcomes[0];
    assert_eq!(root.code, Some(3), "{root:?}");
    assert!(
        root.stdout.contains("2 of 3 ranks on 1 host"),
        "{}",
        root.stdout
    );
    assert!(root.stdout.contains("(missing)"), "{}", root.stdout);
    assert!(
        root.stdout.contains("FAIL: rank 2 did not join within 2 s"),
        "{}",
        root.stdout
    );
    assert_eq!(outcomes[1].code, Some(3), "{:?}", outcomes[1]);
    assert!(
        outcomes[1].stderr.contains("rank 2 did not join"),
        "{}",
        outcomes[1].stderr
    );
}

#[test]
fn rank_above_zero_without_rendezvous_is_told_what_to_set() {
    let out = Command::new(BIN)
        .arg("preflight")
        .env("OMPI_COMM_WORLD_RANK", "1")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env_remove("COLLBENCH_RENDEZVOUS")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("set COLLBENCH_RENDEZVOUS=HOST:PORT"),
        "{stderr}"
    );
}

#[test]
fn single_process_passes_without_sockets() {
    let out = rank_command(0, 1, 1)
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("collbench preflight: 1 rank on 1 host"),
        "{stdout}"
    );
    assert!(stdout.contains("PASS"), "{stdout}");
}
