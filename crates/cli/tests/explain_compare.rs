//! `collbench compare` and `collbench report` on collbench JSON that says
//! what NCCL ran (docs/explain.md): changes of algorithm, protocol and
//! channels are named next to regressions and in the per-case table.

mod common;

use collbench_core::{CaseResult, Explanation, KernelChoice, Placement, Record, TimeStats};
use common::collbench;
use std::path::Path;

/// What NCCL ran for a case: algorithm, protocol, channels.
type Ran<'a> = Option<(&'a str, &'a str, u64)>;

/// Statistics of 100 iterations around `time_us`, 1% apart: tight enough
/// that compare's intervals are sure of a 12% change.
fn tight(time_us: f64) -> Option<TimeStats> {
    Some(TimeStats {
        mean_us: time_us,
        min_us: time_us * 0.98,
        p50_us: time_us,
        p99_us: time_us * 1.02,
        max_us: time_us * 1.03,
        stdev_us: time_us * 0.01,
        samples: 100,
    })
}

/// An all_reduce run of 2 ranks: (size, time µs, busbw, what NCCL ran or
/// nothing), with per-iteration statistics.
fn run(cases: &[(u64, f64, f64, Ran)]) -> Record {
    let mut r = Record::new("collbench");
    r.backend = Some("nccl".into());
    r.library = Some("NCCL 2.28.3".into());
    r.settings.world_size = 2;
    for &(size, time_us, busbw, choice) in cases {
        let explain = choice.map(|(algo, proto, channels)| {
            let kernel = KernelChoice::new("AllReduce", algo, proto, channels);
            Explanation::from_kernels([kernel], [], 0)
        });
        r.results.push(CaseResult {
            out_of_place: Some(Placement {
                time_us,
                algbw_gbps: busbw / 2.0,
                busbw_gbps: busbw,
                wrong: Some(0),
                explain: explain.map(Box::new),
                iterations: 100,
                stats: tight(time_us),
                ..Placement::default()
            }),
            ..CaseResult::float_sum("all_reduce", size)
        });
    }
    r
}

/// stdout of `collbench ARGS` run in `dir`, which must exit with `code`.
fn stdout_of(dir: &Path, args: &[&str], code: i32) -> Vec<u8> {
    collbench()
        .current_dir(dir)
        .args(args)
        .assert()
        .code(code)
        .get_output()
        .stdout
        .clone()
}

fn write(dir: &Path, name: &str, r: &Record) {
    std::fs::write(dir.join(name), serde_json::to_string_pretty(r).unwrap()).unwrap();
}

const MIB64: u64 = 64 << 20;
const MIB256: u64 = 256 << 20;
const GIB: u64 = 1 << 30;

fn base() -> Record {
    run(&[
        (8, 12.0, 0.0, Some(("RING", "LL", 2))),
        (MIB64, 600.0, 223.7, Some(("RING", "SIMPLE", 24))),
        (MIB256, 2000.0, 268.4, Some(("RING", "SIMPLE", 24))),
        (GIB, 7000.0, 306.8, Some(("RING", "SIMPLE", 24))),
    ])
}

/// 64 MiB: 12% slower with another protocol; 256 MiB: 20% slower with the
/// same choice; 1 GiB: more channels, no regression.
fn new() -> Record {
    run(&[
        (8, 12.0, 0.0, Some(("RING", "LL", 2))),
        (MIB64, 682.0, 196.9, Some(("TREE", "LL128", 24))),
        (MIB256, 2500.0, 214.7, Some(("RING", "SIMPLE", 24))),
        (GIB, 6900.0, 311.2, Some(("RING", "SIMPLE", 32))),
    ])
}

#[test]
fn compare_names_nccl_changes_next_to_regressions_and_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.json", &base());
    write(dir.path(), "new.json", &new());
    let out = stdout_of(dir.path(), &["compare", "base.json", "new.json"], 1);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(
            "all_reduce float sum 64 MiB out-of-place: busbw -12.0%, NCCL used RING/SIMPLE before and TREE/LL128 now"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "all_reduce float sum 256 MiB out-of-place: busbw -20.0%, NCCL used RING/SIMPLE on 24 channels in both runs"
        ),
        "{out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn compare_without_explanations_on_one_side_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mut bare = base();
    for c in &mut bare.results {
        c.out_of_place.as_mut().unwrap().explain = None;
    }
    write(dir.path(), "base.json", &bare);
    write(dir.path(), "new.json", &new());
    let with_one_side = stdout_of(dir.path(), &["compare", "base.json", "new.json"], 1);
    let mut bare_new = new();
    for c in &mut bare_new.results {
        c.out_of_place.as_mut().unwrap().explain = None;
    }
    write(dir.path(), "new.json", &bare_new);
    let with_none = stdout_of(dir.path(), &["compare", "base.json", "new.json"], 1);
    assert_eq!(
        String::from_utf8(with_one_side).unwrap(),
        String::from_utf8(with_none).unwrap()
    );
}

#[test]
fn report_of_an_explained_run_has_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "new.json", &new());
    let out = stdout_of(dir.path(), &["report", "new.json"], 0);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("| #wrong | algo | proto | channels |"),
        "{out}"
    );
    assert!(out.contains("| 0 | TREE | LL128 | 24 |"), "{out}");
}
