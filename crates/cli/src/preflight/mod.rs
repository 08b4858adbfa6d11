//! `collbench preflight`: every rank checks in with rank 0, which prints the
//! world (rank, host, local rank, GPUs, driver, NCCL) and a verdict.
//!
//! FAIL when ranks are missing at the deadline, when a rank dies or goes
//! silent, or when collbench, driver or NCCL versions differ between ranks
//! (a common cause of NCCL hangs). Exit codes: 0 PASS, 3 FAIL
//! ([`ExitOutcome::PreflightFail`]). Only rank 0 prints the report; the others print
//! nothing unless they fail themselves (one line on stderr).
//!
//! Files: this one has the flags and what this rank can see; `checkin` the
//! check-in over the control plane; `report` rank 0's table and verdict.

mod checkin;
mod report;

use crate::exit::{Failure, Outcome as ExitOutcome};
use crate::launch_args::LaunchArgs;
use serde::{Deserialize, Serialize};

/// Flags of `collbench preflight`.
#[derive(clap::Args, Debug, Clone)]
pub struct PreflightArgs {
    /// Where this process sits in the job.
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Output format of rank 0's report.
    #[arg(long, value_enum, default_value_t = PreflightFormat::Text)]
    pub format: PreflightFormat,
}

/// Output format of the preflight report.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PreflightFormat {
    /// A table and a verdict line.
    #[default]
    Text,
    /// One JSON object.
    Json,
}

/// What one rank says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankInfo {
    /// Host name; the check-in replaces it with `World::hostname` (the Slurm
    /// node name when there is one).
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// `CARGO_PKG_VERSION` of the collbench binary.
    pub collbench_version: String,
    /// Backend this rank would use (`cpu`, `nccl`, `mpi`).
    pub backend: String,
    /// GPUs this rank drives (names or UUIDs), empty without GPUs.
    pub gpus: Vec<String>,
    /// GPU driver version, when there is a driver.
    pub driver: Option<String>,
    /// NCCL version, when NCCL was found.
    pub nccl_version: Option<String>,
    /// CUDA_VISIBLE_DEVICES as this rank saw it.
    pub cuda_visible_devices: Option<String>,
}

/// How the check-in ended for this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every rank joined, stayed, and versions agree.
    Pass,
    /// Ranks missing, a peer failed, or versions differ (already reported).
    Fail,
}

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
            let world = collbench_launch::World::discover(&args.launch.options()).ok();
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
pub fn run(args: &PreflightArgs) -> Result<ExitOutcome, Failure> {
    Ok(
        match checkin::run(&args.launch.options(), args.format, rank_info(args))? {
            Outcome::Pass => ExitOutcome::PreflightPass,
            Outcome::Fail => ExitOutcome::PreflightFail,
        },
    )
}
