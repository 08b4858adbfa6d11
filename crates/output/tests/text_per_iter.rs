//! The text layout with per-iteration timing (`-I 1`, `-K`), as readable
//! snapshots: nccl-tests' report line, its wider header and four cells
//! after each placement's #wrong; and the default layout unchanged by
//! per-iteration times a record may carry.

mod common;

use collbench_core::{CaseResult, Placement, Record};
use collbench_output::text::{self, TextExporter, TextOptions};
use collbench_output::Exporter;

fn placement(time_us: f64, times: &[f64]) -> Option<Placement> {
    Some(Placement {
        time_us,
        algbw_gbps: 1.5,
        busbw_gbps: 2.25,
        wrong: Some(0),
        iterations: times.len() as u64,
        iter_times_us: times.to_vec(),
        ..Placement::default()
    })
}

fn record(per_iter: bool, skip: u64) -> Record {
    let mut r = common::two_rank_record("cpu", "cpu rank", (1024, 2048), 5);
    r.settings.per_iter_timing = per_iter;
    r.settings.per_iter_skip = skip;
    // A slow first iteration, so -K visibly changes the summary.
    let times = [40.0, 10.0, 11.0, 12.0, 13.0];
    for size in [1024u64, 2048] {
        r.results.push(CaseResult {
            out_of_place: placement(17.2, &times),
            in_place: placement(16.9, &times[..0]),
            ..CaseResult::float_sum("all_reduce", size)
        });
    }
    r
}

fn text_of(r: &Record, opts: TextOptions) -> String {
    String::from_utf8(TextExporter { options: opts }.serialize(r)).unwrap()
}

#[test]
fn per_iteration_layout() {
    let t = text_of(&record(true, 0), TextOptions::default());
    assert!(
        t.contains("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows \n")
    );
    insta::assert_snapshot!("per_iter", t);
}

#[test]
fn per_iteration_skip_changes_the_summary_and_the_report_line() {
    let t = text_of(&record(true, 1), TextOptions::default());
    assert!(t.contains("; summary skips first 1 iterations \n"));
    // Without the slow first iteration the maximum is 13 us.
    let row = t
        .lines()
        .find(|l| l.trim_start().starts_with("1024"))
        .unwrap();
    assert!(row.contains("   10.00    13.00    13.00"), "{row}");
    insta::assert_snapshot!("per_iter_skip", t);
}

#[test]
fn per_iteration_with_timestamps_ends_rows_with_the_stamp() {
    let opts = TextOptions {
        timestamps: true,
        per_iter: Some(0),
        ..TextOptions::default()
    };
    let r = &record(true, 0).results[0];
    let line = text::row_with(r, Some("2026-12-01 03:00:00"), opts);
    insta::assert_snapshot!("per_iter_timestamp_row", line);
    insta::assert_snapshot!("per_iter_timestamp_header", text::table_header(opts));
    assert!(line.trim_end().ends_with("2026-12-01 03:00:00"));
}

#[test]
fn the_default_layout_ignores_kept_iteration_times() {
    // A record with times but -I off prints nccl-tests' default layout.
    let with_times = text_of(&record(false, 0), TextOptions::default());
    let mut bare = record(false, 0);
    for r in &mut bare.results {
        for p in [&mut r.out_of_place, &mut r.in_place].into_iter().flatten() {
            p.iter_times_us.clear();
        }
    }
    assert_eq!(with_times, text_of(&bare, TextOptions::default()));
    assert!(!with_times.contains("i_min"));
    assert!(!with_times.contains("Per-Iteration"));
}

#[test]
fn header_columns_line_up_with_the_cells() {
    let t = text_of(&record(true, 0), TextOptions::default());
    let names = t.lines().find(|l| l.contains("i_cv%")).unwrap();
    let row = t
        .lines()
        .find(|l| l.trim_start().starts_with("2048"))
        .unwrap();
    // The in-place half's last cell ends under its i_cv% heading.
    assert_eq!(
        names.trim_end().len(),
        row.trim_end().len(),
        "\n{names}\n{row}"
    );
}
