//! The text layout with and without `--explain`, as readable snapshots:
//! the default must stay nccl-tests' layout byte for byte whatever the
//! record carries; `--explain` adds columns after nccl-tests' own and
//! footnotes.

mod common;

use collbench_core::{CaseResult, Explanation, KernelChoice, Placement, Record};
use collbench_output::text::{TextExporter, TextOptions};
use collbench_output::Exporter;

fn placement(time_us: f64, explain: Option<Explanation>) -> Option<Placement> {
    Some(Placement {
        time_us,
        algbw_gbps: 1.5,
        busbw_gbps: 2.25,
        wrong: Some(0),
        iterations: 20,
        explain: explain.map(Box::new),
        ..Placement::default()
    })
}

fn row(op: &str, size: u64, oop: Option<Explanation>, ip: Option<Explanation>) -> CaseResult {
    CaseResult {
        op: op.into(),
        size_bytes: size,
        count: size / 4,
        dtype: "float".into(),
        redop: if op == "all_reduce" { "sum" } else { "none" }.into(),
        root: -1,
        out_of_place: placement(10.5, oop),
        in_place: placement(9.75, ip),
    }
}

/// A record as an NCCL run with explanations would produce: ring/LL and
/// ring/SIMPLE rows, an NVLS row (recorded, NVLS is off on our machines),
/// a send/recv row with two kernels, a row with a silent rank, and a row
/// NCCL could not explain.
fn record() -> Record {
    let one = |k: KernelChoice| Some(Explanation::from_kernels([k], [], 0));
    let mut r = common::two_rank_record("nccl", "NVIDIA H200", (8, 1 << 20), 20);
    r.library = Some("NCCL 2.28.3".into());
    for d in &mut r.devices {
        d.bus_id = Some(format!("0000:00:0{}", 6 + d.rank));
    }
    r.results = vec![
        row(
            "all_reduce",
            8,
            one(KernelChoice::new("AllReduce", "RING", "LL", 1)),
            one(KernelChoice::new("AllReduce", "RING", "LL", 1)),
        ),
        row(
            "all_reduce",
            1 << 20,
            one(KernelChoice::new("AllReduce", "NVLS", "SIMPLE", 16)),
            one(KernelChoice::new("AllReduce", "RING", "SIMPLE", 24)),
        ),
        row(
            "sendrecv",
            1024,
            Some(Explanation::from_kernels(
                [KernelChoice::new("Send", "", "", 2), KernelChoice::new("Recv", "", "", 2)],
                [],
                0,
            )),
            Some(Explanation::from_kernels(
                [KernelChoice::new("Send", "", "", 2)],
                [1],
                0,
            )),
        ),
        row(
            "sendrecv",
            2048,
            Some(Explanation::unavailable(
                "NCCL_PROFILER_PLUGIN is set (/x.so) and collbench leaves the user's profiler plugin in place",
            )),
            None,
        ),
    ];
    r
}

fn text(options: TextOptions) -> String {
    String::from_utf8(TextExporter { options }.serialize(&record())).unwrap()
}

#[test]
fn default_layout_is_nccl_tests_and_ignores_explanations() {
    let with = text(TextOptions::default());
    let mut bare = record();
    for r in &mut bare.results {
        for p in [&mut r.out_of_place, &mut r.in_place].into_iter().flatten() {
            p.explain = None;
        }
    }
    let without = String::from_utf8(TextExporter::default().serialize(&bare)).unwrap();
    assert_eq!(with, without);
    insta::assert_snapshot!("default", with);
}

#[test]
fn explain_adds_columns_after_nccl_tests_and_footnotes() {
    let t = text(TextOptions {
        explain: true,
        ..TextOptions::default()
    });
    // nccl-tests' part of every line is unchanged.
    let plain = text(TextOptions::default());
    for (a, b) in t
        .lines()
        .filter(|l| !l.starts_with("# * ") && !l.starts_with("# NCCL explain"))
        .zip(plain.lines())
    {
        assert!(a.starts_with(b.trim_end()), "{a:?} does not extend {b:?}");
    }
    assert!(t.contains("NVLS*"));
    insta::assert_snapshot!("explain", t);
}

#[test]
fn explain_columns_follow_the_timestamp() {
    let opts = TextOptions {
        explain: true,
        timestamps: true,
        ..TextOptions::default()
    };
    let r = &record().results[0];
    let line = collbench_output::text::row_with(r, Some("2026-12-01 03:00:00"), opts);
    let plain = collbench_output::text::row(r, Some("2026-12-01 03:00:00"));
    assert!(line.starts_with(plain.trim_end()));
    assert!(line.trim_end().ends_with("RING      LL     1"), "{line:?}");
    let header = collbench_output::text::table_header(opts);
    let names = header.lines().nth(2).unwrap();
    // The algo column of the in-place half ends where the row's does.
    let col = |s: &str, what: &str| s.rfind(what).unwrap() + what.len();
    assert_eq!(col(names, "algo"), col(&line, "RING"));
}
