//! `collbench tune` under a launcher (torchrun variables on loopback), on
//! the scripted fake (`--test-fake`) over the real control plane: every
//! process runs the search in lock step, only rank 0 prints, every process
//! exits with rank 0's code, and a killed peer ends the job with the usual
//! line naming it (exit 3) within a deadline. Environment candidates run
//! in child jobs (a child on every rank, their own control plane), where
//! the fake makes `NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2` 20%
//! faster and `NCCL_BUFFSIZE=8388608` 10%; a child that dies or hangs on
//! rank 1 only ends its candidate on every rank, never the search; the
//! same with four processes (four emulated hosts, child jobs of four).

mod common;

use common::{env_of, finish, free_port, torchrun_rank, Finished, TUNE_SEARCH};
use serde_json::Value;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Rank `rank` of 2 processes, each its own emulated host over sockets.
fn spawn(rank: usize, port: u16, args: &[&str]) -> Child {
    command(rank, 2, port, args)
        .spawn()
        .expect("start collbench")
}

/// The command of rank `rank` of `world_size` processes.
fn command(rank: usize, world_size: usize, port: u16, args: &[&str]) -> Command {
    let mut cmd = torchrun_rank(rank, world_size, port);
    cmd.args(TUNE_SEARCH);
    with_job_args(cmd, rank, args)
}

/// `cmd` (a search) with the options every test's job has, then `args`.
fn with_job_args(mut cmd: Command, rank: usize, args: &[&str]) -> Command {
    // 5 s ends a killed peer's job quickly; a test may give its own.
    if !args.contains(&"--timeout-s") {
        cmd.args(["--timeout-s", "5"]);
    }
    cmd.args(args)
        .env("NCCL_HOSTID", format!("emu{rank}"))
        .env("NCCL_IB_DISABLE", "1")
        .env_remove("NCCL_NET");
    cmd
}

fn job(args: &[&str]) -> Vec<Finished> {
    job_of(2, args)
}

/// A job of `world_size` processes, each its own emulated host.
fn job_of(world_size: usize, args: &[&str]) -> Vec<Finished> {
    let port = free_port();
    let children: Vec<Child> = (0..world_size)
        .map(|r| {
            command(r, world_size, port, args)
                .spawn()
                .expect("start collbench")
        })
        .collect();
    // Only a hang takes this long, even on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(240);
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
            .contains("starting 14 child processes in each of the 2 processes"),
        "{}",
        done[0].stderr
    );
    // The socket knobs ran in child jobs, and the true winner won.
    assert_socket_winner(&report);
}

/// Every band of `report` found the fake's true winner, the socket knobs
/// (20% less time), within the budget.
fn assert_socket_winner(report: &Value) {
    assert!(report["spent_us"].as_f64().unwrap() <= report["budget_us"].as_f64().unwrap());
    for b in report["bands"].as_array().unwrap() {
        let outcome = &b["outcome"];
        assert_eq!(outcome["kind"], "gain", "{outcome}");
        assert_eq!(
            env_of(&outcome["setting"]),
            "NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2"
        );
        let r = outcome["ratio"]["estimate"].as_f64().unwrap();
        assert!((r - 0.8).abs() < 0.03, "{r}");
        // Confirmed in fresh child jobs (ports agreed mid-search), four
        // process pairs.
        assert_eq!(outcome["processes"], 4, "{outcome}");
    }
}

/// Four processes, four emulated hosts: the true winner from child jobs of
/// four, and the ranks other than 0 say nothing.
#[test]
fn four_processes_find_the_socket_winner_in_child_jobs_of_four() {
    let done = job_of(4, &["--test-fake", "ok", "--format", "json"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
        if rank > 0 {
            assert!(
                f.stdout.is_empty() && f.stderr.is_empty(),
                "rank {rank}: {f:?}"
            );
        }
    }
    let report: Value = serde_json::from_str(&done[0].stdout).unwrap();
    assert_eq!(
        (report["n_nodes"].as_u64(), report["world_size"].as_u64()),
        (Some(4), Some(4))
    );
    assert_socket_winner(&report);
}

/// Rank 1's socket child of four dies: that candidate ends on all four
/// ranks, the next best wins, every process exits 0.
#[test]
fn a_child_that_dies_on_one_of_four_ranks_ends_its_candidate_on_all() {
    let done = job_of(4, &["--test-fake", "die1", "--format", "json"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let report: Value = serde_json::from_str(&done[0].stdout).unwrap();
    let socks = "NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2";
    for b in report["bands"].as_array().unwrap() {
        let status = &candidate(b, socks)["status"];
        assert_eq!(status["kind"], "failed", "{status}");
        let reason = status["reason"].as_str().unwrap();
        assert!(reason.contains("rank 1: child process with"), "{reason}");
        assert_eq!(env_of(&b["outcome"]["setting"]), "NCCL_BUFFSIZE=8388608");
    }
}

/// A band's candidate by its environment.
fn candidate<'a>(band: &'a Value, env: &str) -> &'a Value {
    band["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| env_of(&c["setting"]) == env)
        .unwrap_or_else(|| panic!("no candidate {env} in {band}"))
}

#[test]
fn the_table_shows_the_environment_winner_and_shell_its_exports() {
    let done = job(&["--test-fake", "ok", "--shell"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let out = &done[0].stdout;
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("all_reduce"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for row in rows {
        assert!(
            row.contains("NCCL_NSOCKS_PERTHREAD=2, NCCL_SOCKET_NTHREADS=2"),
            "{out}"
        );
    }
    assert!(out.contains("export NCCL_NSOCKS_PERTHREAD=2\n"), "{out}");
    assert!(out.contains("export NCCL_SOCKET_NTHREADS=2\n"), "{out}");
    assert!(done[1].stdout.is_empty(), "{}", done[1].stdout);
}

/// `mode` makes the 2x2 socket child of rank 1 die or hang: that
/// candidate ends on both ranks with rank 1's reason (and rank 0's, where
/// its child saw the broken child job), the next best
/// (NCCL_BUFFSIZE=8388608) wins, confirmed in fresh process pairs, every
/// process exits 0.
fn a_faulty_child_on_rank_1_ends_its_candidate_only(
    mode: &str,
    rank_1_says: &str,
    rank_0_says: Option<&str>,
) {
    let t = Instant::now();
    // Healthy children must answer within the child timeout (three
    // quarters of --timeout-s) while 4-process tests load the same cores:
    // 5 s failed every candidate there (no winner), so 20 s.
    // The budget grows by the time the hung child may take, so the
    // confirmation still gets its fresh process pairs.
    let port = free_port();
    let search = TUNE_SEARCH.map(|a| if a == "60s" { "120s" } else { a });
    let args = ["--test-fake", mode, "--format", "json", "--timeout-s", "20"];
    let children: Vec<Child> = (0..2)
        .map(|r| {
            let mut cmd = torchrun_rank(r, 2, port);
            cmd.args(search);
            with_job_args(cmd, r, &args)
                .spawn()
                .expect("start collbench")
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(240);
    let done: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    assert!(t.elapsed() < Duration::from_secs(200), "{:?}", t.elapsed());
    let report: Value = serde_json::from_str(&done[0].stdout).unwrap();
    assert_eq!(report["end"]["kind"], "complete");
    let socks = "NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2";
    for b in report["bands"].as_array().unwrap() {
        let status = &candidate(b, socks)["status"];
        assert_eq!(status["kind"], "failed", "{status}");
        let reason = status["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "rank 1: child process with {socks}: {rank_1_says}"
            )),
            "{reason}"
        );
        match rank_0_says {
            Some(says) => assert!(reason.contains(&format!("rank 0: {says}")), "{reason}"),
            None => assert!(!reason.contains("rank 0:"), "{reason}"),
        }
        let outcome = &b["outcome"];
        assert_eq!(env_of(&outcome["setting"]), "NCCL_BUFFSIZE=8388608");
        assert_eq!(outcome["processes"], 4, "{outcome}");
    }
    let ended: Vec<&str> = done[0]
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("candidate {socks} ended (the search goes on)")))
        .collect();
    assert_eq!(ended.len(), 1, "{}", done[0].stderr);
    assert!(done[1].stderr.is_empty(), "{}", done[1].stderr);
}

#[test]
fn a_child_that_dies_on_rank_1_ends_its_candidate_on_every_rank() {
    a_faulty_child_on_rank_1_ends_its_candidate_only(
        "die1",
        "exited (exit status: 3)",
        Some("its child job:"),
    );
}

#[test]
fn a_child_that_hangs_on_rank_1_is_killed_and_ends_its_candidate() {
    a_faulty_child_on_rank_1_ends_its_candidate_only(
        "hang1",
        "no answer within 15 s",
        Some("its child job:"),
    );
}

/// Rank 1's 2x2 child dies as it starts when renewed (the confirmation's
/// fresh processes): the renewal fails on rank 1 only (rank 0's new child
/// got ready), the candidate ends on both, the next best wins.
#[test]
fn a_renewed_child_that_dies_on_rank_1_ends_its_candidate_on_every_rank() {
    a_faulty_child_on_rank_1_ends_its_candidate_only(
        "renew1",
        "exited (exit status: 3) during start",
        None,
    );
}

/// 2x2's speed differs by process pair (`spread`): the budget left after
/// the search buys its figures more fresh process pairs, in lock step on
/// both ranks (every renewal a new child job), within the budget.
#[test]
fn two_processes_refine_the_shell_settings_figures_in_more_process_pairs() {
    let done = job(&["--test-fake", "spread", "--format", "json"]);
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let report: Value = serde_json::from_str(&done[0].stdout).expect("rank 0's JSON");
    assert!(report["spent_us"].as_f64().unwrap() <= report["budget_us"].as_f64().unwrap());
    let pw = &report["process_wide"];
    assert_eq!(pw["setting"]["env"][0][1], "2", "{pw}");
    assert!(pw["refine_spent_us"].as_f64().unwrap() > 0.0, "{pw}");
    let most = report["bands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["outcome"]["processes"].as_u64())
        .max();
    assert!(most > Some(4), "{report}");
    assert!(
        done[0]
            .stderr
            .contains("(refine, fresh process pair 5 of 16)"),
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
    let socks = plan
        .lines()
        .find(|l| l.contains("NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2"))
        .unwrap();
    assert!(socks.contains("in children"), "{plan}");
    assert!(plan.contains(" 0 not measured"), "{plan}");
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

/// Kills rank 1 while rank 0 screens an environment candidate (child
/// jobs whose repeats take 20 ms): rank 0 names it and exits 3 within
/// 15 s, and no child process of the job outlives its parent for long
/// (a child ends at the end of its stdin).
#[test]
fn a_parent_killed_during_a_child_round_ends_the_job_and_leaves_no_children() {
    let port = free_port();
    let token = format!("tune-kill-{port}");
    let log = std::env::temp_dir().join(format!("collbench-{token}.stderr"));
    let args = [
        "--test-fake",
        "ok",
        "--test-repeat-ms",
        "20",
        "--token",
        &token,
    ];
    let mut rank0 = command(0, 2, port, &args);
    rank0.stderr(std::fs::File::create(&log).unwrap());
    let mut rank0 = rank0.spawn().unwrap();
    let mut rank1 = spawn(1, port, &args);
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("NCCL_BUFFSIZE=8388608 (screen)")
    {
        assert!(
            Instant::now() < until,
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    rank1.kill().unwrap();
    let _ = rank1.wait();
    let code = exit_by(&mut rank0, Instant::now() + Duration::from_secs(15));
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.lines().last().unwrap().contains("rank 1"),
        "{stderr}"
    );
    let until = Instant::now() + Duration::from_secs(10);
    while !children_with(&token).is_empty() {
        assert!(
            Instant::now() < until,
            "left behind: {:?}",
            children_with(&token)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&log);
}

/// The exit code of `child` if it exits by `deadline` (else it is killed).
fn exit_by(child: &mut Child, deadline: Instant) -> Option<i32> {
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Pids of `tune --serve-measure` children whose arguments carry `token`.
fn children_with(token: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline);
        (text.contains(token) && text.contains("--serve-measure")).then_some(pid)
    })
    .collect()
}

/// The whole job ends within `--budget`, joining and ending included: the
/// search charges its wall time (the processes' agreement between paced
/// repeats too, not only the measurer's costs) and leaves the time its 14
/// children per process take to end, all at once (before: 17 s for a 12 s
/// budget here, and 21 s past a 10-minute budget on two emulated hosts).
#[test]
fn a_search_that_spends_its_budget_ends_within_it_children_and_all() {
    let budget = Duration::from_secs(12);
    // The usual search, on a budget it spends.
    let search = TUNE_SEARCH.map(|a| if a == "60s" { "12s" } else { a });
    let args = [
        "--test-fake",
        "spread",
        "--test-repeat-ms",
        "20",
        "--format",
        "json",
    ];
    let port = free_port();
    let started = Instant::now();
    let ranks: Vec<Child> = (0..2)
        .map(|r| {
            let mut cmd = torchrun_rank(r, 2, port);
            cmd.args(search);
            with_job_args(cmd, r, &args)
                .spawn()
                .expect("start collbench")
        })
        .collect();
    let deadline = started + Duration::from_secs(60);
    let done: Vec<Finished> = ranks.into_iter().map(|c| finish(c, deadline)).collect();
    let wall = started.elapsed();
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let report: Value = serde_json::from_str(&done[0].stdout).expect("rank 0's JSON");
    let (spent, given) = (
        report["spent_us"].as_f64().unwrap(),
        report["budget_us"].as_f64().unwrap(),
    );
    assert!(spent > 0.6 * given, "spent {spent} of {given} us");
    assert!(wall <= budget, "{wall:?} for a {budget:?} budget");
}
