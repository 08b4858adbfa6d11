//! collbench-launch: who am I in the job, and the small-message control
//! plane between processes (rendezvous, barrier, broadcast, gather, failure
//! detection). Bulk data never moves here: the backends (NCCL, MPI) do that.
//!
//! CONTRACT (used by the runner and the CLI; keep these signatures):
//! - `LaunchArgs` (clap::Args, flattened into `run`, `preflight`, `check`)
//! - `World::discover(&LaunchArgs) -> Result<World, LaunchError>`
//! - `Control::connect(&World, &LaunchArgs) -> Result<Control, LaunchError>`
//!   and its methods `rank`, `world_size`, `barrier`, `broadcast`, `gather`,
//!   `all_gather`, `abort`.
//! - `PreflightArgs`, `RankInfo`, `preflight::run(&PreflightArgs, RankInfo) -> anyhow::Result<i32>`
//!
//! Modules, one job each:
//! - [`hostlist`]: Slurm hostlist expressions (`gpu-[01-04,07],login1`).
//! - [`env`]: what each launcher's environment variables say.
//! - [`world`]: flags + environment -> [`World`] (rank, size, rendezvous, token).
//! - `wire`: the framed, versioned messages on the TCP control plane.
//! - [`control`]: the control plane itself ([`Control`]).
//! - [`gpu`]: local rank -> GPU indices.
//! - [`split`]: NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK colors.
//! - [`preflight`]: the `collbench preflight` command.

#![forbid(unsafe_code)]

pub mod control;
pub mod env;
pub mod gpu;
pub mod hostlist;
pub mod preflight;
pub mod split;
mod wire;
pub mod world;

pub use control::Control;
pub use gpu::gpu_for_local_rank;
pub use preflight::{PreflightArgs, RankInfo};
pub use split::split_color;
pub use world::{Launcher, World};

/// Exit code of a run that failed because of a peer or the launch: a rank
/// missing, refused, crashed or silent, or a world that cannot be discovered.
pub const EXIT_PEER_FAILURE: i32 = 3;

/// Errors of world discovery and of the control plane. Each reads as one
/// line that names the problem and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The environment and flags do not describe a usable world.
    #[error("{0}")]
    Discovery(String),
    /// The control plane failed (cannot listen, cannot reach rank 0, refused,
    /// a peer died or went silent, a deadline passed).
    #[error("{0}")]
    Control(String),
    /// Rank 0 waited until the deadline and some ranks never joined.
    #[error("{}", missing_message(.missing, *.timeout_s, .listen))]
    MissingRanks {
        /// Ranks that never joined, ascending.
        missing: Vec<usize>,
        /// The deadline that passed, in seconds.
        timeout_s: u64,
        /// Where rank 0 listened (`ADDR:PORT`).
        listen: String,
        /// The ranks that did join (rank 0 included), for reports.
        joined: Vec<control::PeerHello>,
    },
}

impl LaunchError {
    /// The process exit code for this error (always [`EXIT_PEER_FAILURE`]).
    pub fn exit_code(&self) -> i32 {
        EXIT_PEER_FAILURE
    }
}

fn missing_message(missing: &[usize], timeout_s: u64, listen: &str) -> String {
    format!(
        "{} did not join within {timeout_s} s (rank 0 listens on {listen}): check that they were started, \
         use the same job token, and can reach that address",
        ranks_phrase(missing)
    )
}

/// "rank 3" or "ranks 1, 2, 5" (at most 16 listed, then "and N more").
pub(crate) fn ranks_phrase(ranks: &[usize]) -> String {
    let shown: Vec<String> = ranks.iter().take(16).map(|r| r.to_string()).collect();
    let more = ranks.len().saturating_sub(16);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    match ranks.len() {
        1 => format!("rank {}", shown[0]),
        _ => format!("ranks {}{tail}", shown.join(", ")),
    }
}

/// Launch flags shared by every multi-process command. Each overrides what
/// the launcher's environment says (see [`World::discover`]).
#[derive(clap::Args, Debug, Clone)]
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
    /// HOST:PORT where rank 0 listens (HOST alone keeps the default port).
    #[arg(long)]
    pub rendezvous: Option<String>,
    /// Job token every rank must share (default: COLLBENCH_TOKEN, else the
    /// launcher's job id), so two jobs or a stray process never join.
    #[arg(long)]
    pub token: Option<String>,
    /// Address rank 0 listens on (default 0.0.0.0, every interface).
    #[arg(long)]
    pub bind: Option<String>,
    /// Seconds before a missing or silent peer is an error.
    #[arg(long, default_value_t = 60)]
    pub timeout_s: u64,
}

impl Default for LaunchArgs {
    /// No overrides and the CLI's default 60 s timeout (a derived `Default`
    /// would give a 0 s deadline).
    fn default() -> Self {
        LaunchArgs {
            rank: None,
            world_size: None,
            local_rank: None,
            rendezvous: None,
            token: None,
            bind: None,
            timeout_s: 60,
        }
    }
}
