//! Real-log classes that were read wrong (issue #42), each on a log
//! written by hand in `fixtures/classes/` (its README says what each is).

use collbench_report::input::Fault;
use collbench_report::parse::read_file;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/classes")
        .join(name)
}

/// Ray's tag in front of OpenMPI's: once refused as "no result rows".
#[test]
fn stacked_launcher_prefixes_are_both_stripped() {
    let p = read_file(&fixture("ray_openmpi_stacked.txt"), None).unwrap();
    assert_eq!(p.records.len(), 1, "{:?}", p.warnings);
    let r = &p.records[0];
    assert_eq!(r.results.len(), 3);
    assert_eq!(r.avg_busbw_gbps, Some(25.5867));
    assert_eq!(r.library.as_deref(), Some("NCCL 2.28.3"));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

/// A wrapper's line quoting the command: once read as the command, and
/// its `512"` aborted the parse.
#[test]
fn a_quoted_command_is_read_without_its_quotes() {
    let p = read_file(&fixture("nccom_wrapper_quoted.txt"), None).unwrap();
    let r = &p.records[0];
    assert_eq!(r.results.len(), 2);
    assert_eq!(r.settings.step_factor, Some(512));
    assert_eq!(r.settings.world_size, 2);
    assert_eq!(r.command_line.last().map(String::as_str), Some("allr"));
    assert_eq!(r.ops(), ["all_reduce"]);
    assert!(
        p.warnings.iter().all(|w| !w.message.contains("command")),
        "{:?}",
        p.warnings
    );
}

/// NCCL's own start-up line names the library of an old nccl-tests log.
#[test]
fn a_bare_nccl_version_line_names_the_library() {
    let p = read_file(&fixture("nccl_version_bare.txt"), None).unwrap();
    assert_eq!(p.records[0].library.as_deref(), Some("NCCL 2.7.8"));
}

/// nccl-tests shortened the sweep for memory and closed the log: it is
/// complete, not "cut short".
#[test]
fn a_sweep_shortened_for_memory_is_not_cut_short() {
    let p = read_file(&fixture("nccl_reduced_maxbytes.txt"), None).unwrap();
    assert_eq!(p.records[0].settings.max_bytes, 5010795178);
    assert!(p.faults.is_empty(), "{:?}", p.faults);
    assert!(!p.partial(), "{:?}", p.warnings);
    // Without the line, the same table stops a step short of maxBytes.
    let text = std::fs::read_to_string(fixture("nccl_reduced_maxbytes.txt")).unwrap();
    let cut = text.replace(
        "# Reducing maxBytes to 5010795178 due to memory limitation\n",
        "",
    );
    let p = collbench_report::parse::parse_text(&cut, None, "x").unwrap();
    assert!(
        matches!(p.faults[..], [Fault::CutShort { .. }]),
        "{:?}",
        p.faults
    );
}

/// A run that failed before its first row names the failure line.
#[test]
fn a_crash_before_any_row_is_reported_as_the_crash() {
    let e = read_file(&fixture("nccl_crash_before_rows.txt"), None).unwrap_err();
    let text = e.to_string();
    assert!(
        text.ends_with(
            "nccl_crash_before_rows.txt:8: the run failed before its first result row: \
             `gpu-07: Test NCCL failure common.cu:1088 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '`; \
             fix that failure and run again"
        ),
        "{text}"
    );
}

/// NCCL's version line alone names no path: the crash still refuses the
/// log (it was once read as a path-only NCCL log with no path).
#[test]
fn a_crash_beside_only_the_nccl_version_line_is_still_the_crash() {
    let text = std::fs::read_to_string(fixture("nccl_crash_before_rows.txt")).unwrap();
    let with_version = text.replace(
        "gpu-07: Test NCCL",
        "NCCL version 2.28.7+cuda13.0\ngpu-07: Test NCCL",
    );
    assert_ne!(with_version, text);
    let e = collbench_report::parse::parse_text(&with_version, None, "x").unwrap_err();
    assert!(
        e.to_string()
            .contains("the run failed before its first result row: `gpu-07: Test NCCL failure"),
        "{e}"
    );
}

/// An OSU bandwidth test's summary gives its bandwidth (it was all
/// dashes), and `osu_mbw_mr`'s message rate is shown.
#[test]
fn osu_bandwidth_summaries_and_message_rates_are_shown() {
    let p = read_file(&fixture("osu_mbw_mr.txt"), None).unwrap();
    assert_eq!(p.records[0].ops(), ["osu_mbw_mr"]);
    let md = collbench_report::render::markdown::render(&p.records);
    assert!(
        md.contains(
            "| osu_mbw_mr | char | osu_mbw_mr.txt | 8110.08 MB/s | 4 KiB | 8110.08 MB/s | 4 KiB |"
        ),
        "{md}"
    );
    assert!(md.contains("| messages/s |"), "{md}");
    assert!(md.contains("| 2334.72 | 2280000.00 |"), "{md}");
    assert!(md.contains("| 2.31 | 2310000.00 |"), "{md}");
}

/// Figures printed with four decimals keep them in the report (0.2346
/// was shown as 0.23).
#[test]
fn small_figures_keep_the_logs_precision() {
    let p = read_file(&fixture("nccl_small_figures.txt"), None).unwrap();
    let md = collbench_report::render::markdown::render(&p.records);
    assert!(
        md.contains("| 16 B | 4 | float | sum | -1 | 0.0682 | 0.2346 | 0.2346 | 0 | 0.0679 | 0.2356 | 0.2356 | 0 |"),
        "{md}"
    );
    // The log's average busbw, in the environment table.
    assert!(md.contains("| 0.1259 |"), "{md}");
}
