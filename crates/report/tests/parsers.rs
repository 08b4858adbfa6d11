//! Every parser against real logs: the figures asserted here are the ones
//! `fixtures/foreign/INDEX.md` and the anchors give.

use collbench_core::{CaseResult, Record};
use collbench_report::parse::{
    detect::detect, parse_file, parse_str, read_file, read_file_with, Format, Strictness,
};
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn parse(rel: &str) -> Vec<Record> {
    parse_file(&fixture(rel), None).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn one(rel: &str) -> Record {
    let mut r = parse(rel);
    assert_eq!(r.len(), 1, "{rel}: expected one record");
    r.remove(0)
}

fn largest(r: &Record) -> &CaseResult {
    r.results.iter().max_by_key(|c| c.size_bytes).unwrap()
}

/// The out-of-place busbw of the largest size.
fn largest_busbw(r: &Record) -> f64 {
    largest(r).out_of_place.as_ref().unwrap().busbw_gbps
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[track_caller]
fn assert_close(a: f64, b: f64, tol: f64) {
    assert!(close(a, b, tol), "{a} != {b} (tol {tol})");
}

fn detected(rel: &str) -> Option<Format> {
    detect(&String::from_utf8_lossy(
        &std::fs::read(fixture(rel)).unwrap(),
    ))
}

#[test]
fn anchor_all_reduce_text() {
    let r = one("anchors/all_reduce.txt");
    assert_eq!(r.source, "nccl-tests");
    assert_eq!(r.tool_version.as_deref(), Some("2.19.6"));
    assert_eq!(r.library.as_deref(), Some("NCCL 2.28.3"));
    assert_eq!(r.results.len(), 31);
    assert_eq!(r.ops(), ["all_reduce"]);
    let big = largest(&r);
    assert_eq!(big.size_bytes, 8589934592);
    assert_eq!(big.count, 2147483648);
    let oop = big.out_of_place.as_ref().unwrap();
    assert_close(oop.busbw_gbps, 349.58, 1e-9);
    assert_close(oop.time_us, 24571.9, 1e-9);
    assert_eq!(oop.wrong, Some(0));
    assert_eq!(oop.iterations, 20);
    assert_close(big.in_place.as_ref().unwrap().busbw_gbps, 343.73, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), 112.223, 1e-9);
    // The printed average is the mean over both placements of every row.
    assert_close(r.avg_busbw(None), 112.223, 0.001);
    assert_eq!(r.devices.len(), 2);
    assert_eq!(r.devices[1].bus_id.as_deref(), Some("0000:00:07"));
    assert_eq!(r.devices[1].name, "NVIDIA H200");
    assert_eq!(r.settings.world_size, 2);
    assert_eq!(r.settings.gpus_per_thread, 2);
    assert_eq!(r.settings.step_factor, Some(2));
    assert_eq!(
        (
            r.settings.warmup_iters,
            r.settings.iters,
            r.settings.agg_iters
        ),
        (5, 20, 1)
    );
    assert!(r.settings.check);
}

#[test]
fn anchor_all_reduce_json_agrees_with_text() {
    let j = one("anchors/all_reduce.json");
    let t = one("anchors/all_reduce.txt");
    assert_eq!(detected("anchors/all_reduce.json"), Some(Format::NcclJson));
    assert_eq!(j.results.len(), 31);
    assert_eq!(j.ops(), ["all_reduce"]);
    assert_close(largest_busbw(&j), 349.583932, 1e-9);
    assert_close(j.avg_busbw_gbps.unwrap(), 112.222612, 1e-9);
    assert_eq!(j.library.as_deref(), Some("NCCL 2.28.3"));
    assert_eq!(j.env.get("NCCL_NVLS_ENABLE").map(String::as_str), Some("0"));
    assert_eq!(j.start_time.as_deref(), Some("2026-11-30T01:37:10"));
    for (a, b) in j.results.iter().zip(&t.results) {
        assert_eq!(
            (a.size_bytes, a.count, &a.dtype, &a.redop, a.root),
            (b.size_bytes, b.count, &b.dtype, &b.redop, b.root)
        );
        for (pa, pb) in [
            (&a.out_of_place, &b.out_of_place),
            (&a.in_place, &b.in_place),
        ] {
            let (pa, pb) = (pa.as_ref().unwrap(), pb.as_ref().unwrap());
            // The text rounds to 2 decimals, or to 7 significant characters.
            assert!(
                close(pa.busbw_gbps, pb.busbw_gbps, 0.0051),
                "{} B: {} vs {}",
                a.size_bytes,
                pa.busbw_gbps,
                pb.busbw_gbps
            );
            assert!(
                close(pa.time_us, pb.time_us, 0.06),
                "{} B time",
                a.size_bytes
            );
            assert_eq!(pa.wrong, pb.wrong);
        }
    }
}

#[test]
fn anchor_alltoall_json_and_text_na() {
    let j = one("anchors/alltoall.json");
    assert_eq!(j.ops(), ["alltoall"]);
    assert_close(largest_busbw(&j), 338.227574, 1e-9);
    assert_close(j.avg_busbw_gbps.unwrap(), 102.830637, 1e-9);

    let t = one("anchors/mpi2_alltoall.txt");
    assert_eq!(t.ops(), ["alltoall"]);
    assert_eq!(t.settings.processes, 2);
    let big = largest(&t);
    assert_close(big.out_of_place.as_ref().unwrap().busbw_gbps, 338.20, 1e-9);
    assert_eq!(
        big.in_place.as_ref().unwrap().wrong,
        None,
        "N/A in-place #wrong"
    );
    assert_close(big.in_place.as_ref().unwrap().busbw_gbps, 365.16, 1e-9);
    assert_close(t.avg_busbw_gbps.unwrap(), 104.63, 1e-9);
    assert_eq!(t.results.iter().filter(|c| c.size_bytes == 0).count(), 2);
}

#[test]
fn anchor_graph_periter_reduce_sendrecv() {
    let g = one("anchors/g2_all_reduce_graph.txt");
    assert_eq!(g.settings.graph, 10);
    assert_eq!(g.ops(), ["all_reduce"]);
    assert_eq!(largest(&g).size_bytes, 1048576);

    let p = one("anchors/mpi2_all_reduce_periter.txt");
    assert_eq!(
        p.results.len(),
        31,
        "per-iteration columns are skipped, rows kept"
    );
    assert_close(p.avg_busbw_gbps.unwrap(), 110.177, 1e-9);
    assert_close(p.results[0].in_place.as_ref().unwrap().time_us, 9.64, 1e-9);

    let pj = one("anchors/mpi2_all_reduce_periter.json");
    let stats = largest(&pj).out_of_place.as_ref().unwrap().stats.unwrap();
    assert_close(stats.p50_us, 25053.951263, 1e-6);
    assert_close(stats.p99_us, 25258.464813, 1e-6);
    assert_eq!(stats.samples, 20);
    assert_eq!(pj.devices.len(), 2);

    let r = one("anchors/reduce.txt");
    assert_eq!(r.ops(), ["reduce"]);
    assert!(r.results.iter().all(|c| c.root == 0 && c.redop == "sum"));

    let s = one("anchors/sendrecv.txt");
    assert_eq!(s.ops(), ["sendrecv"]);
}

#[test]
fn foreign_nccl_tests_two_nodes_without_version_line() {
    let r = one("foreign/nccl-tests__ztan-a3mega-h100-2node.txt");
    assert_eq!(r.results.len(), 31);
    assert_eq!(r.devices.len(), 16);
    assert_eq!(r.settings.world_size, 16);
    let hosts: std::collections::BTreeSet<&str> =
        r.devices.iter().map(|d| d.host.as_str()).collect();
    assert_eq!(
        hosts.into_iter().collect::<Vec<_>>(),
        ["ztan-mig-235z", "ztan-mig-gq73"]
    );
    assert_eq!(r.devices[0].name, "NVIDIA H100 80GB HBM3");
    // The log never names the op: the row shape (sum, root -1, size = count x 4) says all_reduce.
    assert_eq!(r.ops(), ["all_reduce"]);
    let big = largest(&r);
    assert_eq!(big.size_bytes, 8589934592);
    let oop = big.out_of_place.as_ref().unwrap();
    assert_close(oop.time_us, 47535.0, 1e-9);
    assert_close(oop.algbw_gbps, 180.71, 1e-9);
    assert_close(oop.busbw_gbps, 338.82, 1e-9);
    assert_eq!(oop.wrong, Some(0));
    assert_close(big.in_place.as_ref().unwrap().busbw_gbps, 337.35, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), 70.742, 1e-9);
    assert_eq!(r.tool_version, None);
}

#[test]
fn seed000_flattened_tables() {
    let recs = parse("seeds/seed000_gke_flattened.txt");
    let avgs: Vec<f64> = recs.iter().map(|r| r.avg_busbw_gbps.unwrap()).collect();
    assert_eq!(avgs, [236.839, 120.248, 120.248, 29.8293, 45.7587]);
    let rows: Vec<usize> = recs.iter().map(|r| r.results.len()).collect();
    assert_eq!(rows, [24, 24, 24, 10, 31]);
    for r in &recs {
        assert_eq!(
            r.ops(),
            ["all_gather"],
            "named in the prose before each table"
        );
    }
    let a4x = largest(&recs[0]);
    assert_eq!(a4x.size_bytes, 8589934592);
    assert_close(a4x.out_of_place.as_ref().unwrap().busbw_gbps, 651.28, 1e-9);
    assert_close(a4x.in_place.as_ref().unwrap().busbw_gbps, 665.58, 1e-9);
    assert_close(a4x.out_of_place.as_ref().unwrap().time_us, 11541.0, 1e-9);
    let mega = &recs[4];
    assert_eq!(mega.results.iter().filter(|c| c.size_bytes == 0).count(), 5);
    assert_close(
        largest(mega).out_of_place.as_ref().unwrap().busbw_gbps,
        189.03,
        1e-9,
    );
}

#[test]
fn nccom_tables() {
    let r = one("foreign/nccom-test__neuron-doc-2rank-fp32-allr.txt");
    assert_eq!(r.source, "nccom-test");
    assert_eq!(r.settings.average, "p50");
    assert_eq!(r.settings.world_size, 2);
    assert_eq!(r.results.len(), 11);
    assert_eq!(r.ops(), ["all_reduce"]);
    let big = largest(&r);
    assert_eq!(
        (big.size_bytes, big.count, big.dtype.as_str()),
        (1073741824, 268435456, "fp32")
    );
    let p = big.out_of_place.as_ref().unwrap();
    assert_close(p.time_us, 18930.0, 1e-9);
    assert_close(p.algbw_gbps, 52.83, 1e-9);
    assert_close(p.busbw_gbps, 52.83, 1e-9);
    assert!(big.in_place.is_none());
    assert_close(r.avg_busbw_gbps.unwrap(), 23.6671, 1e-9);

    let r = one("foreign/nccom-test__neuron-doc-32rank-allg-check.txt");
    assert_eq!(r.ops(), ["all_gather"]);
    assert!(r.settings.check);
    assert_eq!(r.results.len(), 4);
    let p = largest(&r).out_of_place.clone().unwrap();
    assert_eq!(largest(&r).size_bytes, 524288);
    assert_close(p.time_us, 179.0, 1e-9);
    assert_close(p.busbw_gbps, 2.64, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), 0.7731, 1e-9);

    let r = one("foreign/nccom-test__neuron-doc-64rank-2node-allr.txt");
    assert_eq!(r.results.len(), 28);
    assert_eq!(r.settings.world_size, 64);
    assert_eq!(r.command_line[0], "nccom-test");
    let p = largest(&r).out_of_place.clone().unwrap();
    assert_close(p.time_us, 41806.0, 1e-9);
    assert_close(p.algbw_gbps, 23.92, 1e-9);
    assert_close(p.busbw_gbps, 47.09, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), 9.3924, 1e-9);

    // The documentation page: prose around one sample table.
    let r = one("seeds/seed003_nccom_doc.txt");
    assert_eq!(r.results.len(), 6);
    assert_close(largest_busbw(&r), 21.08, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), 18.37, 1e-9);
}

#[test]
fn osu_tables() {
    let r = one("foreign/osu_allreduce__ai-fabric-lab-v7.4.txt");
    assert_eq!(r.source, "osu");
    assert_eq!(r.tool_version.as_deref(), Some("7.4"));
    assert_eq!(r.ops(), ["osu_allreduce"]);
    assert_eq!(r.results.len(), 21);
    let big = largest(&r);
    assert_eq!((big.size_bytes, big.dtype.as_str()), (1048576, "char"));
    let p = big.out_of_place.as_ref().unwrap();
    assert_close(p.time_us, 18815.58, 1e-9);
    // size / latency in decimal GB/s is algbw; OSU has no rank count, so no busbw.
    assert_close(p.algbw_gbps, 1048576.0 / 18815.58e3, 1e-12);
    assert_eq!(p.busbw_gbps, 0.0);
    assert_eq!(p.wrong, None, "unchecked OSU runs are N/A, not 0");

    let r = one("foreign/osu_bw__ai-fabric-lab-v7.4.txt");
    assert_eq!(r.ops(), ["osu_bw"]);
    assert_eq!(r.results.len(), 23);
    let p = largest(&r).out_of_place.clone().unwrap();
    // OSU's bandwidth is algbw (MB/s / 1000); no time was measured.
    assert_close(p.algbw_gbps, 0.10140, 1e-12);
    assert_eq!(p.busbw_gbps, 0.0);
    assert_eq!(p.time_us, 0.0);
    let peak = r
        .results
        .iter()
        .max_by(|a, b| {
            let bw = |c: &collbench_core::CaseResult| c.out_of_place.as_ref().unwrap().algbw_gbps;
            bw(a).total_cmp(&bw(b))
        })
        .unwrap();
    assert_eq!(peak.size_bytes, 262144);
    assert_close(
        peak.out_of_place.as_ref().unwrap().algbw_gbps,
        0.11056,
        1e-12,
    );

    let r = one("foreign/osu_latency__ai-fabric-lab-v7.4.txt");
    assert_eq!(r.ops(), ["osu_latency"]);
    assert_eq!(r.results.len(), 23);
    assert_close(
        largest(&r).out_of_place.as_ref().unwrap().time_us,
        43092.92,
        1e-9,
    );
    assert_eq!(r.results[0].size_bytes, 1);
    assert_close(
        r.results[0].out_of_place.as_ref().unwrap().time_us,
        24.87,
        1e-9,
    );

    let r = one("small/osu_allreduce_full_stats.txt");
    assert_eq!(r.results[0].dtype, "float");
    assert_eq!(r.results[0].count, 1);
    let p = largest(&r).out_of_place.clone().unwrap();
    let stats = p.stats.unwrap();
    assert_close(stats.min_us, 300.25, 1e-9);
    assert_close(stats.max_us, 322.75, 1e-9);
    assert_eq!(p.iterations, 100);
}

#[test]
fn nvshmem_tables() {
    for rel in [
        "foreign/nvshmem-perftest__cscs-alps-gh200-alltoall_latency.txt",
        "foreign/nvshmem-perftest__cscs-alps-gh200-alltoall_latency-8pe-interleaved.txt",
    ] {
        assert_eq!(detected(rel), Some(Format::Nvshmem), "{rel}");
        let r = one(rel);
        assert_eq!(r.source, "nvshmem-perftest");
        assert_eq!(r.results.len(), 77, "{rel}");
        let series = r.summaries();
        assert_eq!(series.len(), 6, "{rel}");
        let block32 = series
            .iter()
            .find(|s| s.op == "alltoall_device/block" && s.dtype == "32-bit")
            .unwrap();
        assert_eq!(block32.largest_bytes, 4194304);
        assert_close(block32.busbw_at_largest_gbps, 20.036, 1e-9);
        let last = r
            .results
            .iter()
            .rfind(|c| c.op == "alltoall_device/block" && c.dtype == "32-bit")
            .unwrap();
        let p = last.out_of_place.as_ref().unwrap();
        assert_close(p.time_us, 183.171201, 1e-9);
        assert_close(p.algbw_gbps, 22.898, 1e-9);
        let max = r
            .results
            .iter()
            .filter_map(|c| c.out_of_place.as_ref())
            .map(|p| p.busbw_gbps)
            .fold(0.0, f64::max);
        assert_close(max, 20.044, 1e-9);
        assert!(r
            .devices
            .iter()
            .any(|d| d.rank == 6 && d.device == 2 && d.name == "NVIDIA GH200 120GB"));
    }
    let r = one("foreign/nvshmem-perftest__cscs-alps-gh200-alltoall_latency-8pe-interleaved.txt");
    assert_eq!(
        r.devices.len(),
        8,
        "every PE's preamble, before and after the tables"
    );

    let r = one("small/nvshmem_reduce.txt");
    assert_eq!(r.ops(), ["reduce_on_stream"]);
    assert_eq!(r.results[1].redop, "sum");
    assert_close(
        r.results[1].out_of_place.as_ref().unwrap().busbw_gbps,
        0.341,
        1e-9,
    );
}

#[test]
fn rccl_tests_text() {
    assert_eq!(detected("small/rccl_allreduce.txt"), Some(Format::Rccl));
    let r = one("small/rccl_allreduce.txt");
    assert_eq!(r.source, "rccl-tests");
    assert_eq!(r.tool_version.as_deref(), Some("develop:0123abc"));
    assert_eq!(r.library.as_deref(), Some("RCCL 2.27.7-develop:1234abc"));
    assert_eq!(
        r.env.get("ROCM_VERSION").map(String::as_str),
        Some("7.0.1.0-42-9428210")
    );
    assert_eq!(r.devices[1].name, "AMD Instinct MI300X");
    assert_eq!(r.results.len(), 10);
    let big = largest(&r);
    assert_close(big.out_of_place.as_ref().unwrap().busbw_gbps, 17.48, 1e-9);
    assert_eq!(
        big.out_of_place.as_ref().unwrap().wrong,
        Some(3),
        "'3*' is a count over the threshold"
    );
    assert_eq!(r.total_wrong(), 3);
    assert_close(r.avg_busbw_gbps.unwrap(), 3.53, 1e-9);
}

#[test]
fn nccl_tests_cputime_timestamps_multi_block_and_old_layout() {
    let r = one("small/nccl_cputime_timestamps.txt");
    assert_eq!(r.ops(), ["all_gather"]);
    assert_eq!(r.results.len(), 3);
    let big = largest(&r);
    assert_close(big.out_of_place.as_ref().unwrap().time_us, 11.0, 1e-9);
    assert_close(big.in_place.as_ref().unwrap().busbw_gbps, 0.18, 1e-9);
    assert_close(r.avg_busbw_gbps.unwrap(), r.avg_busbw(None), 1e-5);

    let recs = parse("small/nccl_multi_block.txt");
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].ops(), ["all_reduce"]);
    assert_eq!(recs[0].summaries().len(), 2, "float and half");
    assert_close(
        recs[0].avg_busbw_gbps.unwrap(),
        recs[0].avg_busbw(None),
        0.001,
    );
    assert_eq!(recs[1].ops(), ["broadcast"]);
    assert_eq!(
        recs[1].results.iter().map(|c| c.root).collect::<Vec<_>>(),
        [0, 0, 1, 1]
    );
    assert!(recs[1]
        .results
        .iter()
        .all(|c| c.out_of_place.as_ref().unwrap().wrong.is_none()));
    assert!(!recs[1].settings.check);

    let r = one("small/nccl_old_2016.txt");
    assert_eq!(r.results.len(), 2);
    assert_eq!(r.settings.step_bytes, Some(128));
    assert_eq!(r.devices.len(), 4);
    assert_eq!(r.devices[3].bus_id.as_deref(), Some("0x07"));
    assert_eq!(r.results[1].root, -1);
    assert_eq!(r.results[1].redop, "sum");
    // The old `res` column is the largest error, not a count: N/A, with a warning.
    assert_eq!(r.results[1].out_of_place.as_ref().unwrap().wrong, None);
    let p = read_file(&fixture("small/nccl_old_2016.txt"), None).unwrap();
    assert!(
        p.warnings.iter().any(|w| w.message.contains("not a count")),
        "{:?}",
        p.warnings
    );
    assert_close(
        r.results[1].in_place.as_ref().unwrap().busbw_gbps,
        0.06,
        1e-9,
    );
    assert_close(r.avg_busbw_gbps.unwrap(), 0.03, 1e-9);
    assert_eq!(r.ops(), ["all_reduce"]);
}

#[test]
fn collbench_json_round_trips() {
    let recs = parse("anchors/all_reduce.txt");
    let json = serde_json::to_string_pretty(&recs[0]).unwrap();
    assert_eq!(detect(&json), Some(Format::CollbenchJson));
    let back = parse_str(&json, None, "x.json").unwrap();
    assert_eq!(back, recs);
    let array = serde_json::to_string(&recs).unwrap();
    assert_eq!(parse_str(&array, None, "x.json").unwrap(), recs);
}

#[test]
fn format_can_be_forced() {
    let text = std::fs::read_to_string(fixture("anchors/all_reduce.txt")).unwrap();
    let as_rccl = parse_str(&text, Some(Format::Rccl), "a.txt").unwrap();
    assert_eq!(as_rccl[0].source, "rccl-tests");
    let err = parse_str(&text, Some(Format::Osu), "a.txt").unwrap_err();
    assert!(err.message.contains("no OSU rows"), "{err}");
}

#[test]
fn malformed_input_names_file_line_and_expectation() {
    // --strict refuses the file at the line it cannot place.
    let strict = |rel: &str| {
        read_file_with(&fixture(rel), None, Strictness::Refuse)
            .unwrap_err()
            .to_string()
    };
    let err = strict("bad/short_row.txt");
    assert!(err.contains("short_row.txt:5:"), "{err}");
    assert!(err.contains("expected a row of 13 columns"), "{err}");

    let err = strict("bad/bad_number.txt");
    assert!(err.contains("bad_number.txt:4:"), "{err}");
    assert!(
        err.contains("expected a latency in us (a number), found '2x.29'"),
        "{err}"
    );

    // Without it (issue #49) the other rows are read, and one line names
    // the line skipped and why.
    let p = read_file(&fixture("bad/short_row.txt"), None).unwrap();
    assert_eq!(p.records[0].results.len(), 2);
    let line = p.skipped[0].to_string();
    assert!(
        line.contains("short_row.txt: 1 line skipped; first: line 5 '16"),
        "{line}"
    );
    assert!(line.contains("expected a row of 13 columns"), "{line}");
    let p = read_file(&fixture("bad/bad_number.txt"), None).unwrap();
    assert_eq!(p.records[0].results.len(), 1);
    let line = p.skipped[0].to_string();
    assert!(
        line.contains("bad_number.txt: 1 line skipped; first: line 4 '2"),
        "{line}"
    );
    assert!(line.contains("found '2x.29'"), "{line}");

    let err = parse_str("{\"version\":3,\"results\":[{\"size\":8}]}", None, "j").unwrap_err();
    assert!(
        err.message.starts_with("results[0].") && err.message.ends_with("missing"),
        "{err}"
    );
    let err = parse_str("{\"schema_version\": 1,\n \"source\": 3}", None, "j").unwrap_err();
    assert_eq!(err.line, 2, "{err}");
    let err = parse_str("hello world", None, "j").unwrap_err();
    assert!(err.message.contains("cannot tell the format"), "{err}");
}

#[test]
fn every_fixture_is_detected() {
    let expect = [
        ("anchors/all_reduce.txt", Format::NcclTests),
        ("anchors/mpi2_all_reduce_periter.json", Format::NcclJson),
        (
            "foreign/nccl-tests__ztan-a3mega-h100-2node.txt",
            Format::NcclTests,
        ),
        (
            "foreign/nccom-test__neuron-doc-64rank-2node-allr.txt",
            Format::Nccom,
        ),
        ("foreign/osu_bw__ai-fabric-lab-v7.4.txt", Format::Osu),
        ("seeds/seed000_gke_flattened.txt", Format::NcclTests),
        ("seeds/seed003_nccom_doc.txt", Format::Nccom),
        ("small/nccl_old_2016.txt", Format::NcclTests),
    ];
    for (rel, f) in expect {
        assert_eq!(detected(rel), Some(f), "{rel}");
    }
}

/// A packager's MPI build (`all_reduce_perf_mpi`) and nccl-tests' own binary
/// name the same op, so their logs have every case in common.
#[test]
fn suffixed_binary_names_are_the_same_op() {
    let text = std::fs::read_to_string(fixture("anchors/all_reduce.txt")).unwrap();
    assert!(text.contains("all_reduce_perf"));
    let base = parse_str(&text, None, "base.txt").unwrap();
    for renamed in ["all_reduce_perf_mpi", "all_reduce_perf_nccl", "all-reduce"] {
        let new = parse_str(&text.replace("all_reduce_perf", renamed), None, "new.txt").unwrap();
        assert_eq!(new[0].ops(), ["all_reduce"], "{renamed}");
        let key = |r: &Record| -> Vec<(String, u64)> {
            r.results
                .iter()
                .map(|c| (c.op.clone(), c.size_bytes))
                .collect()
        };
        assert_eq!(key(&new[0]), key(&base[0]), "{renamed}");
    }
}

/// `collbench run all` on stdout (the CPU backend, 2 rank threads): one
/// run, so one record with every op, labelled as collbench's.
#[test]
fn collbench_text_is_one_run() {
    let rel = "collbench/run_all_cpu.txt";
    assert_eq!(detected(rel), Some(Format::Collbench));
    let r = one(rel);
    assert_eq!(r.source, "collbench");
    assert_eq!(r.tool_version.as_deref(), Some("0.1.0"));
    assert_eq!(r.backend.as_deref(), Some("cpu"));
    assert_eq!(r.library, None);
    assert_eq!(
        r.ops(),
        [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "alltoall",
            "broadcast",
            "reduce",
            "sendrecv",
            "gather",
            "scatter",
            "hypercube",
            "alltoallv"
        ]
    );
    assert_eq!(r.results.len(), 11 * 6);
    assert_eq!(r.settings.world_size, 2);
    assert_eq!(r.devices.len(), 2);
    assert_eq!(r.avg_busbw_gbps, None);
    let first = &r.results[0];
    assert_eq!((first.op.as_str(), first.size_bytes), ("all_reduce", 8));
    assert_close(first.out_of_place.as_ref().unwrap().time_us, 1.84, 1e-9);
    let p = read_file(&fixture(rel), None).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Forcing nccl-tests still reads it as nccl-tests did: one per op.
    let forced = parse_file(&fixture(rel), Some(Format::NcclTests)).unwrap();
    assert_eq!(forced.len(), 11);
}

/// Two runs appended to one file are two records, with the line numbers
/// of the whole file.
#[test]
fn appended_collbench_runs_are_two_records() {
    let text = std::fs::read_to_string(fixture("collbench/run_all_cpu.txt")).unwrap();
    let two = format!("{text}{text}");
    let r = parse_str(&two, None, "two.txt").unwrap();
    assert_eq!(r.len(), 2);
    assert!(r
        .iter()
        .all(|r| r.results.len() == 66 && r.source == "collbench"));
    // Cut before the second run's last footer: the warning names the
    // last line of the whole text.
    let cut = &two[..two.rfind("# Out of bounds").unwrap()];
    let p = collbench_report::parse::parse_text(cut, None, "cut.txt").unwrap();
    let last = cut.lines().count();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.line == last && w.message.starts_with("partial")),
        "{:?}",
        p.warnings
    );
}
