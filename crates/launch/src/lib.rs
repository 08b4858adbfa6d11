//! collbench-launch: who am I in the job, and the small-message control
//! plane between processes (rendezvous, barrier, broadcast, gather, failure
//! detection). Bulk data never moves here: the backends (NCCL, MPI) do that.
//!
//! CONTRACT (used by the CLI and the NCCL backend; keep these signatures):
//! - [`LaunchOptions`] (plain data; the CLI's clap flags fill it)
//! - `World::discover(&LaunchOptions) -> Result<World, LaunchError>`
//! - `Control::connect(&World, &LaunchOptions) -> Result<Control, LaunchError>`
//!   and its methods `rank`, `world_size`, `barrier`, `broadcast`, `gather`,
//!   `all_gather`, `abort`, and the stuck-rank seam `publish_progress`,
//!   `progress_of_all`, `abort_job`, `failure`; [`Control`] also implements
//!   [`collbench_core::Bootstrap`], which is all the runner, the checks and
//!   the backends need to see of it.
//!
//! Modules, one job each:
//! - [`hostlist`]: Slurm hostlist expressions (`gpu-[01-04,07],login1`).
//! - [`mod@env`]: what each launcher's environment variables say.
//! - [`world`]: options + environment -> [`World`] (rank, size, rendezvous, token).
//! - `wire`: the framed, versioned messages on the TCP control plane.
//! - [`control`]: the control plane itself ([`Control`]).
//! - `scale`: the scale harness (simulated ranks against the real rank 0;
//!   `tests/scale.rs`, the `collbench-scale` bench).
//!
//! Not for: command-line parsing or commands (the CLI owns its flags and
//! `collbench preflight`), nor exit codes (errors say what failed; the CLI
//! decides the code).

#![forbid(unsafe_code)]

pub mod control;
pub mod env;
pub mod hostlist;
#[doc(hidden)]
pub mod scale;
mod wire;
pub mod world;

pub use control::Control;
pub use world::{Launcher, World};

/// Errors of world discovery and of the control plane. Each reads as one
/// line that names the problem and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The environment and flags do not describe a usable world.
    #[error("{0}")]
    Discovery(String),
    /// The rank, world size or rendezvous the flags and the launcher's
    /// variables give make no world; the words name the variables, and
    /// the CLI adds its flags.
    #[error(transparent)]
    World(#[from] world::WorldError),
    /// A port variable or flag that is no port (0, past 65535, or a port
    /// whose offset passes 65535): the user's input, nothing ran.
    #[error(transparent)]
    Port(#[from] collbench_core::ports::PortError),
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

/// Every launch error is a peer failure to the runner and the backends.
impl From<LaunchError> for collbench_core::PeerFailure {
    fn from(e: LaunchError) -> Self {
        collbench_core::PeerFailure::new(e.to_string())
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

/// How to join the job. Each field overrides what the launcher's
/// environment says (see [`World::discover`]); the CLI fills it from its
/// flags (`--rank`, `--world-size`, `--local-rank`, `--rendezvous`,
/// `--token`, `--bind`, `--timeout-s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchOptions {
    /// This process's rank.
    pub rank: Option<usize>,
    /// Number of processes.
    pub world_size: Option<usize>,
    /// Rank of this process on its host.
    pub local_rank: Option<usize>,
    /// `HOST:PORT` where rank 0 listens (`HOST` alone keeps the default port).
    pub rendezvous: Option<String>,
    /// Job token every rank must share (default: COLLBENCH_TOKEN, else the
    /// launcher's job id), so two jobs or a stray process never join.
    pub token: Option<String>,
    /// Address rank 0 listens on (default 0.0.0.0, every interface).
    pub bind: Option<String>,
    /// Seconds before a missing or silent peer is an error.
    pub timeout_s: u64,
    /// The stuck-collective watchdog's deadline, if it has one: heartbeats
    /// come often enough (four per deadline, at most every 2 s) that a
    /// stopped rank is known silent before the deadline passes. Every
    /// rank of a job must be given the same.
    pub watchdog_s: Option<u64>,
}

impl Default for LaunchOptions {
    /// No overrides and a 60 s timeout (a derived `Default` would give a
    /// 0 s deadline).
    fn default() -> Self {
        LaunchOptions {
            rank: None,
            world_size: None,
            local_rank: None,
            rendezvous: None,
            token: None,
            bind: None,
            timeout_s: 60,
            watchdog_s: None,
        }
    }
}
