//! `collbench preflight` under a real Slurm (ci/slurm-setup.sh: a controller
//! and two emulated nodes, n1 and n2, on this one host).
//!
//! Runs only with COLLBENCH_SLURM_TESTS=1 (CI sets it after the setup
//! script); with it set, a missing `srun` is a failure, not a skip.

mod common;

use common::{Finished, BIN};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One Slurm test at a time: the emulated cluster fits one 4-task job, and
/// a job queued behind another would spoil the timing checks.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `None` (skip) unless COLLBENCH_SLURM_TESTS=1, else the cluster's lock;
/// panics if Slurm is asked for but `srun` is not there.
fn slurm_wanted() -> Option<std::sync::MutexGuard<'static, ()>> {
    if std::env::var("COLLBENCH_SLURM_TESTS").as_deref() != Ok("1") {
        eprintln!(
            "skipped: set COLLBENCH_SLURM_TESTS=1 after ci/slurm-setup.sh to run the Slurm tests"
        );
        return None;
    }
    let found = Command::new("srun")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "COLLBENCH_SLURM_TESTS=1 but `srun --version` does not run: run ci/slurm-setup.sh first"
    );
    Some(CLUSTER.lock().unwrap_or_else(|e| e.into_inner()))
}

/// `srun -N2 -n<tasks> collbench preflight ...`, loopback only.
fn srun_preflight(tasks: usize, extra_env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new("srun");
    cmd.args(["-N2", &format!("-n{tasks}"), "--time=5"])
        .arg(BIN)
        .arg("preflight")
        .args(args);
    cmd.env("COLLBENCH_BIND", "127.0.0.1");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Waits for `child` at most `limit`.
fn finish(child: Child, limit: Duration) -> Finished {
    common::finish(child, Instant::now() + limit)
}

#[test]
fn srun_two_nodes_four_ranks_pass() {
    let Some(_cluster) = slurm_wanted() else {
        return;
    };
    let out = finish(
        srun_preflight(4, &[], &["--timeout-s", "30"])
            .spawn()
            .unwrap(),
        Duration::from_secs(120),
    );
    out.assert_passed_saying(&[
        "collbench preflight: 4 ranks on 2 hosts (launcher slurm",
        "PASS: 4 ranks on 2 hosts",
    ]);
    // Hosts are the Slurm node names (the emulated nodes share one machine).
    let hosts: Vec<&str> = out
        .stdout
        .lines()
        .skip(2)
        .take(4)
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(hosts, ["n1", "n1", "n2", "n2"], "{}", out.stdout);
}

#[test]
fn srun_with_a_rank_killed_mid_way_fails_fast_naming_it() {
    let Some(_cluster) = slurm_wanted() else {
        return;
    };
    let timeout_s = 10;
    let start = Instant::now();
    let child = srun_preflight(
        4,
        &[("COLLBENCH_TEST_DIE_AFTER_CONNECT", "2")],
        &["--timeout-s", &timeout_s.to_string()],
    )
    .spawn()
    .unwrap();
    let out = finish(child, Duration::from_secs(120));
    let took = start.elapsed();
    assert!(out.code.is_some_and(|c| c != 0), "{out:?}");
    assert!(
        took < Duration::from_secs(timeout_s + 5),
        "took {took:?}: {out:?}"
    );
    // Every surviving rank names the dead one (rank 2 is on node n2).
    let naming = out
        .stderr
        .lines()
        .filter(|l| l.contains("rank 2 on host n2 disconnected"))
        .count();
    assert_eq!(naming, 3, "{}", out.stderr);
}

#[test]
fn srun_job_refuses_a_client_with_a_wrong_token() {
    let Some(_cluster) = slurm_wanted() else {
        return;
    };
    // srun starts ranks 0-2 of a world of 4, so rank 0 keeps listening until
    // rank 3 is started by hand below; token and port are fixed so that the
    // stray and the real rank 3 know where to knock.
    let port = common::free_port().to_string();
    let rendezvous = format!("n1:{port}");
    let job_env = [
        ("COLLBENCH_PORT", port.as_str()),
        ("COLLBENCH_TOKEN", "job-token"),
        ("COLLBENCH_WORLD_SIZE", "4"),
    ];
    let mut job = srun_preflight(3, &job_env, &["--timeout-s", "60"]);
    let hand_rank_3 = |token: &str| {
        Command::new(BIN)
            .args([
                "preflight",
                "--rank",
                "3",
                "--world-size",
                "4",
                "--timeout-s",
                "60",
            ])
            .args(["--rendezvous", &rendezvous, "--token", token])
            .env("COLLBENCH_BIND", "127.0.0.1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let job = job.spawn().unwrap();
    // The stray keeps knocking until rank 0 listens, then is refused at once.
    let stray = finish(hand_rank_3("not-this-job"), Duration::from_secs(90));
    assert_eq!(stray.code, Some(3), "{stray:?}");
    assert!(
        stray.stderr.contains("refused this process") && stray.stderr.contains("wrong job token"),
        "{}",
        stray.stderr
    );
    let rank_3 = finish(hand_rank_3("job-token"), Duration::from_secs(90));
    let job = finish(job, Duration::from_secs(90));
    assert_eq!(
        (job.code, rank_3.code),
        (Some(0), Some(0)),
        "the job itself is undisturbed: {job:?} {rank_3:?}"
    );
    assert!(job.stdout.contains("PASS: 4 ranks"), "{}", job.stdout);
    let refusal = job.the_refusal("refused a connection");
    assert!(refusal.contains("wrong job token"), "{refusal}");
}
