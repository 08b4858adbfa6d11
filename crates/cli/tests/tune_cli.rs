//! `collbench tune` and `run --tuner-config` without a GPU: every refusal
//! is one line with the fix and the documented exit code, before anything
//! runs. (The measuring path needs NCCL and GPUs; the search itself is
//! tested in collbench-tune against a noisy fake.)

mod common;

use assert_cmd::Command;
use common::usage_error;

fn collbench() -> Command {
    let mut c = common::collbench();
    c.env_remove("NCCL_TUNER_PLUGIN")
        .env_remove("COLLBENCH_TUNER_PLUGIN");
    c
}

/// `collbench tune` with a sweep, and `args` after it.
fn tune(backend: &str, args: &[&str]) -> Command {
    let mut c = collbench();
    c.args(["tune", "-b", "1M", "-e", "4M", "--backend", backend])
        .args(args);
    c
}

/// `collbench run all_reduce --backend <backend> --tuner-config` with a
/// file of `text`: the exit code and stderr lines.
fn run_with_tuner_config(backend: &str, text: &str) -> (i32, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let f = common::write_file(dir.path(), "t.csv", text);
    let (code, _, err) = common::run(
        collbench()
            .args(["run", "all_reduce", "--backend", backend, "--tuner-config"])
            .arg(&f),
    );
    (code, err.lines().map(str::to_string).collect())
}

#[test]
fn tune_on_the_cpu_backend_exits_2_saying_it_tunes_nccl() {
    let err = usage_error(&mut tune("cpu", &[]));
    assert!(err.contains("collbench: tune tunes NCCL ("), "{err}");
    assert!(!err.contains("collbench: collbench"), "{err}");
    assert!(err.contains("--backend nccl"), "{err}");
}

#[test]
fn tune_flag_mistakes_are_one_line() {
    for (args, want) in [
        (vec!["--budget", "5x"], "--budget '5x'"),
        (vec!["alltoall"], "drop alltoall"),
        (
            vec!["--max-channels", "0"],
            "--max-channels must be at least 1",
        ),
    ] {
        let err = usage_error(&mut tune("nccl", &args));
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn tune_refuses_a_users_tuner_plugin() {
    let err = usage_error(tune("nccl", &[]).env("NCCL_TUNER_PLUGIN", "/opt/my-tuner.so"));
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        ["collbench: NCCL_TUNER_PLUGIN is set (/opt/my-tuner.so): collbench tune/--tuner-config needs its own tuner plugin; unset NCCL_TUNER_PLUGIN"]
    );
}

#[test]
fn a_malformed_tuner_config_gives_one_line_per_bad_line() {
    let (code, lines) = run_with_tuner_config(
        "nccl",
        "# fine\nallreduce,0,65536,tree,ll,-1,1\nallreduce,0,65536,tree,ll,-1,1,2\nallgather,1M,2,ring,simple,-1,1,2\n",
    );
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("line 2: 7 fields"), "{lines:?}");
    assert!(lines[1].contains("line 4: min_bytes '1M'"), "{lines:?}");
}

#[test]
fn a_tuner_config_on_the_cpu_backend_says_it_applies_to_nccl() {
    let (code, lines) = run_with_tuner_config("cpu", "allreduce,0,65536,tree,ll,-1,1,2\n");
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("--tuner-config applies to NCCL"),
        "{lines:?}"
    );
}
