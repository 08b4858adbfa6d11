//! Issue #49 item 5: the hostile values that still got through, each at
//! the seam where it enters, in every command that reads it: a timeout
//! past a year (`Instant + 2^64 s` panicked), a port of 0 or one whose
//! offset wraps (the job waited out its timeout), a baseline's or a
//! topology's figure no machine has (inf, 1e308, a size of 0), a host
//! count past any job, and `expect all`. Each is one line, exit 2, within
//! seconds, with nothing written.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Launcher variables of the machine running the tests must not leak in.
const LAUNCHER_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_PORT",
    "MASTER_ADDR",
    "JOB_COMPLETION_INDEX",
    "COLLBENCH_RANK",
    "COLLBENCH_WORLD_SIZE",
    "COLLBENCH_RENDEZVOUS",
    "COLLBENCH_PORT",
    "TORCHELASTIC_USE_AGENT_STORE",
];

/// `collbench ARGS` in `dir` with `env`; (exit, stderr). A refusal comes
/// at once: no rank waits for a peer (that took the whole timeout).
fn refused_in(dir: &Path, args: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(common::BIN);
    cmd.args(args.split(' '))
        .current_dir(dir)
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for var in LAUNCHER_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let started = Instant::now();
    let out = cmd.output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{args} {env:?}: took {:?}",
        started.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts one line, exit 2, naming `says`, and no file in `dir` but
/// `inputs`.
fn assert_refused(dir: &Path, args: &str, env: &[(&str, &str)], says: &str, inputs: &[&str]) {
    let (code, err) = refused_in(dir, args, env);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("collbench check: "))
        .collect();
    assert_eq!(code, Some(2), "{args} {env:?}: {err}");
    assert_eq!(lines.len(), 1, "{args} {env:?}: {err}");
    assert!(lines[0].contains(says), "{args} {env:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !inputs.contains(&n.as_str()))
        .collect();
    left.sort();
    assert!(left.is_empty(), "{args} {env:?} wrote {left:?}");
}

/// Every command with a launch timeout, with output files named.
const TIMED: [&str; 4] = [
    "run all_reduce --backend cpu --ranks 2 -b 8 -e 8 --output o.json -J j.json",
    "check --backend cpu --ranks 2 -n 2 --size 8 --json c.json",
    "preflight",
    "tune --backend cpu -b 8 -e 8 --csv t.csv --json t.json",
];

#[test]
fn a_timeout_past_a_year_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in TIMED {
        for secs in ["18446744073709551615", "9223372036854775807", "31536001"] {
            assert_refused(
                dir.path(),
                &format!("{cmd} --timeout-s {secs}"),
                &[],
                "give whole seconds from 1 to 31536000 (a year)",
                &[],
            );
        }
    }
    // A year itself is a timeout like any other.
    let (code, err) = refused_in(dir.path(), "preflight --timeout-s 31536000", &[]);
    assert_eq!(code, Some(0), "{err}");
}

/// Port variables that are no port, under every launcher that names one.
const BAD_PORTS: [(&[(&str, &str)], &str); 3] = [
    (
        &[
            ("COLLBENCH_RANK", "1"),
            ("COLLBENCH_WORLD_SIZE", "2"),
            ("COLLBENCH_RENDEZVOUS", "127.0.0.1"),
            ("COLLBENCH_PORT", "0"),
        ],
        "COLLBENCH_PORT=\"0\" is not a TCP port: give a port from 1 to 65535",
    ),
    (
        &[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "0"),
        ],
        "MASTER_PORT=\"0\" is not a TCP port: give a port from 1 to 65535",
    ),
    (
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "65535"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ],
        "set MASTER_PORT to 65534 or less",
    ),
];

#[test]
fn a_port_of_0_or_one_that_wraps_is_refused_rather_than_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in TIMED {
        for (env, says) in BAD_PORTS {
            assert_refused(dir.path(), cmd, env, says, &[]);
        }
    }
}

/// A baseline whose one field is `to` instead of `from`.
fn baseline(dir: &Path, from: &str, to: &str) {
    let ok = "name='b'\ngpus_per_node=2\nnodes=1\nsource='me'\n[[expect]]\nop='all_reduce'\n\
              size='1M'\nbusbw_gbps=1\nsmall_size='8'\nmax_time_us=1000\n";
    assert!(ok.contains(from));
    std::fs::write(dir.join("b.toml"), ok.replace(from, to)).unwrap();
}

#[test]
fn a_baseline_figure_no_machine_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "busbw_gbps=1",
            "busbw_gbps=inf",
            "busbw_gbps = inf is no figure",
        ),
        ("busbw_gbps=1", "busbw_gbps=1e308", "at most 100000"),
        (
            "max_time_us=1000",
            "max_time_us=inf",
            "max_time_us = inf is no figure",
        ),
        ("size='1M'", "size='0'", "size = '0' measures nothing"),
        (
            "small_size='8'",
            "small_size='0'",
            "small_size = '0' measures nothing",
        ),
    ];
    for (from, to, says) in cases {
        baseline(dir.path(), from, to);
        let cmd = "check --backend cpu --ranks 2 -n 2 --baseline b.toml --json c.json";
        assert_refused(dir.path(), cmd, &[], says, &["b.toml"]);
    }
}

#[test]
fn a_topology_rate_or_host_count_no_machine_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), common::SMALL_LOG).unwrap();
    let inputs = ["in.txt", "t.toml"];
    let cases = [
        (
            "hosts = 1\n[[nics]]\nrate_gbit = inf\n",
            "rate_gbit must be above 0",
        ),
        (
            "hosts = 1\n[gpu]\ncount = 8\nnvlink_link_gbps = 1e308\n",
            "nvlink_link_gbps must be",
        ),
        (
            "hosts = 4294967296\n[gpu]\ncount = 8\n",
            "hosts = 4294967296 is more than",
        ),
    ];
    for (text, says) in cases {
        std::fs::write(dir.path().join("t.toml"), text).unwrap();
        for cmd in [
            "expect --topology t.toml all_reduce",
            "report in.txt --topology t.toml -o r.md",
        ] {
            assert_refused(dir.path(), cmd, &[], says, &inputs);
        }
    }
    std::fs::write(dir.path().join("t.toml"), "hosts = 1\n[gpu]\ncount = 8\n").unwrap();
    for hosts in ["18446744073709551615", "4294967296"] {
        assert_refused(
            dir.path(),
            &format!("expect --topology t.toml --hosts {hosts} all_reduce"),
            &[],
            "is more than collbench's limit of 1048576 ranks",
            &inputs,
        );
    }
    // 2^20 hosts of 8 GPUs each is past a job too.
    assert_refused(
        dir.path(),
        "expect --topology t.toml --hosts 1048576 all_reduce",
        &[],
        "hosts x ranks per host = 8388608",
        &inputs,
    );
}

#[test]
fn expect_all_is_the_main_collectives_as_its_error_line_promised() {
    let out = common::collbench()
        .args(["expect", "--topology", "h200x2", "all"])
        .output()
        .unwrap();
    let all = common::ok_stdout(out, "expect all");
    let out = common::collbench()
        .args(["expect", "--topology", "h200x2"])
        .output()
        .unwrap();
    assert_eq!(all, common::ok_stdout(out, "expect"));
    let err =
        common::usage_error(common::collbench().args(["expect", "--topology", "h200x2", "al"]));
    assert!(err.contains("expected one of: all, all_reduce"), "{err}");
    // A baseline's op takes one collective, and its line does not offer `all`.
    let dir = tempfile::tempdir().unwrap();
    baseline(dir.path(), "op='all_reduce'", "op='all'");
    let (code, err) = refused_in(dir.path(), "check --backend cpu --baseline b.toml", &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected one of: all_reduce"), "{err}");
}
