//! collbench-check: health verdicts against baselines (`collbench check`),
//! localisation of slow ranks and links, the built-in baselines
//! (`collbench baselines`).
//!
//! Not for: measuring (the runner does that through a backend) or
//! printing benchmark tables (collbench-output). Modules, one job each:
//! [`baseline`] (TOML format and built-ins), [`battery`] (runs one case
//! through the runner), [`verdict`] (PASS/WARN/FAIL per line),
//! [`localize`] (pairwise tests, culprits, heatmap), [`hosts`] (host
//! pairs in rounds and the verdict that names a slow host, docs/hosts.md),
//! [`prometheus`]
//! (textfile metrics), [`fabric`] (where the hosts' groups come from), [`transport`] (the
//! path measured, the transport gate and the fabric variants),
//! [`kube_api`] (the Kubernetes API server, through the pod's service
//! account), [`node_state`] (each node's verdict, and Slurm's
//! drain and resume, events), `check` (the command), [`error`] (how it fails:
//! [`CheckError`]). Local checks of drivers,
//! GPUs and network (`collbench doctor`) live in collbench-doctor.

pub mod baseline;
pub mod battery;
mod ceiling_warn;
mod check;
pub mod error;
pub mod fabric;
pub mod host_tests;
pub mod hosts;
pub mod kube_api;
pub mod localize;
pub mod node_state;
pub mod prometheus;
pub mod transport;
pub mod verdict;

pub use check::{check_main, CheckReport};
pub use error::CheckError;

use std::path::PathBuf;

/// What `collbench check` does (the CLI fills it from its flags; backend
/// and launch flags stay there).
///
/// Exit codes: 0 pass, 1 warn, 2 fail (a wrong result always fails), 6
/// incomplete (part of the job not judged).
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Baseline to judge against: a built-in name or a TOML file. Without
    /// one, only ranks are compared with each other (self-consistency).
    pub baseline: Option<String>,
    /// Fewer iterations; with a baseline, only the ops it has figures for.
    pub quick: bool,
    /// Bytes of every bandwidth test instead of the baseline's.
    pub size: Option<u64>,
    /// Timed iterations per test (default 10, 3 with `quick`).
    pub iters: Option<u32>,
    /// Run the pairwise tests even when every figure passes.
    pub localize: bool,
    /// Pairs below this fraction of the reference are slow.
    pub pair_fraction: f64,
    /// Where the verdicts (and the pairwise matrix) go as JSON.
    pub json: Option<PathBuf>,
    /// Where node_exporter textfile metrics go (atomically).
    pub prometheus: Option<PathBuf>,
    /// The hardware, where known: without a baseline, a large-size busbw
    /// far below its ceiling warns (docs/ceiling.md).
    pub topology: Option<collbench_core::Topology>,
    /// Where the hosts' fabric groups come from (`--groups`): the host
    /// tests then test within groups first, then across them.
    pub groups: Option<fabric::GroupSource>,
    /// What to do with each node's verdict: Slurm, Kubernetes, events
    /// (all off by default; actions are dry runs unless asked).
    pub node_state: node_state::NodeStateOptions,
    /// The transports the job must take, in NCCL's names
    /// (`--require-transport ib,p2p`): each not taken is a FAIL line
    /// naming what was expected, what was used and the cause seen.
    pub require_transport: Vec<collbench_core::nccl_path::gate::Required>,
    /// The fabric variants to run besides the battery's own paths
    /// (`--fabric`; default [`transport::ALL_VARIANTS`]).
    pub fabric: Vec<transport::Fabric>,
    /// Test hooks for CI without GPUs or a fabric; all off in use.
    pub hooks: TestHooks,
}

/// Test hooks: CI has neither broken NICs nor a fabric to slow, so these
/// make the faults the host tests must report. The CLI fills them from
/// `COLLBENCH_TEST_*` variables; all off by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TestHooks {
    /// Every host-pair test of this process's host fails, as if its NIC
    /// were down (`COLLBENCH_TEST_FAIL_PAIRS=<process>`): both processes
    /// of each such pair skip the test, so no partner waits on it.
    pub fail_pairs_of_process: Option<usize>,
    /// Host-pair tests between hosts of different fabric groups read this
    /// fraction of their figures, as if the link between the groups were
    /// slow (`COLLBENCH_TEST_GROUP_LINK=<fraction>`).
    pub group_link_factor: Option<f64>,
}

/// What `collbench baselines` does.
#[derive(Debug, Clone)]
pub enum BaselinesAction {
    /// Table of built-in baselines: name, GPUs, interconnect, source.
    List,
    /// One baseline's TOML.
    Show {
        /// Built-in baseline name.
        name: String,
    },
}

/// The built-in baselines' table, or one baseline's TOML, for stdout.
pub fn baselines_main(action: &BaselinesAction) -> Result<String, CheckError> {
    Ok(match action {
        BaselinesAction::List => baselines_table(),
        BaselinesAction::Show { name } => baseline::find_built_in(name)?.1.to_string(),
    })
}

/// The `baselines list` table.
fn baselines_table() -> String {
    let all = baseline::built_in();
    let w = all.iter().map(|(b, _)| b.name.len()).max().unwrap_or(4);
    let mut out = format!(
        "{:<w$}  {:>9}  {:<44}  source\n",
        "name", "GPUs", "interconnect"
    );
    for (b, _) in &all {
        let gpus = format!("{}x{}", b.nodes, b.gpus_per_node);
        let mut ic = b.interconnect.clone();
        if ic.chars().count() > 44 {
            ic = ic.chars().take(43).collect::<String>() + "…";
        }
        // The source's first clause names it briefly; the rest is in `show`.
        let src = b.source.split(';').next().unwrap_or(&b.source);
        out += &format!("{:<w$}  {gpus:>9}  {ic:<44}  {src}\n", b.name);
    }
    out
}
