//! Explanations (what NCCL ran, docs/explain.md) travel from collbench JSON
//! through the parser into the report's case tables, and reports of logs
//! without them keep their usual columns.

use collbench_core::explain::BUSBW_NOTE;
use collbench_core::{CaseResult, Explanation, KernelChoice, Placement, Record};
use collbench_report::parse::{parse_file, parse_str};
use collbench_report::render::{html, markdown};
use std::path::Path;

fn case(op: &str, size: u64, oop: Explanation, ip: Explanation) -> CaseResult {
    let p = |busbw: f64, e: Explanation| Placement {
        time_us: 100.0,
        algbw_gbps: busbw,
        busbw_gbps: busbw,
        wrong: Some(0),
        iterations: 20,
        explain: Some(Box::new(e)),
        ..Placement::default()
    };
    CaseResult {
        op: op.into(),
        size_bytes: size,
        count: size / 4,
        dtype: "float".into(),
        redop: "sum".into(),
        root: -1,
        out_of_place: Some(p(100.0, oop)),
        in_place: Some(p(99.0, ip)),
    }
}

/// An NCCL run as `collbench run -J`/`--output x.json` writes it: a RING
/// row, an NVLS row (busbw overstated), a send/recv row with two kernels
/// and a row NCCL could not explain.
fn nccl_record() -> Record {
    let ring = Explanation::from_kernels([KernelChoice::new("AllReduce", "RING", "LL", 2)], [], 0);
    let nvls = Explanation::from_kernels(
        [KernelChoice::new("AllReduce", "NVLS", "SIMPLE", 16)],
        [],
        0,
    );
    let p2p = Explanation::from_kernels(
        [
            KernelChoice::new("Send", "", "", 1),
            KernelChoice::new("Recv", "", "", 1),
        ],
        [],
        0,
    );
    let mut r = Record::new("collbench");
    r.backend = Some("nccl".into());
    r.library = Some("NCCL 2.28.3".into());
    r.settings.world_size = 2;
    r.results = vec![
        case("all_reduce", 8, ring.clone(), ring),
        case("all_reduce", 1 << 30, nvls.clone(), nvls),
        case("sendrecv", 1 << 20, p2p.clone(), p2p),
        case(
            "sendrecv",
            2 << 20,
            Explanation::unavailable("NCCL_PROFILER_PLUGIN was set by the user"),
            Explanation::unavailable("NCCL_PROFILER_PLUGIN was set by the user"),
        ),
    ];
    r
}

#[test]
fn the_collbench_json_parser_keeps_explanations() {
    let original = nccl_record();
    let json = serde_json::to_string_pretty(&original).unwrap();
    let parsed = parse_str(&json, None, "run.json").unwrap();
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].results, original.results);
    let nvls = parsed[0].results[1].out_of_place.as_ref().unwrap();
    let e = nvls.explain.as_ref().unwrap();
    assert!(e.busbw_overstated);
    assert_eq!(e.busbw_note.as_deref(), Some(BUSBW_NOTE));
    // An array of records, too.
    let json = serde_json::to_string(&[&original, &original]).unwrap();
    let parsed = parse_str(&json, None, "runs.json").unwrap();
    assert_eq!(parsed[1].results, original.results);
}

#[test]
fn report_shows_algorithm_protocol_and_channels_per_row() {
    let json = serde_json::to_string(&nccl_record()).unwrap();
    let recs = parse_str(&json, None, "run.json").unwrap();
    let md = markdown::render(&recs);
    assert!(
        md.contains("| #wrong | in-place time (µs) | in-place algbw (GB/s) | in-place busbw (GB/s) | in-place #wrong | algo | proto | channels | in-place algo | in-place proto | in-place channels |"),
        "{md}"
    );
    assert!(
        md.contains("| 8 B | 2 | float | sum | -1 | 100.00 | 100.00 | 100.00 | 0 | 100.00 | 99.00 | 99.00 | 0 | RING | LL | 2 | RING | LL | 2 |"),
        "{md}"
    );
    assert!(
        md.contains("| NVLS* | SIMPLE | 16 | NVLS* | SIMPLE | 16 |\n\n- algo* (NVLS): in-network or multicast algorithm"),
        "{md}"
    );
    assert!(
        md.contains("| Recv+Send | - | 1 | Recv+Send | - | 1 |"),
        "{md}"
    );
    assert!(
        md.contains("| n/a | n/a | n/a | n/a | n/a | n/a |\n\n- n/a: NCCL_PROFILER_PLUGIN was set by the user\n"),
        "{md}"
    );
    let page = html::render(&recs, &[]);
    assert!(
        page.contains("<th>algo</th><th>proto</th><th>channels</th>"),
        "{page}"
    );
    assert!(
        page.contains("<td>NVLS*</td><td>SIMPLE</td><td class=\"n\">16</td>"),
        "{page}"
    );
    assert!(
        page.contains("<p class=\"note\">algo* (NVLS): in-network or multicast algorithm"),
        "{page}"
    );
}

#[test]
fn reports_of_logs_without_explanations_keep_their_columns() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/anchors/all_reduce.txt");
    let recs = parse_file(&path, None).unwrap();
    let md = markdown::render(&recs);
    for header in md.lines().filter(|l| l.starts_with("| size |")) {
        assert!(header.ends_with("| in-place #wrong |"), "{header}");
    }
    assert!(!md.contains("algo*") && !md.contains("n/a:"), "{md}");
    let page = html::render(&recs, &[]);
    assert!(!page.contains("<th>algo</th>"));
}
