//! `-J` in nccl-tests' own layout, read by nccl-tests 2.19.6's
//! `tools/analyze_perf_json.py` (from ../shared/reference) unchanged: it
//! exits 0 and prints the numbers the record holds.

mod common;

use collbench_core::size::Step;
use collbench_core::{Collective, Record};
use collbench_launch::{Control, World};
use collbench_output::nccl_tests_json::NcclTestsJsonExporter;
use collbench_output::Exporter;
use collbench_runner::cpu::CpuBackend;
use collbench_runner::{run::NoObserver, Plan, Runner, Timing};
use std::path::PathBuf;

/// nccl-tests' analyzer, `None` (test skipped) where shared/reference is absent.
fn analyzer() -> Option<PathBuf> {
    common::reference("nccl-tests-2.19.6/tools/analyze_perf_json.py")
}

/// Runs the analyzer at `script` with `args`; returns stdout, asserting exit 0.
fn analyze(script: &std::path::Path, file: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(file)
        .args(args)
        .output()
        .expect("python3 runs");
    common::ok_stdout(out, "analyze_perf_json.py failed")
}

/// A real CPU run with per-iteration timing (-I 1 -K 1).
fn per_iteration_record() -> Record {
    let world = World::discover(&Default::default()).unwrap();
    let control = Control::connect(&world, &Default::default()).unwrap();
    let mut backend = CpuBackend::new(3, "testhost");
    let plan = Plan {
        collectives: vec![Collective::AllReduce, Collective::AllToAllV],
        min_bytes: 1 << 10,
        max_bytes: 1 << 16,
        step: Step::Factor(8),
        timing: Timing {
            warmup_iters: 0,
            iters: 6,
            keep_iter_times: true,
            ..Timing::default()
        },
        per_iter_skip: 1,
        ..Plan::default()
    };
    let mut record = Record::new("collbench");
    record.command_line = vec!["all_reduce_perf".into(), "-I".into(), "1".into()];
    record.start_time = Some("2026-12-01T03:00:00Z".into());
    Runner::new(&mut backend, &control, plan)
        .run(record, &mut NoObserver)
        .unwrap()
        .unwrap()
}

#[test]
fn analyze_perf_json_reads_per_iteration_output() {
    let Some(script) = analyzer() else { return };
    let rec = per_iteration_record();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    std::fs::write(&file, NcclTestsJsonExporter::default().serialize(&rec)).unwrap();

    let text = analyze(&script, &file, &["--all"]);
    assert!(text.contains("  Version:    3"), "{text}");
    assert!(
        text.contains(&format!("  Results:    {}", rec.results.len())),
        "{text}"
    );
    assert!(text.contains("  Iterations: 6  (agg: 1)"), "{text}");
    assert!(
        text.contains("  Summary skip: 1 leading iterations"),
        "{text}"
    );
    assert!(text.contains("N/A (no process rows)"), "{text}");

    // The stats table: one line per result with nccl-tests' summary of
    // iterations 1.. (population deviation), as the record's times give it.
    let table: Vec<Vec<String>> = text
        .split("PER-ITERATION STATS (OOP)")
        .nth(1)
        .unwrap()
        .lines()
        .skip(4)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(table.len(), rec.results.len(), "{text}");
    for (line, row) in table.iter().zip(&rec.results) {
        let times = &row.out_of_place.as_ref().unwrap().iter_times_us;
        assert_eq!(times.len(), 6);
        let kept = &times[1..];
        let avg = kept.iter().sum::<f64>() / kept.len() as f64;
        let min = kept.iter().copied().fold(f64::INFINITY, f64::min);
        let max = kept.iter().copied().fold(0.0, f64::max);
        let sd = (kept.iter().map(|t| (t - avg).powi(2)).sum::<f64>() / kept.len() as f64).sqrt();
        assert_eq!(line[0], row.size_bytes.to_string(), "{line:?}");
        // The file holds 6 decimals; the table prints one.
        let close = |cell: &str, want: f64| (cell.parse::<f64>().unwrap() - want).abs() <= 0.051;
        assert!(close(&line[1], avg), "avg {line:?} vs {avg}");
        assert!(close(&line[2], min), "min {line:?} vs {min}");
        assert!(close(&line[3], max), "max {line:?} vs {max}");
        assert!(
            close(line[5].trim_end_matches('%'), sd / avg * 100.0),
            "cv {line:?}"
        );
    }

    // --iter0 reads the raw list: the first iteration against the rest.
    let text = analyze(&script, &file, &["--iter0", "--in-place"]);
    let first = text
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with(&rec.results[0].size_bytes.to_string())
        })
        .unwrap();
    let iter0: f64 = first.split_whitespace().nth(1).unwrap().parse().unwrap();
    let want = rec.results[0].in_place.as_ref().unwrap().iter_times_us[0];
    assert!((iter0 - want).abs() <= 0.051, "{first} vs {want}");
}

#[test]
fn analyze_perf_json_reads_the_cli_j_file() {
    let Some(script) = analyzer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.json");
    common::stdout_ok(
        common::collbench()
            .args(["run", "alltoallv", "--backend", "cpu", "--ranks", "2"])
            .args(["-b", "8", "-e", "8K", "-f", "2", "-w", "0", "-n", "3", "-J"])
            .arg(&file),
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["config"]["iterations"], 3);
    assert_eq!(doc["results"][0]["root"], "    -1");
    assert_eq!(doc["out_of_bounds"]["okay"], "true");
    let text = analyze(&script, &file, &[]);
    assert!(text.contains("  Results:    11"), "{text}");
    assert!(text.contains("  Iterations: 3  (agg: 1)"), "{text}");

    // collbench's own reader of nccl-tests JSON takes it back.
    let text = std::fs::read_to_string(&file).unwrap();
    let back = collbench_report::parse::nccl_json::parse(&text, &mut Default::default()).unwrap();
    let rows = &back[0].results;
    assert_eq!(rows.len(), 11);
    for (row, json) in rows.iter().zip(doc["results"].as_array().unwrap()) {
        assert_eq!(row.size_bytes, json["size"].as_u64().unwrap());
        assert_eq!(row.out_of_place.as_ref().unwrap().wrong, Some(0));
    }
}
