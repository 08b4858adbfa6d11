//! `collbench tune --list-candidates`, `--env` and `--shell` as a user
//! runs them, without a GPU: the plan follows the transport between hosts
//! (`--transport` here, so the machine's IB devices do not matter), a
//! mistake in `--env` is one line and exit 2, and `--shell` on the
//! scripted fake (`--test-fake`) prints `export` lines for an environment
//! winner and one comment when the defaults win.

mod common;

use common::{collbench, usage_error, TUNE_SEARCH};
use std::time::Duration;

/// `collbench tune --list-candidates` on the CPU backend with `args`.
fn list(args: &[&str]) -> String {
    let out = collbench()
        .args([
            "tune",
            "--list-candidates",
            "--backend",
            "cpu",
            "--ranks",
            "2",
        ])
        .args(args)
        .env_remove("NCCL_NET")
        .env_remove("NCCL_IB_DISABLE")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn one_host_lists_no_network_knob() {
    let text = list(&["all_reduce", "broadcast", "--max-channels", "16"]);
    insta::assert_snapshot!(text);
    assert!(!text.contains("NCCL_NSOCKS_PERTHREAD") && !text.contains("NCCL_IB_"));
}

#[test]
fn sockets_list_the_socket_knobs_and_the_users_own() {
    let text = list(&[
        "all_gather",
        "--transport",
        "socket",
        "--env",
        "NCCL_BUFFSIZE=2097152,16777216",
        "--env",
        "NCCL_P2P_NET_CHUNKSIZE=524288",
    ]);
    insta::assert_snapshot!(text);
}

#[test]
fn ib_lists_the_ib_knobs_and_no_socket_knob() {
    let text = list(&["all_reduce", "--transport", "ib"]);
    for var in [
        "NCCL_IB_QPS_PER_CONNECTION=2",
        "NCCL_IB_SPLIT_DATA_ON_QPS=1",
        "NCCL_NCHANNELS_PER_NET_PEER=4",
        "NCCL_NET_GDR_LEVEL=LOC",
    ] {
        assert!(text.contains(var), "{var}: {text}");
    }
    assert!(!text.contains("NCCL_NSOCKS_PERTHREAD"), "{text}");
}

#[test]
fn env_mistakes_are_one_line_and_exit_2() {
    for (env, want) in [
        ("NCCL_BUFFSIZE", "has no '='"),
        ("NCCL BUFFSIZE=1", "is not an environment variable name"),
        ("NCCL_BUFFSIZE=", "has an empty value"),
        ("NCCL_BUFFSIZE=1,,2", "has an empty value"),
        ("NCCL_TUNER_PLUGIN=/x.so", "sets NCCL_TUNER_PLUGIN itself"),
    ] {
        let err = usage_error(collbench().args([
            "tune",
            "-b",
            "1M",
            "-e",
            "4M",
            "--list-candidates",
            "--env",
            env,
        ]));
        assert!(err.contains(want), "{env}: {err}");
    }
}

#[test]
fn tune_without_sizes_says_what_to_add() {
    let err = usage_error(collbench().args(["tune", "all_reduce", "--backend", "nccl"]));
    assert!(
        err.contains("--minbytes") && err.contains("--maxbytes"),
        "{err}"
    );
}

/// `collbench tune --test-fake MODE --shell`: the table, then the lines.
fn shell(mode: &str) -> String {
    let out = collbench()
        .args(TUNE_SEARCH)
        .args(["--test-fake", mode, "--shell"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

fn shell_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.is_empty())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn shell_exports_an_environment_winner() {
    let stdout = shell("ok");
    let lines = shell_lines(&stdout);
    let exports: Vec<&&str> = lines.iter().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(exports, [&"export NCCL_BUFFSIZE=8388608"], "{stdout}");
}

#[test]
fn shell_says_nothing_to_set_when_the_defaults_win() {
    let stdout = shell("flat");
    assert_eq!(
        shell_lines(&stdout),
        ["# collbench tune: no setting beat NCCL's defaults by the gain rule; nothing to set"],
        "{stdout}"
    );
}
