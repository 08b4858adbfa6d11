//! `collbench compare` on runs as people keep them (issue #49): one run
//! saved twice (`run --output X.json > X.txt`) is one run, said so in one
//! line, while separate runs stay separate; inputs over the total bound
//! end with one line and exit 2 before anything is read.

mod common;

use common::{collbench, one_line_refusal, run};
use std::path::{Path, PathBuf};

/// `collbench run all_reduce all_gather` on the CPU backend, 8 B to 1 MiB,
/// saved as `stem.json` (`--output`) and `stem.txt` (stdout) in `dir`.
fn run_saved_twice(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (json, txt) = (
        dir.join(format!("{stem}.json")),
        dir.join(format!("{stem}.txt")),
    );
    let out = collbench()
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .args("run all_reduce all_gather --backend cpu -b 8 -f 8 -e 1M --output".split(' '))
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&txt, &out.stdout).unwrap();
    (json, txt)
}

#[test]
fn a_record_and_its_text_in_one_folder_are_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let (json, txt) = run_saved_twice(&base, "a");
    // A against A: the folder (the run saved twice) against its record.
    let (code, out, err) = run(collbench()
        .arg("compare")
        .arg(&base)
        .arg(&json)
        .args(["--format", "json"]));
    let line = format!(
        "collbench compare: BASE: {} and {} are one run (same processes (host, pid) and figures); counted once",
        json.display(),
        txt.display()
    );
    assert!(err.lines().any(|l| l == line), "{err}");
    assert_ne!(code, 1, "{out}\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["runs"]["base"], 1, "{out}");
    // The JSON was kept: its iterations give the noise.
    assert!(out.contains("iterations"), "{out}");
}

#[test]
fn two_runs_with_equal_settings_stay_two() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    run_saved_twice(&base, "a");
    run_saved_twice(&base, "b");
    for f in ["a.txt", "b.txt"] {
        std::fs::remove_file(base.join(f)).unwrap();
    }
    let (_, new) = run_saved_twice(&dir.path().join("new"), "n");
    let (_, out, err) = run(collbench()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--format", "json"]));
    assert!(!err.contains("one run"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["runs"]["base"], 2, "{out}\n{err}");
}

#[test]
fn inputs_over_the_total_bound_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Sparse files: their sizes count, nothing is written or read.
    let sparse = |name: &str, mib: u64| {
        let p = d.join(name);
        std::fs::File::create(&p)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        p
    };
    let (a, b) = (sparse("a.json", 300), sparse("b.json", 300));
    let out = collbench().arg("compare").arg(&a).arg(&b).output().unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(
        err.contains("the inputs add up to 600 MiB in 2 file(s), more than the 512 MiB collbench reads in one command"),
        "{err}"
    );
    assert!(
        err.contains(&format!("BASE {} 300 MiB", a.display())),
        "{err}"
    );
    // A folder of report inputs, the same.
    std::fs::create_dir(d.join("many")).unwrap();
    for k in 0..3 {
        std::fs::rename(sparse("x", 200), d.join(format!("many/{k}.json"))).unwrap();
    }
    let out = collbench()
        .arg("report")
        .arg(d.join("many"))
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(
        err.contains("the inputs add up to 600 MiB in 3 file(s)"),
        "{err}"
    );
    assert!(err.contains("report on fewer files at a time"), "{err}");
}

#[test]
fn rows_over_the_total_bound_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (json, txt) = run_saved_twice(dir.path(), "a");
    // A lower bound through the hidden test variable: the real one is
    // half a million rows, too many to write here.
    let out = collbench()
        .env("COLLBENCH_TEST_TOTAL_ROWS", "20")
        .arg("compare")
        .arg(&json)
        .arg(&txt)
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(
        err.contains(
            "result rows up to this file, more than the 20 collbench reads in one command"
        ),
        "{err}"
    );
    let out = collbench()
        .env("COLLBENCH_TEST_TOTAL_ROWS", "20")
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(err.contains("report on fewer files at a time"), "{err}");
    // Under the bound, the same inputs are read.
    let out = collbench().arg("report").arg(dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
