//! `tune`'s candidate plan from what the job runs on: the facts the
//! transport is decided from (hosts, `NCCL_NET`, `NCCL_IB_DISABLE`, IB
//! devices in `/sys/class/infiniband`) read here, the decision and the
//! candidates in `collbench_tune::plan`; `--list-candidates` prints it.

use crate::exit::{Failure, Outcome};
use crate::tune_cmd::TuneArgs;
use collbench_tune::plan::{
    decide_transport, Job, Plan, Transport, TransportDecision, TransportFacts, UserEnv,
};

/// `--transport`: how the hosts talk, when collbench's guess is wrong.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportArg {
    /// Decide from the hosts in the job, NCCL_NET, NCCL_IB_DISABLE and
    /// /sys/class/infiniband.
    Auto,
    /// One host: no network knob.
    SingleHost,
    /// NCCL's socket transport: socket knobs.
    Socket,
    /// NCCL's InfiniBand/RoCE transport: IB knobs.
    Ib,
}

/// `--env NAME=A,B`, checked as clap parses it.
pub fn env_arg(s: &str) -> Result<UserEnv, String> {
    s.parse()
}

/// Where this process's environment and /sys say the transport comes
/// from, for a job of `hosts` hosts.
fn facts(hosts: usize) -> TransportFacts {
    let var = |k: &str| std::env::var(k).ok();
    let ib_devices = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.count())
        .unwrap_or(0);
    TransportFacts {
        hosts,
        nccl_net: var("NCCL_NET"),
        ib_disable: var("NCCL_IB_DISABLE"),
        ib_devices,
    }
}

/// The transport: `--transport` when given, else decided from the facts.
fn transport(arg: TransportArg, hosts: usize) -> TransportDecision {
    let given = |transport| TransportDecision {
        transport,
        why: "--transport".into(),
    };
    match arg {
        TransportArg::Auto => decide_transport(&facts(hosts)),
        TransportArg::SingleHost => given(Transport::SingleHost),
        TransportArg::Socket => given(Transport::Socket),
        TransportArg::Ib => given(Transport::Ib),
    }
}

/// The plan for a job of `hosts` hosts and `ranks` ranks.
pub fn plan(a: &TuneArgs, hosts: usize, ranks: usize) -> Plan {
    let job = Job {
        hosts,
        ranks,
        transport: transport(a.transport, hosts),
    };
    Plan::new(job, &a.env)
}

/// Ranks a one-process `tune` would drive, without opening a backend:
/// `-g`, `--ranks`, else the GPUs CUDA sees (1 where it sees none).
fn local_ranks(a: &TuneArgs) -> usize {
    let b = &a.backend;
    b.ngpus
        .map(|g| g * b.nthreads.max(1))
        .or(b.ranks)
        .or_else(|| collbench_nccl::gpu_count().ok().filter(|n| *n > 0))
        .unwrap_or(1)
}

/// `--list-candidates`: the plan on stdout, nothing measured (any
/// backend: it opens none).
pub fn list_candidates(a: &TuneArgs) -> Result<Outcome, Failure> {
    print_plan(a, &plan(a, 1, local_ranks(a)))
}

/// Prints `plan`'s rows for the ops of the command line.
pub fn print_plan(a: &TuneArgs, plan: &Plan) -> Result<Outcome, Failure> {
    let refused = |m: String| Failure::new(Outcome::TuneRefused, m);
    let ops = crate::tune_cmd::tune_ops(&a.ops).map_err(refused)?;
    let rows = plan.rows(&ops, a.max_channels);
    crate::stdout::print(&collbench_tune::render::plan(plan, &rows)).map_err(Failure::from)?;
    Ok(Outcome::TuneComplete)
}
