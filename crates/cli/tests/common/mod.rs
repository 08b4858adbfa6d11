//! Helpers shared by the CLI's integration tests (`mod common;` in each
//! test file). Each test binary uses only some of them.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::process::Child;
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
