//! The record the text-layout tests print (`mod common;` in each test
//! file).

use collbench_core::{DeviceInfo, Record, RunSettings};

/// A `collbench run` record of one process driving two ranks (`device`
/// names each) on host `vm`: sizes `min_bytes..=max_bytes` by a factor of
/// 2, one warmup and `iters` timed iterations, checked, times averaged
/// over ranks. No results yet.
pub fn two_rank_record(backend: &str, device: &str, bytes: (u64, u64), iters: u64) -> Record {
    let mut r = Record::new("collbench");
    r.tool_version = Some("0.1.0".into());
    r.backend = Some(backend.into());
    r.settings = RunSettings {
        world_size: 2,
        processes: 1,
        threads_per_process: 1,
        gpus_per_thread: 2,
        min_bytes: bytes.0,
        max_bytes: bytes.1,
        step_factor: Some(2),
        warmup_iters: 1,
        iters,
        agg_iters: 1,
        check: true,
        average: "mean".into(),
        ..RunSettings::default()
    };
    r.devices = (0..2)
        .map(|i| DeviceInfo {
            rank: i,
            pid: 1350,
            host: "vm".into(),
            device: i,
            name: device.into(),
            ..DeviceInfo::default()
        })
        .collect();
    r
}
