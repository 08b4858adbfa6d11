//! `collbench preflight`: what this rank can see, handed to the launch
//! crate's check-in.

use crate::exit::{Failure, Outcome};
use collbench_launch::{PreflightArgs, RankInfo};

/// This rank's GPUs, driver and NCCL, as far as they can be found.
fn rank_info(args: &PreflightArgs) -> RankInfo {
    let mut info = RankInfo {
        host: String::new(),
        pid: std::process::id(),
        collbench_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: "cpu".into(),
        gpus: Vec::new(),
        driver: None,
        nccl_version: None,
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
    };
    if let Ok(n) = collbench_nccl::gpu_count() {
        if n > 0 {
            info.backend = "nccl".into();
            info.driver = collbench_nccl::cuda::driver_version().ok();
            let world = collbench_launch::World::discover(&args.launch).ok();
            let mine: Vec<usize> = match world {
                Some(w) if w.world_size > 1 => vec![w.local_rank % n],
                _ => (0..n).collect(),
            };
            info.gpus = mine
                .into_iter()
                .filter_map(|i| collbench_nccl::cuda::Device::open(i).ok())
                .map(|d| format!("{} [{}]", d.name(), d.pci_bus_id()))
                .collect();
        }
    }
    if let Ok((_lib, found)) = collbench_nccl::loader::open(None) {
        info.nccl_version = Some(found.version_string());
    }
    info
}

/// Runs the check-in.
pub fn run(args: &PreflightArgs) -> Result<Outcome, Failure> {
    collbench_launch::preflight::run(args, rank_info(args))
        .map(Outcome::preflight)
        .map_err(|e| Failure::new(Outcome::PreflightFail, format!("{e:#}")))
}
