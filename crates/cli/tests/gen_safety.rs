//! Nothing a user types can break out of its place: hostile values (harmless
//! payloads, since these tests run the generated shell) come back
//! out of the generated shell and YAML as the exact literal strings, and
//! invalid names and counts are refused with one line naming value and rule.

mod gen_common;
use gen_common::{gen, gen_err};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Values a careless generator would let the shell or YAML interpret.
const HOSTILE: &[&str] = &[
    "a'; exit 97 #",
    "$(x)",
    "`id`",
    "${HOME}",
    "\"dq\" \\ back",
    "*",
    "x\n---\nkind: Secret",
    "{a: b}",
    "- item",
    "",
    "yes",
    "0x10",
];

/// Splits NUL-terminated output into its words.
fn words(out: &[u8]) -> Vec<String> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .split_terminator('\0')
        .map(String::from)
        .collect()
}

/// Writes an executable stub that prints its arguments, NUL-terminated.
fn stub(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn argv_with<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(tail).copied().collect()
}

/// `V<i>=<HOSTILE[i]>` for every hostile value.
fn hostile_env() -> Vec<String> {
    HOSTILE
        .iter()
        .enumerate()
        .map(|(i, v)| format!("V{i}={v}"))
        .collect()
}

/// `head`, then `--env` for each of `env`, then `-- run` and every hostile
/// value as the command's arguments.
fn hostile_argv<'a>(head: &[&'a str], env: &'a [String]) -> Vec<&'a str> {
    let mut argv = head.to_vec();
    for e in env {
        argv.extend(["--env", e.as_str()]);
    }
    argv.extend(["--", "run"]);
    argv.extend(HOSTILE);
    argv
}

#[test]
fn mpirun_line_keeps_hostile_values_literal() {
    let env = hostile_env();
    let head = [
        "mpirun",
        "--hosts",
        "h1:2,h2:2",
        "--collbench",
        "/opt/my dir/collbench",
    ];
    let line = gen(&hostile_argv(&head, &env)).unwrap();

    // Let sh parse the generated line, with mpirun replaced by a printer.
    let script = line.replacen("mpirun", "printf '%s\\0'", 1);
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "{script}");

    let mut expected: Vec<String> = [
        "--allow-run-as-root",
        "-np",
        "4",
        "-H",
        "h1:2,h2:2",
        "--bind-to",
        "none",
        "-x",
        "COLLBENCH_RENDEZVOUS=h1:29517",
    ]
    .map(String::from)
    .to_vec();
    for e in &env {
        expected.extend(["-x".to_string(), e.clone()]);
    }
    expected.extend(["/opt/my dir/collbench".to_string(), "run".to_string()]);
    expected.extend(HOSTILE.iter().map(|s| s.to_string()));
    assert_eq!(words(&out.stdout), expected);
}

#[test]
fn slurm_script_keeps_hostile_values_literal() {
    let dir = tempfile_dir("slurm");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // srun stub: print every argument, then the exported values it inherits.
    stub(
        &bin,
        "srun",
        "printf '%s\\0' \"$@\"; printf '%s\\0' \"$V0\" \"$V1\" \"$V6\" > \"$STUB_ENV\"",
    );

    let env = [
        format!("V0={}", HOSTILE[0]),
        format!("V1={}", HOSTILE[1]),
        format!("V6={}", HOSTILE[6]),
    ];
    let results = dir.join("res 'ults $(x)");
    let head = [
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--collbench",
        "/opt/my dir/collbench",
        "--output-dir",
        results.to_str().unwrap(),
    ];
    let script = gen(&hostile_argv(&head, &env)).unwrap();
    let script_path = dir.join("job.sh");
    std::fs::write(&script_path, &script).unwrap();

    let env_out = dir.join("env.out");
    let out = Command::new("bash")
        .arg(&script_path)
        .current_dir(&dir)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("SLURM_JOB_NAME", "collbench")
        .env("SLURM_JOB_ID", "42")
        .env("SLURM_JOB_NODELIST", "n[1-2]")
        .env("STUB_ENV", &env_out)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The srun stub's output went through tee into the job's folder.
    let log = std::fs::read(results.join("collbench-42/collbench.log")).unwrap();
    let mut expected: Vec<String> = ["--nodes=2", "--ntasks-per-node=2", "--kill-on-bad-exit=1"]
        .map(String::from)
        .to_vec();
    expected.extend(["/opt/my dir/collbench".to_string(), "run".to_string()]);
    expected.extend(HOSTILE.iter().map(|s| s.to_string()));
    assert_eq!(words(&log), expected);
    assert_eq!(
        words(&std::fs::read(&env_out).unwrap()),
        [HOSTILE[0], HOSTILE[1], HOSTILE[6]]
    );
}

/// Parses every YAML document of `text`.
fn docs(text: &str) -> Vec<serde_norway::Value> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(text)
        .map(|d| serde_norway::Value::deserialize(d).unwrap())
        .collect()
}

/// The env list of a container as (name, value) pairs.
fn env_of(container: &serde_norway::Value) -> Vec<(String, String)> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn k8s_hostile(kind: &str, extra_env: &[String]) -> String {
    let mut env = hostile_env();
    env.extend_from_slice(extra_env);
    let head = [
        "k8s",
        "--kind",
        kind,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--image",
        "reg.example/x:1",
    ];
    gen(&hostile_argv(&head, &env)).unwrap()
}

#[test]
fn k8s_yaml_round_trips_hostile_values() {
    for (kind, container_path) in [
        (
            "jobset",
            "/spec/replicatedJobs/0/template/spec/template/spec/containers/0",
        ),
        ("indexed-job", "/spec/template/spec/containers/0"),
    ] {
        let text = k8s_hostile(kind, &[]);
        let docs = docs(&text);
        assert_eq!(docs.len(), 2, "{kind}: a value added a YAML document");
        let container = pointer(&docs[1], container_path);
        let env = env_of(container);
        for (i, v) in HOSTILE.iter().enumerate() {
            assert!(
                env.contains(&(format!("V{i}"), v.to_string())),
                "{kind}: V{i}"
            );
        }
        let args: Vec<&str> = container["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().expect("every arg is a YAML string"))
            .collect();
        let mut expected = vec!["run"];
        expected.extend(HOSTILE);
        expected.extend(["-g", "4"]);
        assert_eq!(args, expected, "{kind}");
    }
}

/// Follows a `/a/0/b` path through a YAML value.
fn pointer<'a>(v: &'a serde_norway::Value, path: &str) -> &'a serde_norway::Value {
    path.split('/')
        .skip(1)
        .fold(v, |v, key| match key.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[key],
        })
}

#[test]
fn mpijob_launcher_script_keeps_hostile_values_literal() {
    // A user-given rendezvous keeps the script off /etc/mpi/hostfile, which
    // exists only in a real launcher pod.
    let text = k8s_hostile("mpijob", &["COLLBENCH_RENDEZVOUS=w0:1".to_string()]);
    let docs = docs(&text);
    assert_eq!(docs.len(), 1);
    let launcher = pointer(
        &docs[0],
        "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0",
    );
    let script = launcher["command"][2].as_str().unwrap();

    let dir = tempfile_dir("mpijob");
    stub(&dir, "mpirun", "printf '%s\\0' \"$@\"");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).env(
        "PATH",
        format!("{}:{}", dir.display(), std::env::var("PATH").unwrap()),
    );
    for (k, v) in env_of(launcher) {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut expected: Vec<String> = ["--allow-run-as-root", "-np", "8", "--bind-to", "none"]
        .map(String::from)
        .to_vec();
    for i in 0..HOSTILE.len() {
        expected.extend(["-x".to_string(), format!("V{i}")]);
    }
    expected.extend(["-x".to_string(), "COLLBENCH_RENDEZVOUS".to_string()]);
    expected.extend(["collbench".to_string(), "run".to_string()]);
    expected.extend(HOSTILE.iter().map(|s| s.to_string()));
    assert_eq!(words(&out.stdout), expected);
}

/// A fresh folder for one test under the target tmp dir.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gen-safety-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- refusals ----

const K8S_OK: &[&str] = &[
    "k8s",
    "--kind",
    "jobset",
    "--nodes",
    "2",
    "--gpus-per-node",
    "8",
];

#[test]
fn k8s_names_must_be_rfc1123_labels() {
    let long = "a".repeat(64);
    for (flag, bad) in [
        ("--name", "Collbench"),
        ("--name", "nccl_all"),
        ("--name", "-nccl"),
        ("--name", "nccl-"),
        ("--name", "nccl.all"),
        ("--name", long.as_str()),
        ("--name", ""),
        ("--namespace", "Bench"),
        ("--queue", "a4 queue"),
    ] {
        let arg = format!("{flag}={bad}");
        let err = gen_err(&argv_with(K8S_OK, &["--image", "img:1", &arg]));
        assert!(
            err.starts_with(&format!(
                "invalid {flag} {bad:?}: must be an RFC 1123 label"
            )),
            "{err}"
        );
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn k8s_names_too_long_for_pod_host_names_are_refused() {
    // 55 characters is a valid label, but `<name>-worker-0-1` is not.
    let name = "a".repeat(55);
    let err = gen_err(&argv_with(K8S_OK, &["--image", "i", "--name", &name]));
    assert!(err.contains("exceed 63 characters"), "{err}");
    let indexed = argv_with(&K8S_OK[..2], &["indexed-job"]);
    let indexed = argv_with(&indexed, &K8S_OK[3..]);
    gen(&argv_with(&indexed, &["--image", "i", "--name", &name])).unwrap();
}

#[test]
fn zero_counts_are_refused() {
    for (argv, flag) in [
        (
            vec!["slurm", "--nodes", "0", "--gpus-per-node", "8"],
            "--nodes",
        ),
        (
            vec!["slurm", "--nodes", "2", "--gpus-per-node", "0"],
            "--gpus-per-node",
        ),
        (
            vec![
                "k8s",
                "--kind",
                "mpijob",
                "--nodes",
                "0",
                "--gpus-per-node",
                "8",
                "--image",
                "i",
            ],
            "--nodes",
        ),
        (
            vec![
                "k8s",
                "--kind",
                "indexed-job",
                "--nodes",
                "1",
                "--gpus-per-node",
                "0",
                "--image",
                "i",
            ],
            "--gpus-per-node",
        ),
    ] {
        assert_eq!(
            gen_err(&argv),
            format!("invalid {flag} 0: must be at least 1")
        );
    }
}

#[test]
fn malformed_entries_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--env", "NCCL_DEBUG"],
            "invalid --env \"NCCL_DEBUG\": expected NAME=VALUE",
        ),
        (&["--env", "NCCL-DEBUG=1"], "must be a C identifier"),
        (&["--env", "1X=1"], "must be a C identifier"),
        (&["--resource", "rdma/ib"], "expected NAME=COUNT"),
        (
            &["--resource", "rdma/ib=0"],
            "COUNT must be a whole number >= 1",
        ),
        (
            &["--resource", "RDMA IB=1"],
            "must be a Kubernetes resource name",
        ),
        (&["--resource", "nvidia.com/gpu=1"], "already requested"),
        (
            &["--gpu-resource", "nvidia.com/"],
            "must be a Kubernetes resource name",
        ),
        (
            &["--image", "bad image"],
            "must be an image reference without spaces",
        ),
        (
            &["--inject-into", "my image"],
            "invalid --inject-into \"my image\": must be an image reference",
        ),
        (
            &["--topology-required", "Block Label"],
            "invalid --topology-required \"Block Label\": must be a node label key",
        ),
        (
            &["--topology-preferred", "x/"],
            "invalid --topology-preferred \"x/\": must be a node label key",
        ),
    ];
    for (extra, want) in cases {
        let with_image = argv_with(K8S_OK, extra);
        let argv = if extra[0] == "--image" {
            with_image
        } else {
            argv_with(&with_image, &["--image", "img:1"])
        };
        let err = gen_err(&argv);
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    for hosts in ["h1", "h1:0", "h1:8,", "h 1:8", "h1:eight"] {
        let err = gen_err(&["mpirun", "--hosts", hosts]);
        assert!(err.starts_with("invalid --hosts entry"), "{hosts}: {err}");
    }
    let slurm = ["slurm", "--nodes", "1", "--gpus-per-node", "1"];
    for (extra, want) in [
        (
            ["--partition", "gpu debug"],
            "invalid --partition \"gpu debug\"",
        ),
        (["--job-name", "x\n#SBATCH --x"], "invalid --job-name"),
        (["--time", "$(x)"], "invalid --time"),
    ] {
        let err = gen_err(&argv_with(&slurm, &extra));
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    let err = gen_err(&argv_with(
        &slurm,
        &["--container", "img", "--container-runtime", "none"],
    ));
    assert!(err.contains("--container-runtime none"), "{err}");
}
