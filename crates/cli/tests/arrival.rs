//! `run --arrival` as a user runs it (issue #53): a `#` line under each
//! row naming the late rank, `arrival` in the JSON record; without the
//! flag neither, so the nccl-tests table stays as it was.

mod common;

use common::cpu_run;

fn run(extra: &[&str], json: &std::path::Path) -> String {
    let out = cpu_run("all_reduce", "2")
        .args(["-b", "64K", "-e", "128K", "-n", "20", "--output"])
        .arg(json)
        .args(extra)
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn the_late_rank_is_named_under_its_row_and_in_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = run(&["--arrival", "--test-late-entry", "1:1000"], &json);
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" arrival: ")).collect();
    // Two sizes, two placements each.
    assert_eq!(lines.len(), 4, "{out}");
    for l in &lines {
        assert!(
            l.contains("straggler rank 1 (")
                && l.contains("late rank (time lost before the collective)"),
            "{l}"
        );
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let a = &v["results"][0]["out_of_place"]["arrival"];
    assert_eq!(a["straggler"]["rank"], 1, "{a}");
    assert_eq!(a["lateness_us"].as_array().unwrap().len(), 2);
    assert!(a["skew_us"].as_f64().unwrap() > 900.0, "{a}");
    assert!(a["device_busbw_gbps"].as_f64().unwrap() > 0.0, "{a}");
}

#[test]
fn without_the_flag_nothing_is_taken_or_printed() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = run(&[], &json);
    assert!(!out.contains("arrival"), "{out}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains("\"arrival\""), "{text}");
}
