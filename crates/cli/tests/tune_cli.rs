//! `collbench tune` and `run --tuner-config` without a GPU: every refusal
//! is one line with the fix and the documented exit code, before anything
//! runs. (The measuring path needs NCCL and GPUs; the search itself is
//! tested in collbench-tune against a noisy fake.)

use assert_cmd::Command;

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").unwrap();
    c.env_remove("NCCL_TUNER_PLUGIN")
        .env_remove("COLLBENCH_TUNER_PLUGIN");
    c
}

/// Exit code and stderr lines.
fn run(c: &mut Command) -> (i32, Vec<String>) {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    (
        out.status.code().unwrap_or(-1),
        err.lines().map(str::to_string).collect(),
    )
}

#[test]
fn tune_on_the_cpu_backend_exits_2_saying_it_tunes_nccl() {
    let (code, lines) = run(collbench().args(["tune", "-b", "1M", "-e", "4M", "--backend", "cpu"]));
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("collbench tune tunes NCCL"), "{lines:?}");
    assert!(lines[0].contains("--backend nccl"), "{lines:?}");
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
        let mut c = collbench();
        c.args(["tune", "-b", "1M", "-e", "4M", "--backend", "nccl"])
            .args(&args);
        let (code, lines) = run(&mut c);
        assert_eq!(code, 2, "{args:?}: {lines:?}");
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].contains(want), "{args:?}: {lines:?}");
    }
}

#[test]
fn tune_refuses_a_users_tuner_plugin() {
    let (code, lines) = run(collbench()
        .env("NCCL_TUNER_PLUGIN", "/opt/my-tuner.so")
        .args(["tune", "-b", "1M", "-e", "4M", "--backend", "nccl"]));
    assert_eq!(code, 2);
    assert_eq!(
        lines,
        ["collbench: NCCL_TUNER_PLUGIN is set (/opt/my-tuner.so): collbench tune/--tuner-config needs its own tuner plugin; unset NCCL_TUNER_PLUGIN"]
    );
}

#[test]
fn a_malformed_tuner_config_gives_one_line_per_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.csv");
    std::fs::write(
        &f,
        "# fine\nallreduce,0,65536,tree,ll,-1,1\nallreduce,0,65536,tree,ll,-1,1,2\nallgather,1M,2,ring,simple,-1,1,2\n",
    )
    .unwrap();
    let (code, lines) = run(collbench()
        .args(["run", "all_reduce", "--backend", "nccl", "--tuner-config"])
        .arg(&f));
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("line 2: 7 fields"), "{lines:?}");
    assert!(lines[1].contains("line 4: min_bytes '1M'"), "{lines:?}");
}

#[test]
fn a_tuner_config_on_the_cpu_backend_says_it_applies_to_nccl() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.csv");
    std::fs::write(&f, "allreduce,0,65536,tree,ll,-1,1,2\n").unwrap();
    let (code, lines) = run(collbench()
        .args(["run", "all_reduce", "--backend", "cpu", "--tuner-config"])
        .arg(&f));
    assert_eq!(code, 2);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("--tuner-config applies to NCCL"),
        "{lines:?}"
    );
}
