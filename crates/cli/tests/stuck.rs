//! A collective that never completes names who is behind, in one line on
//! every process, and ends with exit 5; a rank that dies is named by every
//! other within the timeout. The fault hooks (hidden flags) make ranks
//! misbehave: one that stops calling, one that stalls in a call, one that
//! exits mid-run; kill -9 does the rest.
//!
//! Several processes need a collective that spans them, which CI (no
//! GPUs) lacks: `COLLBENCH_TEST_CPU_PER_PROCESS=1` lets each process run
//! one CPU rank thread that meets the others through the control plane
//! after every operation, so a rank that stops holds every process up as
//! in a real collective. Everything else (progress in heartbeats, rank 0's
//! diagnosis, the job's stop, exit codes) is what a GPU job runs.

mod common;

use common::{collbench, cpu_run, finish, free_port, torchrun_rank, Finished};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const PREFIX: &str = "collbench: stuck collective: ";

/// The lines of `stderr` that say the job is stuck.
fn stuck_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with(PREFIX)).collect()
}

/// One process running all_reduce of 1 KiB on `ranks` CPU rank threads
/// on host n7, with `args`: its exit code and stderr.
fn one_process(ranks: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = cpu_run("all_reduce", ranks)
        .args(["-b", "1K", "-e", "1K"])
        .args(args)
        .env("SLURMD_NODENAME", "n7")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

#[test]
fn one_process_names_the_rank_thread_that_stopped_calling() {
    // Four rank threads, one stops: it is behind. One alone: nobody is
    // behind, and nobody is inside the library either.
    let cases = [
        ("4", "2:0:3", "rank 2 (host n7) never entered; 3 ranks waiting"),
        ("1", "0:0:3", "its only rank never entered it: the process stopped calling, nothing is inside the library"),
    ];
    for (ranks, hook, says) in cases {
        let (code, stderr) = one_process(ranks, &["--watchdog", "1", "--test-stop-calling", hook]);
        assert_eq!(code, Some(5), "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!("{PREFIX}all_reduce 1 KiB iteration 3: {says} (no progress for 1 s)")
        );
    }
}

#[test]
fn minus_t_replaces_the_watchdog_and_a_rank_asleep_for_less_passes() {
    // -T 1 wins over --watchdog 600: the run ends within seconds.
    let start = Instant::now();
    let hook = ["--test-sleep-in-call", "1:1:0"];
    let (code, stderr) = one_process(
        "3",
        &[&["-T", "1", "--watchdog", "600"][..], &hook].concat(),
    );
    assert_eq!(code, Some(5), "{stderr}");
    let took = start.elapsed();
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert_eq!(
        stuck_lines(&stderr),
        [format!("{PREFIX}all_reduce 1 KiB in place iteration 0: rank 1 (host n7) stuck inside the call; 2 ranks waiting (no progress for 1 s)")],
    );
    // One second asleep against a 5 s deadline: slow, not stuck.
    let (code, stderr) = one_process("3", &["--watchdog", "5", "--test-sleep-in-call", "1:0:1:1"]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn check_ends_on_a_stuck_collective_as_run_does() {
    let out = collbench()
        .args(["check", "--backend", "cpu", "--ranks", "2"])
        .args(["--watchdog", "1", "--test-stop-calling", "1:0:2"])
        .env("SLURMD_NODENAME", "n3")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    let lines = stuck_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains(" iteration 2: rank 1 (host n3) never entered; 1 rank waiting"),
        "{stderr}"
    );
}

/// Rank `rank` of 4 processes on loopback, torchrun style, hosts n1 (ranks
/// 0, 1) and n2 (ranks 2, 3), each with one CPU rank thread.
fn rank_command(rank: usize, port: u16, args: &[&str]) -> Command {
    let mut cmd = torchrun_rank(rank, 4, port);
    cmd.args(["run", "all_reduce", "--backend", "cpu", "--ranks", "1"])
        .args(args)
        .env("COLLBENCH_TEST_CPU_PER_PROCESS", "1")
        .env("SLURMD_NODENAME", format!("n{}", rank / 2 + 1));
    cmd
}

fn spawn_job(args: &[&str]) -> Vec<Child> {
    let port = free_port();
    (0..4)
        .map(|r| {
            rank_command(r, port, args)
                .spawn()
                .expect("start collbench")
        })
        .collect()
}

/// Runs 4 processes with `args`; what each said, and the wall time.
fn job(args: &[&str]) -> (Vec<Finished>, Duration) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let done = spawn_job(args)
        .into_iter()
        .map(|c| finish(c, deadline))
        .collect();
    (done, start.elapsed())
}

/// Every process printed exactly `line` (as its only stuck line) and
/// exited 5, within the deadline and a few seconds.
fn all_say(done: &[Finished], took: Duration, line: &str) {
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(5), "rank {rank}: {}", f.stderr);
        let said: Vec<&str> = f.stderr.lines().collect();
        assert_eq!(said, [line], "rank {rank}: one line, the same everywhere");
    }
    assert!(took < Duration::from_secs(2 + 10), "{took:?}");
}

const SWEEP: [&str; 10] = [
    "-b",
    "1K",
    "-e",
    "2K",
    "-f",
    "2",
    "-T",
    "2",
    "--timeout-s",
    "10",
];

#[test]
fn four_processes_name_a_rank_that_stops_calling() {
    let (done, took) = job(&[&SWEEP[..], &["--test-stop-calling", "2:1:3"]].concat());
    all_say(
        &done,
        took,
        &format!("{PREFIX}all_reduce 1 KiB in place iteration 3: rank 2 (host n2) never entered; 3 ranks waiting (no progress for 2 s)"),
    );
}

#[test]
fn rank_0_names_itself_when_it_is_the_one_that_stopped() {
    // Rank 0 holds the table; its watchdog thread decides while its main
    // thread is held by the hook.
    let (done, took) = job(&[&SWEEP[..], &["--test-stop-calling", "0:0:1"]].concat());
    all_say(
        &done,
        took,
        &format!("{PREFIX}all_reduce 1 KiB iteration 1: rank 0 (host n1) never entered; 3 ranks waiting (no progress for 2 s)"),
    );
}

#[test]
fn four_processes_name_a_rank_asleep_in_a_call() {
    let (done, took) = job(&[&SWEEP[..], &["--test-sleep-in-call", "1:2:2"]].concat());
    all_say(
        &done,
        took,
        &format!("{PREFIX}all_reduce 2 KiB iteration 2: rank 1 (host n1) stuck inside the call; 3 ranks waiting (no progress for 2 s)"),
    );
}

#[test]
fn four_processes_name_a_rank_that_exits_mid_run() {
    let (done, took) = job(&[&SWEEP[..], &["--test-exit", "3:0:4"]].concat());
    assert_eq!(done[3].code, Some(1), "{}", done[3].stderr);
    for (rank, f) in done.iter().enumerate().take(3) {
        assert_eq!(f.code, Some(3), "rank {rank}: {}", f.stderr);
        let lines: Vec<&str> = f.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "rank {rank}: {}", f.stderr);
        assert!(
            lines[0].contains("rank 3 on host n2 disconnected"),
            "rank {rank}: {}",
            f.stderr
        );
    }
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// Rank `stopped` of 4 processes is stopped with SIGSTOP inside a long
/// case: its socket stays open and nothing is behind by its last word,
/// only its heartbeats stop. Returns what each other process said and
/// how long after the stop the last of them ended. The stopped one is
/// then continued: its job is over, and it must see that and leave within
/// 5 s, non-zero ([`Continued`]).
fn sigstop_trial(stopped: usize) -> (Vec<Finished>, Duration, Continued) {
    // --timeout-s 60: the control plane's own verdict on silence would
    // come a minute later; the watchdog (-T 2) must name it first.
    let args: Vec<&str> = "-b 1K -e 1K -w 1 -n 1000000 -T 2 --timeout-s 60"
        .split(' ')
        .collect();
    let mut children = spawn_job(&args);
    std::thread::sleep(Duration::from_secs(3));
    let pid = children[stopped].id().to_string();
    let status = Command::new("kill").args(["-STOP", &pid]).status();
    let stopped_at = Instant::now();
    let frozen = children.remove(stopped);
    let done: Vec<Finished> = children
        .into_iter()
        .map(|c| finish(c, stopped_at + Duration::from_secs(30)))
        .collect();
    let took = stopped_at.elapsed();
    assert!(status.is_ok_and(|s| s.success()), "kill -STOP {pid}");
    let resumed = Command::new("kill").args(["-CONT", &pid]).status();
    assert!(resumed.is_ok_and(|s| s.success()), "kill -CONT {pid}");
    let continued_at = Instant::now();
    let frozen = finish(frozen, continued_at + Duration::from_secs(15));
    let continued = Continued {
        code: frozen.code,
        took: continued_at.elapsed(),
        stderr: frozen.stderr,
    };
    (done, took, continued)
}

/// How the stopped process ended once continued after its job was over.
struct Continued {
    code: Option<i32>,
    took: Duration,
    stderr: String,
}

impl Continued {
    /// Left within 5 s of being continued, with the code of a failed job
    /// (5: it got the job's stuck line; 3: it found its peers gone).
    fn left_in_time(&self) {
        assert!(
            matches!(self.code, Some(3 | 5)),
            "continued: {:?} {}",
            self.code,
            self.stderr
        );
        assert!(
            self.took < Duration::from_secs(5),
            "continued: {:?}",
            self.took
        );
        assert_eq!(self.stderr.lines().count(), 1, "continued: {}", self.stderr);
    }
}

#[test]
fn a_rank_stopped_with_sigstop_is_named_as_silent_by_every_other() {
    let (done, took, continued) = sigstop_trial(2);
    continued.left_in_time();
    let line = &done[0].stderr;
    eprintln!("{took:?} after the stop: {line}");
    for (i, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(5), "process {i}: {}", f.stderr);
        assert_eq!(&f.stderr, line, "process {i}: the same line everywhere");
    }
    let lines: Vec<&str> = line.lines().collect();
    assert_eq!(lines.len(), 1, "{line}");
    assert!(
        lines[0].starts_with(&format!("{PREFIX}all_reduce 1 KiB")),
        "{line}"
    );
    assert!(
        lines[0].contains(": rank 2 (host n2) silent for "),
        "{line}"
    );
    assert!(
        lines[0].ends_with("(stopped, hung or cut off); 3 ranks waiting (no progress for 2 s)"),
        "{line}"
    );
    // Within -T + 5 s of the stop: silence is known three heartbeats
    // (of 2 s at most) after the last one, whatever --timeout-s says.
    assert!(took < Duration::from_secs(2 + 5), "{took:?}");
}

#[test]
fn a_stopped_rank_0_is_named_by_every_other_rank_itself() {
    // Rank 0 holds the table but is stopped: each waiting process sees
    // rank 0's heartbeats stop and says so for itself.
    let (done, took, continued) = sigstop_trial(0);
    continued.left_in_time();
    eprintln!("{took:?} after the stop: {}", done[0].stderr);
    for (i, f) in done.iter().enumerate() {
        let rank = i + 1;
        assert_eq!(f.code, Some(5), "rank {rank}: {}", f.stderr);
        let lines: Vec<&str> = f.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "rank {rank}: {}", f.stderr);
        let host = format!("n{}", rank / 2 + 1);
        assert!(lines[0].starts_with(PREFIX), "{}", lines[0]);
        assert!(
            lines[0].contains(": rank 0 (host n1) silent for "),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains(&format!("; rank {rank} (host {host}) wait")),
            "{}",
            lines[0]
        );
    }
    assert!(took < Duration::from_secs(2 + 5), "{took:?}");
}

/// A small deterministic generator (no dev-dependency for randomness);
/// the seed is printed so a failing trial can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// One trial: 4 processes sweeping for long, rank `victim` killed with
/// SIGKILL `after` the start; every other rank must exit within the
/// timeout (the larger of `-T` and `--timeout-s`, which a kill before
/// the rendezvous waits out) + 5 s of the kill, naming the victim, with
/// exit 3 (a peer died). `--timeout-s 4`: a busy two-core machine must
/// not make a healthy rank look silent.
fn kill_trial(victim: usize, after: Duration) -> Result<(), String> {
    let timeout_s = 4;
    let sweep = [
        "-b", "8", "-e", "64K", "-f", "2", "-n", "20", "-N", "100000",
    ];
    let limits = ["-T", "2", "--timeout-s", "4"];
    let args = [&sweep[..], &limits].concat();
    let mut children = spawn_job(&args);
    std::thread::sleep(after);
    let killed_at = Instant::now();
    children[victim].kill().map_err(|e| format!("kill: {e}"))?;
    let deadline = killed_at + Duration::from_secs(timeout_s + 5);
    let done: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    for (rank, f) in done.iter().enumerate().filter(|(r, _)| *r != victim) {
        let named = f.stderr.contains(&format!("rank {victim} "))
            || f.stderr.contains(&format!("rank {victim}:"));
        match f.code {
            None => {
                return Err(format!(
                    "rank {rank} still ran {timeout_s} + 5 s after the kill"
                ))
            }
            Some(code) if code != 3 => {
                return Err(format!("rank {rank} exited {code}, not 3: {}", f.stderr))
            }
            Some(_) if !named => {
                return Err(format!(
                    "rank {rank} did not name rank {victim}: {}",
                    f.stderr
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[test]
fn kill_9_of_a_random_rank_at_a_random_moment_is_named_by_every_other_20_of_20() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Lcg(seed);
    let trials: Vec<(usize, Duration)> = (0..20)
        .map(|_| {
            (
                rng.next(4) as usize,
                Duration::from_millis(100 + rng.next(1500)),
            )
        })
        .collect();
    // Five trials at a time keep the wall time modest on two cores.
    let mut failures = Vec::new();
    for batch in trials.chunks(5) {
        let results: Vec<_> = std::thread::scope(|s| {
            let running: Vec<_> = batch
                .iter()
                .map(|&(victim, after)| s.spawn(move || kill_trial(victim, after)))
                .collect();
            running.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for ((victim, after), r) in batch.iter().zip(results) {
            if let Err(e) = r {
                failures.push(format!("rank {victim} killed after {after:?}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
}

/// No exit code follows a message's wording: with every line's leading
/// `collbench` rewritten (COLLBENCH_TEST_MESSAGE_PREFIX), a stuck
/// collective still ends with 5 and a lost peer with 3.
#[test]
fn reworded_lines_keep_the_stuck_and_the_peer_exit_codes() {
    const WORD: (&str, &str) = ("COLLBENCH_TEST_MESSAGE_PREFIX", "XYZ");
    let out = cpu_run("all_reduce", "4")
        .args(["-b", "1K", "-e", "1K", "--watchdog", "1"])
        .args(["--test-stop-calling", "2:0:3"])
        .env(WORD.0, WORD.1)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.starts_with("XYZ: stuck collective: "), "{stderr}");

    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(60);
    let args = [&SWEEP[..], &["--test-exit", "3:0:4"]].concat();
    let children: Vec<Child> = (0..4)
        .map(|r| {
            rank_command(r, port, &args)
                .env(WORD.0, WORD.1)
                .spawn()
                .expect("start collbench")
        })
        .collect();
    let done: Vec<Finished> = children.into_iter().map(|c| finish(c, deadline)).collect();
    for (rank, f) in done.iter().enumerate().take(3) {
        assert_eq!(f.code, Some(3), "rank {rank}: {}", f.stderr);
        assert!(
            f.stderr.starts_with("XYZ: ") && f.stderr.contains("rank 3 on host n2 disconnected"),
            "rank {rank}: {}",
            f.stderr
        );
    }
}
