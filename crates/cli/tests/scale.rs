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
    assert!(report.ready_s <= 5.0, "time to Ready: {report:?}");
    assert!(report.clients_ready_s <= 5.0, "time to Ready: {report:?}");
    // The old design had a thread per rank (1026 here).
    assert!(report.root_threads <= 64, "rank 0's threads: {report:?}");
    assert!(report.root_hwm_mib <= 256.0, "rank 0's memory: {report:?}");
    // Runs alone (.config/nextest.toml): the 2 cores are shared by rank 0
    // and the simulated ranks only.
    assert!(
        report.gather_median_ms <= 20.0,
        "per-row gather: {report:?}"
    );
    // What `run -n auto` does once per repeat: every process learns the
    // slowest figures. An all_max's bytes grow with W (an all_gather's
    // with W squared), so it is held to the same limit as a row.
    assert!(
        report.all_max_median_ms > 0.0 && report.all_max_median_ms <= 20.0,
        "all_max: {report:?}"
    );
    assert!(report.all_gather_median_ms > 0.0, "{report:?}");
}
