//! Every process of a `run` exits with rank 0's outcome: a pod, a task or
//! a launcher that reads any rank's exit code sees the same answer, and
//! only rank 0 says why.

mod common;

use common::{finish, free_port, torchrun_rank, Finished};
use std::time::{Duration, Instant};

/// Two processes of two CPU ranks each (each process's collectives stay
/// inside it, as the test hook says), with `extra` flags.
fn two_processes(extra: &[&str]) -> Vec<Finished> {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(120);
    let children: Vec<_> = (0..2)
        .map(|r| {
            torchrun_rank(r, 2, port)
                .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
                .args(["-b", "4K", "-e", "4K"])
                .args(extra)
                .env("COLLBENCH_TEST_CPU_PER_PROCESS", "1")
                .spawn()
                .expect("start collbench")
        })
        .collect();
    children.into_iter().map(|c| finish(c, deadline)).collect()
}

#[test]
fn wrong_results_fail_every_process_and_only_rank_0_says_why() {
    let done = two_processes(&["--test-corrupt"]);
    for (r, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(1), "rank {r}: {f:?}");
    }
    assert!(
        done[0]
            .stderr
            .contains("wrong elements: results are NOT correct"),
        "{:?}",
        done[0]
    );
    assert!(
        done[1].stdout.is_empty() && !done[1].stderr.contains("wrong"),
        "{:?}",
        done[1]
    );
}

#[test]
fn a_clean_run_passes_on_every_process() {
    for (r, f) in two_processes(&[]).iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {r}: {f:?}");
    }
}
