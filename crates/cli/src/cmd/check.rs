//! `collbench check` and `collbench baselines`: their flags, converted
//! into [`collbench_check::CheckOptions`] and
//! [`collbench_check::BaselinesAction`], and their bodies.

use crate::args::{BackendArgs, Mode, WatchdogArgs};
use crate::exit::{Failure, Outcome};
use crate::launch_args::LaunchArgs;
use collbench_check::{BaselinesAction as Action, CheckOptions};
use std::path::PathBuf;

fn size_arg(s: &str) -> Result<u64, String> {
    collbench_core::size::parse_size(s).map_err(|e| e.to_string())
}

/// The most timed iterations `check -n` takes: 10000 iterations of a
/// 1 GiB all_reduce at 400 GB/s busbw are about 50 s per test.
pub const MAX_CHECK_ITERS: u32 = 10_000;

/// `check -n`: 1 to [`MAX_CHECK_ITERS`]; 0 was run as 1 without a word.
fn check_iters_arg(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (1..=MAX_CHECK_ITERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "-n takes a count of timed iterations from 1 to {MAX_CHECK_ITERS}"
        )),
    }
}

/// `--fabric`'s variants, parsed once by the check crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricList(pub Vec<collbench_check::transport::Fabric>);

fn fabric_arg(s: &str) -> Result<FabricList, String> {
    collbench_check::transport::parse_fabric(s).map(FabricList)
}

/// `collbench check` flags (backend and launch flags are added by the CLI).
///
/// Exit codes: 0 pass, 1 warn, 2 fail (a wrong result always fails), 6
/// incomplete.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Baseline to judge against: a built-in name (`collbench baselines
    /// list`) or a TOML file. Without one, only ranks are compared with
    /// each other (self-consistency).
    #[arg(long, value_name = "NAME|FILE")]
    pub baseline: Option<String>,
    /// Fewer iterations; with a baseline, only the ops it has figures for.
    #[arg(long)]
    pub quick: bool,
    /// Run every bandwidth test at this size instead of the baseline's
    /// (default without a baseline: 64M on the CPU backend, 1G on GPUs).
    #[arg(long, value_parser = size_arg)]
    pub size: Option<u64>,
    /// Timed iterations per test (default 10, 3 with --quick; 1 to
    /// 10000, so that a gate ends in bounded time).
    #[arg(short = 'n', long, value_parser = check_iters_arg)]
    pub iters: Option<u32>,
    /// Run the pairwise tests that name a slow rank or link even when
    /// every figure passes.
    #[arg(long)]
    pub localize: bool,
    /// Pairs below this fraction of the reference (median over ranks of
    /// each rank's fastest pair) are slow.
    #[arg(long, default_value_t = 0.8)]
    pub pair_fraction: f64,
    /// Write the verdicts (and the pairwise matrix) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write node_exporter textfile metrics to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Slurm, dry run: print the `scontrol update` lines that would drain
    /// the nodes found bad (the reason names the finding) and resume the
    /// nodes collbench drained that pass; change nothing.
    #[arg(long)]
    pub slurm: bool,
    /// Slurm: drain and resume as `--slurm` prints (needs Slurm's
    /// operator rights: HealthCheckProgram, prolog, epilog, or root). A
    /// node not tested, or drained by someone else, is never touched.
    #[arg(long)]
    pub slurm_apply: bool,
    /// Kubernetes, dry run: print the patches (Node documents) that would
    /// set the node condition CollbenchUnhealthy and the taint
    /// collbench.dev/unhealthy on each node found bad (NODE_NAME names a
    /// pod's node), and clear them on each node that passes.
    #[arg(long)]
    pub k8s: bool,
    /// Kubernetes: send those patches to the API server with the pod's
    /// service account (it needs get and patch on nodes and nodes/status);
    /// the node's other taints are kept.
    #[arg(long)]
    pub k8s_apply: bool,
    /// Test host pairs within fabric groups first, then across them, and
    /// name a slow link between two groups (not a host): `slurm` (Slurm's
    /// topology: each leaf switch or block a group), `label` (Kubernetes
    /// node labels: cloud.google.com/gce-topology-block,
    /// nvidia.com/gpu.clique, network.topology.nvidia.com/*, the finest
    /// that every node has), `label:KEY`, or a file of `HOST GROUP` lines.
    #[arg(long, value_name = "FILE|slurm|label[:KEY]")]
    pub groups: Option<PathBuf>,
    /// Write one JSON event per finding (a bad or held node, a slow link),
    /// with what was done about it, to FILE, one per line (`-`: stdout,
    /// after the verdict).
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// The transports the job must take, in NCCL's names (ib roce socket
    /// ofi tcpx tcpxo p2p shm nvls collnet gdr; efa is ofi): each not
    /// taken is a FAIL line naming what was expected, what NCCL used and
    /// the cause seen (docs/transport.md). Without it, RDMA NICs with a
    /// Socket network, or NVLink with P2P off, still fail.
    #[arg(long = "require-transport", value_name = "LIST", value_parser = crate::transport_gate::parse)]
    pub require_transport: Option<crate::transport_gate::RequiredTransports>,
    /// Fabric variants besides the battery's own paths: `network` (every
    /// pair of ranks through the NICs), `intra` (one communicator per
    /// host), `all` (both, where they apply) or `none`; each judged
    /// against its own ceiling.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = fabric_arg)]
    pub fabric: FabricList,
}

impl CheckArgs {
    /// What to do with each node's verdict.
    fn node_state(&self) -> collbench_check::node_state::NodeStateOptions {
        use collbench_check::node_state::Act;
        let act = |apply: bool, dry: bool| {
            if apply {
                Some(Act::Apply)
            } else {
                dry.then_some(Act::DryRun)
            }
        };
        collbench_check::node_state::NodeStateOptions {
            slurm: act(self.slurm_apply, self.slurm),
            k8s: act(self.k8s_apply, self.k8s),
            events: self.events.clone(),
        }
    }
}

impl From<&CheckArgs> for CheckOptions {
    fn from(a: &CheckArgs) -> CheckOptions {
        CheckOptions {
            baseline: a.baseline.clone(),
            quick: a.quick,
            size: a.size,
            iters: a.iters,
            localize: a.localize,
            pair_fraction: a.pair_fraction,
            json: a.json.clone(),
            prometheus: a.prometheus.clone(),
            // Found after the backend opens (`main`), GPU backends only.
            topology: None,
            // Read and checked by `main` before any work (`groups`).
            groups: None,
            node_state: a.node_state(),
            require_transport: crate::transport_gate::required(a.require_transport.as_ref())
                .to_vec(),
            fabric: a.fabric.0.clone(),
            hooks: test_hooks(|k| std::env::var(k).ok()),
        }
    }
}

/// The test hooks from their `COLLBENCH_TEST_*` variables (CI only; an
/// unreadable value is no hook).
fn test_hooks(env: impl Fn(&str) -> Option<String>) -> collbench_check::TestHooks {
    collbench_check::TestHooks {
        fail_pairs_of_process: env("COLLBENCH_TEST_FAIL_PAIRS").and_then(|v| v.parse().ok()),
        group_link_factor: env("COLLBENCH_TEST_GROUP_LINK").and_then(|v| v.parse().ok()),
    }
}

/// `collbench baselines` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct BaselinesArgs {
    #[command(subcommand)]
    pub action: Option<BaselinesAction>,
}

/// What `collbench baselines` does (default: list).
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BaselinesAction {
    /// Table of built-in baselines: name, GPUs, interconnect, source.
    List,
    /// Print one baseline's TOML (copy it to write your own).
    Show {
        /// Built-in baseline name.
        name: String,
    },
}

impl From<&BaselinesArgs> for Action {
    fn from(a: &BaselinesArgs) -> Action {
        match &a.action {
            None | Some(BaselinesAction::List) => Action::List,
            Some(BaselinesAction::Show { name }) => Action::Show { name: name.clone() },
        }
    }
}

/// `--groups`: Slurm's topology, or a `HOST GROUP` file read now (a
/// usage error, one line, before any work).
pub fn groups(a: &CheckArgs) -> Result<Option<collbench_check::fabric::GroupSource>, String> {
    use collbench_check::fabric::{parse_group_file, GroupSource};
    use collbench_core::read_limit;
    let Some(path) = &a.groups else {
        return Ok(None);
    };
    if path.as_os_str() == "slurm" {
        return Ok(Some(GroupSource::Slurm));
    }
    if path.as_os_str() == "label" {
        return Ok(Some(GroupSource::Labels(None)));
    }
    if let Some(key) = path.to_str().and_then(|p| p.strip_prefix("label:")) {
        return Ok(Some(GroupSource::Labels(Some(key.to_string()))));
    }
    let text = read_limit::read_to_string(path, read_limit::SETTINGS_BYTES, "a groups file")
        .map_err(|e| format!("--groups: {}", crate::one_line(&e.into())))?;
    parse_group_file(&text)
        .map(|m| Some(GroupSource::Map(m)))
        .map_err(|e| format!("--groups {}: {e}", path.display()))
}

/// `collbench check`: its flags checked, the backend opened, the check run.
pub fn run(
    check: &CheckArgs,
    backend: &BackendArgs,
    watch: &WatchdogArgs,
    launch: &LaunchArgs,
    force: bool,
) -> Result<Outcome, Failure> {
    check_args(check, force)?;
    let groups = groups(check).map_err(Failure::usage)?;
    let watchdog = watch.watchdog(0);
    let nccl = backend.nccl_options(Mode::Native);
    let mut opened = crate::backend_open::open(backend, launch, &nccl, Mode::Native, &watchdog)?;
    let mut options: collbench_check::CheckOptions = check.into();
    options.groups = groups;
    options.topology = crate::run_ceiling::check_topology(opened.backend.as_ref());
    collbench_check::check_main(
        &options,
        opened.backend.as_mut(),
        opened.control.as_ref(),
        &watchdog,
        // Not the lock: the last resort's flush takes it, and a
        // check held in NCCL's teardown must still end (exit 5).
        &mut std::io::stdout(),
    )
    .map(Outcome::check)
    .map_err(crate::exit::check_failure)
}

/// `check`'s own flags, before any work: the output paths and the size.
fn check_args(a: &CheckArgs, force: bool) -> Result<(), Failure> {
    if a.size == Some(0) {
        return Err(Failure::usage(
            "--size 0 measures nothing: give a size of at least 1 byte, e.g. --size 64M",
        ));
    }
    // A baseline given as a file is the one input of `check`.
    let inputs: Vec<&std::path::Path> = a
        .baseline
        .as_deref()
        .map(std::path::Path::new)
        .filter(|p| p.exists())
        .into_iter()
        .collect();
    if let (Some(j), Some(p)) = (&a.json, &a.prometheus) {
        crate::outputs::distinct(("--json", j), ("--prometheus", p))?;
    }
    // `--events -` is stdout; a file is claimed as --json is.
    let events = a.events.as_deref().filter(|e| e.as_os_str() != "-");
    for (flag, other) in [("--json", &a.json), ("--prometheus", &a.prometheus)] {
        if let (Some(e), Some(o)) = (events, other) {
            crate::outputs::distinct((flag, o), ("--events", e))?;
        }
    }
    if let Some(path) = events {
        crate::outputs::claim("--events", path, force, &inputs)?;
    }
    if let Some(path) = &a.json {
        crate::outputs::claim("--json", path, force, &inputs)?;
    }
    // The textfile collector's file is replaced on every run (atomically):
    // no --force needed, but only a regular file may be there.
    if let Some(path) = &a.prometheus {
        crate::outputs::claim_replaced("--prometheus", path, &inputs)?;
    }
    Ok(())
}

/// `collbench baselines`: the built-in baselines listed, or one shown.
pub fn run_baselines(a: &BaselinesArgs) -> Result<Outcome, Failure> {
    crate::stdout::print(&collbench_check::baselines_main(&a.into()).map_err(crate::usage)?)?;
    Ok(Outcome::Ok)
}
