//! The damaged-log corpus: logs as clusters really leave them, made from the
//! fixtures (launcher prefixes, interleaving, cuts, duplicates, units, line
//! ends, colour). Each case asserts its outcome: the right figure, a
//! warning, or one clear error. Never a silently wrong figure.

use collbench_core::{CaseResult, Record};
use collbench_report::input::read_paths;
use collbench_report::parse::{parse_text, parse_text_with, Format, Parsed, Strictness};
use std::path::Path;

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ok(text: &str) -> Parsed {
    parse_text(text, None, "log.txt").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> String {
    match parse_text(text, None, "log.txt") {
        Ok(p) => panic!("expected an error, got {} record(s)", p.records.len()),
        Err(e) => e.to_string(),
    }
}

/// Fails unless one of the parse's warnings says `what`.
fn assert_warned(p: &Parsed, what: &str) {
    assert!(
        p.warnings.iter().any(|w| w.message.contains(what)),
        "no warning says {what:?}: {:?}",
        p.warnings
    );
}

/// The out-of-place algbw of the first record's largest size.
fn last_algbw(p: &Parsed) -> f64 {
    let last = p.records[0].results.last().unwrap();
    last.out_of_place.as_ref().unwrap().algbw_gbps
}

fn case(r: &Record, size: u64) -> &CaseResult {
    r.results
        .iter()
        .find(|c| c.size_bytes == size)
        .unwrap_or_else(|| panic!("no row of size {size}"))
}

const BIG: u64 = 8589934592;

/// busbw (out-of-place) of the 8 GiB all_reduce row: 349.58 in the anchor.
fn big_busbw(p: &Parsed) -> f64 {
    case(&p.records[0], BIG)
        .out_of_place
        .as_ref()
        .unwrap()
        .busbw_gbps
}

fn anchor() -> String {
    fixture("anchors/all_reduce.txt")
}

/// The table row of `size` bytes in `text`.
fn size_row(text: &str, size: u64) -> &str {
    let start = format!("{size} ");
    text.lines()
        .find(|l| l.trim_start().starts_with(&start))
        .unwrap_or_else(|| panic!("no row of {size} bytes"))
}

fn prefixed(text: &str, prefix: impl Fn(usize) -> String) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", prefix(i)))
        .collect()
}

#[test]
fn launcher_prefixes_are_stripped() {
    let plain = ok(&anchor());
    for (name, text) in [
        ("srun --label", prefixed(&anchor(), |_| "  0: ".to_string())),
        (
            "OpenMPI --tag-output",
            prefixed(&anchor(), |_| "[1,0]<stdout>:".to_string()),
        ),
        (
            "OpenMPI --timestamp-output",
            prefixed(&anchor(), |_| {
                "Mon Dec  1 03:02:34 2026[1,0]<stdout>:".to_string()
            }),
        ),
        ("mpirun -l", prefixed(&anchor(), |_| "[0] ".to_string())),
        ("pdsh", prefixed(&anchor(), |_| "gpu-node-07: ".to_string())),
    ] {
        let p = ok(&text);
        assert_eq!(p.records.len(), 1, "{name}");
        assert_eq!(big_busbw(&p), 349.58, "{name}");
        assert_eq!(p.records[0].results, plain.records[0].results, "{name}");
        assert_eq!(p.records[0].settings.world_size, 2, "{name}");
    }
}

#[test]
fn other_ranks_printing_only_info_lines_are_left_out() {
    let mut text = String::new();
    for (i, l) in anchor().lines().enumerate() {
        text.push_str(&format!("  0: {l}\n"));
        if i % 5 == 0 {
            text.push_str("  1: vm:1379:1379 [1] NCCL INFO Bootstrap: Using eth0\n");
        }
    }
    let p = ok(&text);
    assert_eq!(p.records.len(), 1);
    assert_eq!(p.records[0].origin.as_deref(), Some("log.txt"));
    assert_eq!(big_busbw(&p), 349.58);
}

#[test]
fn interleaved_ranks_with_prefixes_are_read_apart() {
    // Two single-rank jobs' tables mixed line by line; the second is slower.
    let a = anchor();
    let b = a.replace("349.58  349.58", "300.00  300.00");
    let mut text = String::new();
    for (la, lb) in a.lines().zip(b.lines()) {
        text.push_str(&format!("[1,0]<stdout>:{la}\n[1,1]<stdout>:{lb}\n"));
    }
    let p = ok(&text);
    assert_eq!(p.records.len(), 2);
    assert_eq!(p.records[0].origin.as_deref(), Some("log.txt [rank 0]"));
    assert_eq!(p.records[1].origin.as_deref(), Some("log.txt [rank 1]"));
    assert_eq!(p.records[0].settings.world_size, 2);
    assert_eq!(
        case(&p.records[1], BIG)
            .out_of_place
            .as_ref()
            .unwrap()
            .busbw_gbps,
        300.0
    );
    assert_eq!(big_busbw(&p), 349.58);
}

#[test]
fn interleaved_ranks_without_prefixes_are_refused_naming_the_lines() {
    let a = anchor();
    let mut text = String::new();
    for l in a.lines() {
        text.push_str(&format!("{l}\n{l}\n"));
    }
    let e = err(&text);
    assert!(e.contains("interleaved"), "{e}");
    assert!(e.contains("lines 13 and 14: rank 0 is listed twice"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");

    // Only the rows interleaved (headers printed once by each, apart).
    let rows: Vec<&str> = a.lines().filter(|l| l.starts_with("  ")).collect();
    let head: String = a.lines().take(12).map(|l| format!("{l}\n")).collect();
    let mut text = head;
    for r in &rows {
        text.push_str(&format!("{r}\n{r}\n"));
    }
    let e = err(&text);
    assert!(
        e.contains("the same size is printed on consecutive rows"),
        "{e}"
    );
    assert!(e.contains("lines 13 and 14"), "{e}");
}

#[test]
fn line_ends_and_colour_do_not_matter() {
    for (name, text) in [
        ("CRLF", anchor().replace('\n', "\r\n")),
        ("CR", anchor().replace('\n', "\r")),
        (
            "ANSI colour",
            anchor()
                .lines()
                .map(|l| format!("\u{1b}[0;32m{l}\u{1b}[0m\n"))
                .collect(),
        ),
    ] {
        let p = ok(&text);
        assert_eq!(big_busbw(&p), 349.58, "{name}");
        assert_eq!(p.records[0].avg_busbw_gbps, Some(112.223), "{name}");
    }
}

#[test]
fn nccl_tests_times_in_ms_are_read_as_ms() {
    let text = anchor().replacen(
        "(us)  (GB/s)  (GB/s)             (us)",
        "(ms)  (GB/s)  (GB/s)             (ms)",
        1,
    );
    assert_ne!(text, anchor());
    let p = ok(&text);
    let oop = case(&p.records[0], BIG).out_of_place.clone().unwrap();
    assert_eq!(oop.time_us, 24571.9 * 1000.0);
    assert_eq!(oop.busbw_gbps, 349.58);
    assert_eq!(p.units[0].time, "ms");
}

#[test]
fn unknown_units_are_errors() {
    let text = anchor().replacen("(us)  (GB/s)", "(xs)  (GB/s)", 1);
    let e = err(&text);
    assert!(
        e.contains("line 12") && e.contains("unknown time unit 'xs'"),
        "{e}"
    );

    let osu =
        fixture("foreign/osu_latency__ai-fabric-lab-v7.4.txt").replace("(us)", "(fortnights)");
    let e = err(&osu);
    assert!(
        e.contains("no known unit in header cell 'Avg Latency(fortnights)'"),
        "{e}"
    );
}

#[test]
fn osu_units_come_from_the_header() {
    let osu = fixture("foreign/osu_latency__ai-fabric-lab-v7.4.txt");
    let p = ok(&osu.replace("Avg Latency(us)", "Avg Latency(ms)"));
    let t = p.records[0].results[0]
        .out_of_place
        .as_ref()
        .unwrap()
        .time_us;
    assert_eq!(t, 24.87 * 1000.0, "a latency printed in ms is not 0.02 us");

    let bw = fixture("foreign/osu_bw__ai-fabric-lab-v7.4.txt");
    let p = ok(&bw);
    assert!((last_algbw(&p) - 0.1014).abs() < 1e-12);
    assert_eq!(p.units[0].bandwidth, "MB/s");
    let p = ok(&bw.replace("Bandwidth (MB/s)", "Bandwidth (GB/s)"));
    assert_eq!(
        last_algbw(&p),
        101.40,
        "a bandwidth printed in GB/s is not 1000x low"
    );
}

#[test]
fn conflicting_duplicate_rows_warn() {
    let a = anchor();
    let row = size_row(&a, 1048576);
    let other = row.replace("sum", "sum ").replacen("  0 ", " 0 ", 0);
    let changed: String = {
        // Same size, different busbw.
        let mut t: Vec<String> = other.split_whitespace().map(str::to_string).collect();
        t[7] = "1.23".to_string();
        t.join("  ")
    };
    let text = a.replace(row, &format!("{row}\n{}", changed));
    let p = ok(&text);
    assert_warned(&p, "appear twice with different figures");
    assert_warned(&p, "1 MiB");
    // The first row counts in summaries and compare.
    let first = case(&p.records[0], 1048576).out_of_place.clone().unwrap();
    assert_ne!(first.busbw_gbps, 1.23);
}

#[test]
fn rows_out_of_order_and_a_sweep_cut_short_warn() {
    let a = anchor();
    let lines: Vec<&str> = a.lines().collect();
    let (i, j) = (
        lines
            .iter()
            .position(|l| l.trim_start().starts_with("1024 "))
            .unwrap(),
        lines
            .iter()
            .position(|l| l.trim_start().starts_with("2048 "))
            .unwrap(),
    );
    let mut swapped = lines.clone();
    swapped.swap(i, j);
    let p = ok(&(swapped.join("\n") + "\n"));
    assert_warned(&p, "out of size order (1 KiB after 2 KiB)");

    // The table stops at 1 GiB though the header says 8 GiB.
    let cut: String = a
        .lines()
        .filter(|l| {
            let s = l.split_whitespace().next().unwrap_or("");
            s.parse::<u64>().map_or(true, |s| s <= 1 << 30)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let p = ok(&cut);
    assert_warned(
        &p,
        "partial: the table stops at 1 GiB but the header's maxBytes is 8 GiB",
    );
}

#[test]
fn out_of_bounds_failures_warn() {
    let text = anchor().replace(
        "Out of bounds values : 0 OK",
        "Out of bounds values : 12 FAILED",
    );
    let p = ok(&text);
    assert_warned(
        &p,
        "found 12 result value(s) outside tolerance (FAILED): the run produced wrong results",
    );
    assert!(p.faults.iter().any(|f| matches!(
        f,
        collbench_report::input::Fault::OutOfBounds { count: 12, .. }
    )));
}

#[test]
fn old_error_columns_are_not_wrong_counts() {
    let text = fixture("small/nccl_old_2016.txt").replacen("0e+00", "2.4e-07", 1);
    let p = ok(&text);
    let r = &p.records[0];
    assert!(r
        .results
        .iter()
        .flat_map(|c| c.placements())
        .all(|(_, p)| p.wrong.is_none()));
    assert_eq!(r.total_wrong(), 0, "a float error is not counted as #wrong");
    assert_warned(&p, "largest error in this table: 2.4e-7");
}

#[test]
fn a_log_cut_mid_row_keeps_its_complete_rows() {
    let a = anchor();
    let at = a.find("  8589934592").unwrap() + 40;
    // Killed job: the last line is cut and has no line end.
    let p = ok(&a[..at]);
    assert_warned(&p, "partial: the log ends mid-row");
    assert!(p.partial());
    let r = &p.records[0];
    assert_eq!(r.results.last().unwrap().size_bytes, 4294967296);
    assert_eq!(r.results.len(), 30);

    // Cut inside a number that still reads as one: the row is not trusted.
    let at = a.find("349.58").unwrap() + 5;
    let p = ok(&a[..at]);
    assert!(p.records[0].results.iter().all(|c| c.size_bytes != BIG));
    assert_warned(&p, "partial");

    // Cut after a whole line: no footer, the rows are kept and it says so.
    let at = a.find("# Out of bounds").unwrap();
    let p = ok(&a[..at]);
    assert_eq!(big_busbw(&p), 349.58);
    assert_warned(&p, "partial: the log ends before the '# Avg bus bandwidth'");

    // The same for OSU.
    let osu = fixture("foreign/osu_latency__ai-fabric-lab-v7.4.txt");
    let at = osu.find("43092").unwrap() + 3;
    let p = ok(&osu[..at]);
    assert_eq!(p.records[0].results.len(), 22);
    assert_warned(&p, "partial");
}

#[test]
fn a_short_row_in_the_middle_is_an_error() {
    let a = anchor();
    let row = size_row(&a, 1048576);
    let short: String = row
        .split_whitespace()
        .take(9)
        .collect::<Vec<_>>()
        .join("  ");
    let text = a.replace(row, &short);
    // --strict refuses it; without, the row is skipped and counted
    // (issue #49: one line must not cost the whole file).
    let e = parse_text_with(&text, None, "log.txt", Strictness::Refuse)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a row of 13 columns"), "{e}");
    let p = ok(&text);
    assert_eq!(
        p.records[0].results.len(),
        ok(&a).records[0].results.len() - 1
    );
    assert_eq!(p.skipped[0].count, 1);
    assert!(p.skipped[0].reason.contains("expected a row of 13 columns"));
}

#[test]
fn unchecked_runs_are_na_not_zero() {
    let p = ok(&fixture("foreign/osu_allreduce__ai-fabric-lab-v7.4.txt"));
    assert!(p.records[0]
        .results
        .iter()
        .all(|c| c.out_of_place.as_ref().unwrap().wrong.is_none()));
    assert_warned(&p, "not checked");
    let md = collbench_report::render::markdown::render(&p.records);
    assert!(md.contains("| N/A |"), "{md}");
    assert!(!md.contains("| 0 |\n"), "{md}");
}

#[test]
fn folders_skip_what_they_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# Logs of last week\n").unwrap();
    std::fs::write(
        dir.path().join("stray.log"),
        "slurmstepd: error: *** JOB 42 CANCELLED ***\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("all_reduce.txt"), anchor()).unwrap();
    let inputs = read_paths(&[dir.path().to_path_buf()], None, false).unwrap();
    assert_eq!(inputs.parsed.records.len(), 1);
    assert_eq!(inputs.skipped.len(), 2, "{:?}", inputs.skipped);
    assert!(inputs.skipped[0].contains("README.md"));
    assert!(inputs.skipped[1].contains("stray.log"));
    assert_eq!(
        inputs
            .skipped
            .iter()
            .filter(|s| s.lines().count() == 1)
            .count(),
        2
    );
    let e = read_paths(&[dir.path().to_path_buf()], None, true).unwrap_err();
    assert!(e.to_string().contains("README.md"), "{e}");
    // Named directly, a file must parse.
    assert!(read_paths(&[dir.path().join("stray.log")], None, false).is_err());
    // Forced format in a folder: files that do not read as it are skipped too.
    let inputs = read_paths(&[dir.path().to_path_buf()], Some(Format::NcclTests), false).unwrap();
    assert_eq!(inputs.skipped.len(), 2);
}

#[test]
fn osu_figures_are_named_for_what_they_are() {
    let p = ok(&fixture("foreign/osu_bw__ai-fabric-lab-v7.4.txt"));
    let md = collbench_report::render::markdown::render(&p.records);
    // MB/s as OSU printed it, no derived time, no busbw.
    assert!(md.contains("bandwidth (MB/s)"), "{md}");
    assert!(
        md.contains("| 4 MiB | 4194304 | char |  | -1 | - | 0.1014 | - | N/A | 101.40 |"),
        "{md}"
    );
    let p = ok(&fixture("foreign/osu_latency__ai-fabric-lab-v7.4.txt"));
    let md = collbench_report::render::markdown::render(&p.records);
    assert!(
        md.contains("| 4 MiB | 4194304 | char |  | -1 | 43092.92 |"),
        "{md}"
    );
}

#[test]
fn nccl_tests_json_with_per_iteration_data() {
    let p = ok(&fixture("anchors/mpi2_all_reduce_periter.json"));
    let r = &p.records[0];
    let big = r.results.iter().max_by_key(|c| c.size_bytes).unwrap();
    let oop = big.out_of_place.as_ref().unwrap();
    let stats = oop.stats.as_ref().expect("-I statistics");
    assert!(stats.samples > 0 && stats.min_us <= stats.p50_us && stats.p50_us <= stats.max_us);
    assert_eq!(oop.rank_time_us.len(), 2, "one time per process");
    assert!(oop
        .rank_time_us
        .iter()
        .all(|t| *t >= stats.min_us && *t <= stats.max_us));
}

#[test]
fn nccl_inspector_json_is_summarised_per_op_and_size() {
    let rec = |rank: u32, sn: u32, size: u64, t: f64, busbw: f64| {
        format!(
            "{{\"header\": {{\"id\": \"0x7f8c\", \"rank\": {rank}, \"n_ranks\": 8, \"nnodes\": 1}},\n \
             \"metadata\": {{\"inspector_output_format_version\": \"v4.0\", \"git_rev\": \"\", \
             \"rec_mechanism\": \"profiler_plugin\", \"dump_timestamp_us\": 1748030377748202, \
             \"hostname\": \"node1\", \"pid\": 1639453}},\n \
             \"coll_perf\": {{\"coll\": \"AllReduce\", \"coll_sn\": {sn}, \"coll_msg_size_bytes\": {size}, \
             \"coll_exec_time_us\": {t}, \"coll_timing_source\": \"kernel_gpu\", \
             \"coll_algobw_gbs\": {a}, \"coll_busbw_gbs\": {busbw}}}}}\n",
            a = busbw / 1.75
        )
    };
    let text = [
        rec(2, 1, 1 << 30, 4000.0, 470.0),
        rec(2, 2, 1 << 30, 4200.0, 450.0),
        rec(2, 3, 1 << 20, 40.0, 46.0),
    ]
    .concat();
    let p = ok(&text);
    let r = &p.records[0];
    assert_eq!(r.source, "nccl-inspector");
    assert_eq!(r.settings.world_size, 8);
    assert_eq!(r.results.len(), 2);
    let big = case(r, 1 << 30).out_of_place.clone().unwrap();
    assert_eq!(
        (big.time_us, big.busbw_gbps, big.iterations),
        (4100.0, 460.0, 2)
    );
    assert_eq!(case(r, 1 << 20).op, "all_reduce");
}

#[test]
fn nccom_and_nvshmem_units_come_from_the_header() {
    let nccom = fixture("foreign/nccom-test__neuron-doc-2rank-fp32-allr.txt");
    let p = ok(&nccom.replace("time(us)", "time(ms)"));
    let big = case(&p.records[0], 1073741824)
        .out_of_place
        .clone()
        .unwrap();
    assert_eq!(big.time_us, 18930.0 * 1000.0);
    assert_eq!(p.units[0].time, "ms");
    assert!(err(&nccom.replace("time(us)", "time(jiffies)")).contains("unknown unit"));

    let nv = fixture("foreign/nvshmem-perftest__cscs-alps-gh200-alltoall_latency.txt");
    let plain = ok(&nv);
    let p = ok(&nv.replace("latency(us)", "latency(ms)"));
    let (a, b) = (
        plain.records[0].results[0].out_of_place.clone().unwrap(),
        p.records[0].results[0].out_of_place.clone().unwrap(),
    );
    assert_eq!(b.time_us, a.time_us * 1000.0);
    assert_eq!(p.units[0].time, "ms");
    assert!(
        err(&nv.replace("busbw(GB/s)", "busbw(GB/fortnight)")).contains("unknown bandwidth unit")
    );
}

/// A FIFO in a folder is skipped without being opened (nothing writes to
/// it: opening it would wait for ever); `--strict` stops there instead.
#[test]
fn a_fifo_in_a_folder_is_skipped_or_stops_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("all_reduce.txt"), anchor()).unwrap();
    let fifo = dir.path().join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let inputs = read_paths(&[dir.path().to_path_buf()], None, false).unwrap();
    assert_eq!(inputs.parsed.records.len(), 1);
    assert_eq!(inputs.skipped.len(), 1);
    assert!(inputs.skipped[0].ends_with("pipe: not a regular file (a FIFO): left out"));
    let e = read_paths(&[dir.path().to_path_buf()], None, true).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("pipe: not a regular file (a FIFO): left out (--strict reads every file of a folder, or nothing)"),
        "{e}"
    );
}
