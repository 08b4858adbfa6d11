//! Helpers shared by the CLI's integration tests (`mod common;` in each
//! test file). Each test binary uses only some of them.
#![allow(dead_code)]

pub mod source;

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `collbench` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_collbench");

/// `collbench` as an assert_cmd command.
pub fn collbench() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("collbench").unwrap()
}

/// The tune tests' search: all_reduce from 1M to 4M in a 60 s budget
/// (on the scripted fake, `--test-fake`, it takes well under a second).
pub const TUNE_SEARCH: [&str; 8] = [
    "tune",
    "all_reduce",
    "-b",
    "1M",
    "-e",
    "4M",
    "--budget",
    "60s",
];

/// `collbench run <op> --backend cpu --ranks <ranks>`, more arguments to
/// follow.
pub fn cpu_run(op: &str, ranks: &str) -> assert_cmd::Command {
    let mut c = collbench();
    c.args(["run", op, "--backend", "cpu", "--ranks", ranks]);
    c
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Asserts that `text` says each of `parts`.
pub fn assert_says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing:\n{text}");
    }
}

/// The `<op>_perf` alias of `collbench` in `dir`: a symlink named `name`.
pub fn alias(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let link = dir.join(name);
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    link
}

/// Exit code (-1 when killed by a signal), stdout and stderr of `cmd`.
pub fn run(cmd: &mut assert_cmd::Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// stdout of `out`, which must have succeeded (its stderr and `what` in
/// the failure message).
pub fn ok_stdout(out: Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {:?}\n{err}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// stdout of `cmd`, which must succeed.
pub fn stdout_ok(cmd: &mut assert_cmd::Command) -> String {
    ok_stdout(cmd.output().unwrap(), "")
}

/// stderr of `out`, a refusal as every user mistake must be: exit `code`,
/// one line, no panic.
pub fn one_line_refusal(out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// stderr of `cmd`, which must be refused with a one-line usage error
/// (exit 2).
pub fn usage_error(cmd: &mut assert_cmd::Command) -> String {
    one_line_refusal(&cmd.output().unwrap(), 2)
}

/// `mpirun -np <np> <mpi_args> collbench <args>`, as root where CI runs
/// (more ranks than cores need `--oversubscribe`).
pub fn mpirun(np: usize, mpi_args: &[&str], args: &[&str]) -> Output {
    let np = np.to_string();
    let out = assert_cmd::Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", &np])
        .args(mpi_args)
        .arg(BIN)
        .args(args)
        .timeout(Duration::from_secs(300))
        .output();
    out.unwrap_or_else(|e| {
        panic!("cannot start mpirun ({e}): install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
    })
}

/// One result row of nccl-tests text, the columns a check reads.
#[derive(Debug)]
pub struct Row {
    pub size: u64,
    pub dtype: String,
    /// #wrong out-of-place.
    pub oop: String,
    /// #wrong in-place (`N/A` where not checked).
    pub ip: String,
}

/// The result rows of nccl-tests text (every one has 13 columns).
pub fn rows(stdout: &str) -> Vec<Row> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 13, "row has 13 columns: {l}");
            Row {
                size: f[0].parse().unwrap(),
                dtype: f[2].to_string(),
                oop: f[8].to_string(),
                ip: f[12].to_string(),
            }
        })
        .collect()
}

/// A `--test-corrupt` run of `op` at one size: exit 1, the one element
/// counted once in each checked placement, the run marked FAILED and the
/// wrong elements named on stderr. Returns stdout.
pub fn assert_corrupted_once(out: &Output, op: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{op}: {stdout}\n{stderr}");
    let rows = rows(&stdout);
    assert_eq!(rows.len(), 1, "{op}");
    assert_eq!(rows[0].oop, "1", "{op}: out-of-place #wrong");
    let ip = &rows[0].ip;
    assert!(ip == "1" || ip == "N/A", "{op}: in-place #wrong {ip}");
    assert!(stdout.contains("FAILED"), "{op}");
    assert!(stderr.contains("wrong elements"), "{op}");
    stdout
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    collbench_launch::World::free_loopback_port().unwrap()
}

/// What one finished process said.
#[derive(Debug)]
pub struct Finished {
    /// Exit code; `None` when it was killed at the deadline.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Asserts that the process exited 0 and that its stdout says each of
    /// `parts`.
    pub fn assert_passed_saying(&self, parts: &[&str]) {
        assert_eq!(self.code, Some(0), "{self:?}");
        assert_says(&self.stdout, parts);
    }

    /// The one line of rank 0's stderr that says `refused`: rank 0 logs
    /// one line per refused connection.
    pub fn the_refusal(&self, refused: &str) -> &str {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.contains(refused))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "rank 0 logs one line per refusal: {}",
            self.stderr
        );
        lines[0]
    }
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

/// A CPU `check` of 4 processes as 4 hosts (torchrun style, 2 rank
/// threads each, each process timed on its own), each rank's command
/// finished by `rank_args` (sizes, host name, outputs, fault hooks);
/// every process's result, rank 0 first.
pub fn four_host_check(rank_args: impl Fn(usize, &mut Command)) -> Vec<Finished> {
    let port = free_port();
    let deadline = Instant::now() + Duration::from_secs(240);
    let children: Vec<_> = (0..4)
        .map(|r| {
            let mut cmd = torchrun_rank(r, 4, port);
            cmd.args(["check", "--backend", "cpu", "--ranks", "2"])
                .env("COLLBENCH_TEST_CPU_PER_PROCESS", "1");
            rank_args(r, &mut cmd);
            cmd.spawn().expect("start collbench")
        })
        .collect();
    children.into_iter().map(|c| finish(c, deadline)).collect()
}

/// [`four_host_check`] with the tests between host groups slowed to 0.2x
/// by the test hook; `rank_args` adds the groups, host names and API. The
/// group-link tests of plain hosts and of Kubernetes nodes share it.
pub fn group_link_job(rank_args: impl Fn(usize, &mut Command)) -> Vec<Finished> {
    four_host_check(|r, cmd| {
        cmd.args(["--size", "8M", "-n", "20", "--quick"])
            .env("COLLBENCH_TEST_GROUP_LINK", "0.2");
        rank_args(r, cmd);
    })
}

/// Every `.rs` file below `dir`, for the tests that read the sources
/// (no library prints, no long runner function).
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A tune report's setting's environment as `K=V K=V` (empty for none).
pub fn env_of(setting: &serde_json::Value) -> String {
    setting["env"]
        .as_array()
        .map(|vars| {
            vars.iter()
                .map(|kv| format!("{}={}", kv[0].as_str().unwrap(), kv[1].as_str().unwrap()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// A file of `../shared/reference` (nccl-tests' own source and tools,
/// which live beside the repository, not in it), or `None` with a note on
/// stderr where the tree is absent (a clone on its own): the test that
/// needs it is then skipped, not failed. With `COLLBENCH_REFERENCE_TESTS`
/// set (CI sets it) an absent tree fails instead, so the check cannot go
/// quiet where it is meant to run.
pub fn reference(relative: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference")
        .join(relative);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("COLLBENCH_REFERENCE_TESTS").is_none(),
        "{} is missing: the nccl-tests 2.19.6 tree belongs in shared/reference",
        path.display()
    );
    eprintln!(
        "skipped: {} is absent (shared/reference sits beside the repository; set COLLBENCH_REFERENCE_TESTS=1 to require it)",
        path.display()
    );
    None
}

/// A small nccl-tests log (two sizes of all_reduce on 2 GPUs), the `in.txt`
/// that the bad-input tests read.
pub const SMALL_LOG: &str = "\
# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1     9.63    0.00    0.00       0     0.92    0.01    0.01       0
          16             4     float     sum      -1     0.88    0.02    0.02       0     0.80    0.02    0.02       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.0212754
";
