//! Helpers shared by the CLI's integration tests (`mod common;` in each
//! test file). Each test binary uses only some of them.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `collbench` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_collbench");

/// `collbench` as an assert_cmd command.
pub fn collbench() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("collbench").unwrap()
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What one finished process said.
#[derive(Debug)]
pub struct Finished {
    /// Exit code; `None` when it was killed at the deadline.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for `child` (spawned with piped stdout and stderr) until
/// `deadline`, killing it after (then code `None`).
pub fn finish(mut child: Child, deadline: Instant) -> Finished {
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Finished {
        code,
        stdout,
        stderr,
    }
}

/// `collbench` as rank `rank` of `n` processes on loopback, torchrun style
/// (no launcher needed), output piped; the caller adds the command.
pub fn torchrun_rank(rank: usize, n: usize, port: u16) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("RANK", rank.to_string())
        .env("WORLD_SIZE", n.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("LOCAL_WORLD_SIZE", n.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("COLLBENCH_BIND", "127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The test may itself run under a launcher; keep only ours.
    for var in [
        "SLURM_PROCID",
        "SLURM_STEP_ID",
        "SLURM_STEPID",
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "JOB_COMPLETION_INDEX",
        "COLLBENCH_RANK",
        "COLLBENCH_WORLD_SIZE",
        "COLLBENCH_RENDEZVOUS",
        "COLLBENCH_PORT",
        "COLLBENCH_TOKEN",
        "SLURMD_NODENAME",
        "TORCHELASTIC_USE_AGENT_STORE",
        "COLLBENCH_TEST_DIE_AFTER_CONNECT",
    ] {
        cmd.env_remove(var);
    }
    cmd
}
