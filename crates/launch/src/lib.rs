//! collbench-launch: who am I in the job, and the small-message control
//! plane between processes (rendezvous, barrier, broadcast, gather, failure
//! detection). Bulk data never moves here.
//!
//! CONTRACT (used by the runner and the CLI; keep these signatures):
//! - `LaunchArgs` (clap::Args, flattened into `run`, `preflight`, `check`)
//! - `World::discover(&LaunchArgs) -> Result<World, LaunchError>`
//! - `Control::connect(&World, &LaunchArgs) -> Result<Control, LaunchError>`
//!   and its methods `rank`, `world_size`, `barrier`, `broadcast`, `gather`,
//!   `all_gather`, `abort`.
//! - `PreflightArgs`, `RankInfo`, `preflight::run(&PreflightArgs, RankInfo) -> anyhow::Result<i32>`

use std::time::Duration;

/// Errors of world discovery and of the control plane.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Discovery(String),
    #[error("{0}")]
    Control(String),
}

/// Launch flags shared by every multi-process command.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LaunchArgs {
    /// This process's rank (overrides launcher variables).
    #[arg(long)]
    pub rank: Option<usize>,
    /// Number of processes (overrides launcher variables).
    #[arg(long)]
    pub world_size: Option<usize>,
    /// Rank of this process on its host.
    #[arg(long)]
    pub local_rank: Option<usize>,
    /// HOST:PORT where rank 0 listens.
    #[arg(long)]
    pub rendezvous: Option<String>,
    /// Seconds before a missing or silent peer is an error.
    #[arg(long, default_value_t = 60)]
    pub timeout_s: u64,
}

/// This process's place in the job.
#[derive(Debug, Clone)]
pub struct World {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub hostname: String,
}

impl World {
    /// Reads the launcher's environment (stub: single process).
    pub fn discover(_args: &LaunchArgs) -> Result<World, LaunchError> {
        Ok(World {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            hostname: "localhost".into(),
        })
    }
}

/// The control plane (stub: single process).
pub struct Control {
    world: World,
    #[allow(dead_code)]
    timeout: Duration,
}

impl Control {
    /// Connects every rank to rank 0.
    pub fn connect(world: &World, args: &LaunchArgs) -> Result<Control, LaunchError> {
        Ok(Control {
            world: world.clone(),
            timeout: Duration::from_secs(args.timeout_s),
        })
    }
    pub fn rank(&self) -> usize {
        self.world.rank
    }
    pub fn world_size(&self) -> usize {
        self.world.world_size
    }
    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<(), LaunchError> {
        Ok(())
    }
    /// Rank 0 passes `Some(data)`; every rank returns rank 0's data.
    pub fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, LaunchError> {
        data.ok_or_else(|| LaunchError::Control("broadcast without data on rank 0".into()))
    }
    /// Rank 0 gets every rank's data indexed by rank; others get `None`.
    pub fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, LaunchError> {
        Ok(Some(vec![data]))
    }
    /// Every rank gets every rank's data indexed by rank.
    pub fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, LaunchError> {
        Ok(vec![data])
    }
    /// Tells every other rank to stop with `reason`.
    pub fn abort(&self, _reason: &str) {}
}
