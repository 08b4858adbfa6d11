//! The scale harness at W = 1024 (CI): the real rank 0 in a child process
//! (`collbench-scale root`), 1023 simulated ranks over loopback TCP in
//! this one. bench/results/scale.md has W = 4096 and 16384.

use collbench_launch::scale::{self, ScaleOptions};
use std::path::Path;

#[test]
fn a_world_of_1024_ranks_joins_and_gathers_within_the_limits() {
    let root = Path::new(env!("CARGO_BIN_EXE_collbench-scale"));
    let report = scale::run(&ScaleOptions::new(1024), root).unwrap();
    eprintln!("{report:#?}");
    assert_eq!(report.world_size, 1024);
    // Time limits catch a hang or a regression of an order of magnitude,
    // not a busy machine: this test may share its cores (`cargo test`
    // runs binaries beside nothing but their own tests, yet other jobs
    // load the host). bench/results/scale.md holds the measured figures
    // (Ready 0.3 s, a gather 2-5 ms, idle).
    assert!(report.ready_s <= 30.0, "time to Ready: {report:?}");
    assert!(report.clients_ready_s <= 30.0, "time to Ready: {report:?}");
    // The old design had a thread per rank (1026 here).
    assert!(report.root_threads <= 64, "rank 0's threads: {report:?}");
    assert!(report.root_hwm_mib <= 256.0, "rank 0's memory: {report:?}");
    // 200 ms: ten times the 20 ms a row may take on an idle pair of
    // cores (22.5 ms was seen beside two busy loops).
    assert!(
        report.gather_median_ms <= 200.0,
        "per-row gather: {report:?}"
    );
    // What `run -n auto` does once per repeat: every process learns the
    // slowest figures. An all_max's bytes grow with W (an all_gather's
    // with W squared), so it is held to the same limit as a row.
    assert!(
        report.all_max_median_ms > 0.0 && report.all_max_median_ms <= 200.0,
        "all_max: {report:?}"
    );
    assert!(report.all_gather_median_ms > 0.0, "{report:?}");
}
