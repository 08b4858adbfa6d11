//! What `tune` tries on this job: the transport NCCL uses between hosts
//! ([`Transport`], decided by [`decide_transport`] from facts the caller
//! collects), the environment candidates that transport calls for, the
//! user's own (`--env NAME=A,B`, [`UserEnv`]), and the plan: one
//! [`PlanRow`] per candidate with why it applies, which `--list-candidates`
//! prints and the search measures (docs/tune.md, "Candidates").
//!
//! Pure: the caller reads the environment and `/sys`; this file decides.

use crate::setting::{CtaPolicy, Registration, Setting};
use crate::space::{buffsize_candidates, candidates, CandidateSpace};
use collbench_core::Collective;
use std::fmt;

/// How NCCL moves data between the job's hosts, which decides the network
/// knobs worth trying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// One host: NCCL connects its GPUs with P2P (NVLink, PCIe) or SHM; no
    /// network knob applies.
    SingleHost,
    /// NCCL's socket transport (`NET/Socket`): TCP between hosts.
    Socket,
    /// NCCL's InfiniBand/RoCE transport (`NET/IB`).
    Ib,
    /// A network plugin named by `NCCL_NET` (e.g. an EFA plugin): neither
    /// socket nor IB knobs apply.
    Plugin(String),
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::SingleHost => f.write_str("one host (P2P/SHM)"),
            Transport::Socket => f.write_str("NET/Socket"),
            Transport::Ib => f.write_str("NET/IB"),
            Transport::Plugin(name) => write!(f, "network plugin {name}"),
        }
    }
}

/// What the transport is decided from, read by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportFacts {
    /// Distinct hosts in the job (NCCL's host identity: `NCCL_HOSTID` or
    /// the host name).
    pub hosts: usize,
    /// `NCCL_NET`, if set.
    pub nccl_net: Option<String>,
    /// `NCCL_IB_DISABLE`, if set.
    pub ib_disable: Option<String>,
    /// IB devices found (entries of `/sys/class/infiniband`).
    pub ib_devices: usize,
}

/// The transport and the one reason for it, for the plan's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportDecision {
    pub transport: Transport,
    pub why: String,
}

/// NCCL's own order, simplified: one host needs no network; `NCCL_NET`
/// names the network outright; `NCCL_IB_DISABLE=1` leaves sockets; IB
/// devices mean NCCL's IB transport; otherwise sockets.
pub fn decide_transport(f: &TransportFacts) -> TransportDecision {
    let d = |transport, why: String| TransportDecision { transport, why };
    if f.hosts <= 1 {
        return d(Transport::SingleHost, "every rank on one host".into());
    }
    if let Some(net) = f.nccl_net.as_deref().filter(|n| !n.is_empty()) {
        let why = format!("NCCL_NET={net}");
        return match net.to_ascii_lowercase().as_str() {
            "socket" => d(Transport::Socket, why),
            "ib" => d(Transport::Ib, why),
            _ => d(Transport::Plugin(net.to_string()), why),
        };
    }
    let ib_disabled = f
        .ib_disable
        .as_deref()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .is_some_and(|v| v != 0);
    if ib_disabled {
        let v = f.ib_disable.as_deref().unwrap_or_default();
        return d(Transport::Socket, format!("NCCL_IB_DISABLE={v}"));
    }
    if f.ib_devices > 0 {
        let why = format!("{} IB devices in /sys/class/infiniband", f.ib_devices);
        return d(Transport::Ib, why);
    }
    d(
        Transport::Socket,
        "no IB device in /sys/class/infiniband".into(),
    )
}

/// Distinct hosts among the host identities of a job's processes.
pub fn distinct_hosts<'a>(ids: impl IntoIterator<Item = &'a str>) -> usize {
    ids.into_iter()
        .collect::<std::collections::HashSet<_>>()
        .len()
        .max(1)
}

/// The job a plan is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Distinct hosts.
    pub hosts: usize,
    /// Ranks (GPUs) in the communicator.
    pub ranks: usize,
    /// How the hosts talk, and why collbench thinks so.
    pub transport: TransportDecision,
}

/// Which knob a candidate turns: its meaning, for the plan and the docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    Channels,
    AlgoProto,
    Registration,
    CtaPolicy,
    BufferSize,
    SocketThreads,
    IbQpsPerConnection,
    IbSplitDataOnQps,
    NetPeerChannels,
    NetGdrLevel,
    /// A user's `--env` candidate.
    User,
}

impl Knob {
    /// The name in the plan's first column.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Channels => "channels",
            Knob::AlgoProto => "algorithm/protocol",
            Knob::Registration => "registration",
            Knob::CtaPolicy => "CTA policy",
            Knob::BufferSize => "buffer size",
            Knob::SocketThreads => "socket threads",
            Knob::IbQpsPerConnection => "IB queue pairs",
            Knob::IbSplitDataOnQps => "IB split on QPs",
            Knob::NetPeerChannels => "net peer channels",
            Knob::NetGdrLevel => "GPUDirect RDMA level",
            Knob::User => "--env",
        }
    }
}

/// A candidate NCCL reads only from its environment (measured in child
/// processes), with why it applies to this job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCandidate {
    pub knob: Knob,
    /// The variables, in the order they are set.
    pub vars: Vec<(String, String)>,
    pub why: String,
}

impl EnvCandidate {
    fn new(knob: Knob, vars: &[(&str, String)], why: String) -> EnvCandidate {
        EnvCandidate {
            knob,
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            why,
        }
    }

    /// The setting the search measures.
    pub fn setting(&self) -> Setting {
        Setting {
            env: self.vars.clone(),
            ..Setting::default()
        }
    }
}

/// `NCCL_NSOCKS_PERTHREAD` x `NCCL_SOCKET_NTHREADS` pairs tried on sockets.
/// NCCL refuses a product above 64 (its MAX_SOCKETS), and more is not
/// better: on two emulated hosts 2x2 doubled busbw while 8x8 halved it.
pub const SOCKET_PAIRS: [(u32, u32); 5] = [(2, 2), (4, 1), (1, 4), (4, 2), (2, 4)];

/// The environment candidates for a job: the buffer size everywhere, the
/// socket knobs on sockets, the IB knobs on IB, no network knob on one
/// host or a plugin network.
pub fn env_candidates(job: &Job) -> Vec<EnvCandidate> {
    let mut out: Vec<EnvCandidate> = buffsize_candidates()
        .into_iter()
        .map(|s| EnvCandidate {
            knob: Knob::BufferSize,
            vars: s.env,
            why: "every job: NCCL's per-connection buffer (4 MiB by default; the default spelled out must be no gain)".into(),
        })
        .collect();
    let hosts = match job.hosts {
        1 => "1 host".to_string(),
        n => format!("{n} hosts"),
    };
    let between = format!("{hosts} over {}", job.transport.transport);
    match job.transport.transport {
        Transport::Socket => out.extend(socket_candidates(&between)),
        Transport::Ib => out.extend(ib_candidates(&between)),
        Transport::SingleHost | Transport::Plugin(_) => {}
    }
    out
}

fn socket_candidates(between: &str) -> Vec<EnvCandidate> {
    SOCKET_PAIRS
        .iter()
        .map(|&(socks, threads)| {
            EnvCandidate::new(
                Knob::SocketThreads,
                &[
                    ("NCCL_NSOCKS_PERTHREAD", socks.to_string()),
                    ("NCCL_SOCKET_NTHREADS", threads.to_string()),
                ],
                format!("{between}: more TCP streams per connection ({socks}x{threads})"),
            )
        })
        .collect()
}

fn ib_candidates(between: &str) -> Vec<EnvCandidate> {
    let one = |knob, name: &str, value: &str, what: &str| {
        EnvCandidate::new(
            knob,
            &[(name, value.to_string())],
            format!("{between}: {what}"),
        )
    };
    vec![
        one(
            Knob::IbQpsPerConnection,
            "NCCL_IB_QPS_PER_CONNECTION",
            "2",
            "2 queue pairs per connection (more routes through the fabric)",
        ),
        one(
            Knob::IbQpsPerConnection,
            "NCCL_IB_QPS_PER_CONNECTION",
            "4",
            "4 queue pairs per connection",
        ),
        EnvCandidate::new(
            Knob::IbSplitDataOnQps,
            &[
                ("NCCL_IB_QPS_PER_CONNECTION", "4".into()),
                ("NCCL_IB_SPLIT_DATA_ON_QPS", "1".into()),
            ],
            format!("{between}: each message split over 4 queue pairs instead of one per message"),
        ),
        one(
            Knob::NetPeerChannels,
            "NCCL_NCHANNELS_PER_NET_PEER",
            "4",
            "4 channels per remote peer (NCCL: for point-to-point traffic)",
        ),
        one(
            Knob::NetGdrLevel,
            "NCCL_NET_GDR_LEVEL",
            "SYS",
            "GPUDirect RDMA at any GPU-NIC distance",
        ),
        one(
            Knob::NetGdrLevel,
            "NCCL_NET_GDR_LEVEL",
            "LOC",
            "GPUDirect RDMA off (through host memory)",
        ),
    ]
}

/// A user's `--env NAME=A,B,..`: one candidate per value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserEnv {
    pub name: String,
    pub values: Vec<String>,
}

/// Variables collbench sets itself for the search; a candidate must not.
const RESERVED: [&str; 2] = ["NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE"];

impl std::str::FromStr for UserEnv {
    type Err = String;

    /// `NAME=A,B`: NAME like an environment variable (letters, digits,
    /// `_`, not starting with a digit), one or more non-empty values.
    fn from_str(s: &str) -> Result<UserEnv, String> {
        let fix = "write NAME=VALUE[,VALUE...], e.g. --env NCCL_BUFFSIZE=2097152,8388608";
        let Some((name, values)) = s.split_once('=') else {
            return Err(format!("--env '{s}' has no '=': {fix}"));
        };
        let looks_like_var = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !looks_like_var {
            return Err(format!("--env '{s}': '{name}' is not an environment variable name (letters, digits, _): {fix}"));
        }
        if RESERVED.contains(&name) || name.starts_with("COLLBENCH_") {
            return Err(format!(
                "--env '{s}': collbench tune sets {name} itself; try another variable"
            ));
        }
        let values: Vec<String> = values.split(',').map(str::to_string).collect();
        if values.iter().any(|v| v.is_empty()) {
            return Err(format!("--env '{s}' has an empty value: {fix}"));
        }
        Ok(UserEnv {
            name: name.to_string(),
            values,
        })
    }
}

/// The user's candidates, one per value.
pub fn user_candidates(user: &[UserEnv]) -> Vec<EnvCandidate> {
    user.iter()
        .flat_map(|u| {
            u.values.iter().map(move |v| {
                EnvCandidate::new(
                    Knob::User,
                    &[(&u.name, v.clone())],
                    "asked for with --env".into(),
                )
            })
        })
        .collect()
}

/// The search's candidates for a job: channels, algorithm/protocol,
/// registration and CTA policy as [`CandidateSpace::default`], plus the
/// job's environment candidates and the user's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub job: Job,
    pub space: CandidateSpace,
    /// Every environment candidate of `space.extra` and `space.asked`, with
    /// its meaning.
    pub env: Vec<EnvCandidate>,
    /// Why environment candidates are not measured in this job, if they
    /// are not (several processes: each would need a child job on every
    /// host, not built yet).
    pub env_not_measured: Option<String>,
}

impl Plan {
    /// The plan for `job` with the user's `--env` candidates.
    pub fn new(job: Job, user: &[UserEnv]) -> Plan {
        let mut env = env_candidates(&job);
        let asked = user_candidates(user);
        let space = CandidateSpace {
            extra: env.iter().map(EnvCandidate::setting).collect(),
            asked: asked.iter().map(EnvCandidate::setting).collect(),
            ..CandidateSpace::default()
        };
        env.extend(asked);
        Plan {
            job,
            space,
            env,
            env_not_measured: None,
        }
    }

    /// The candidates the search measures: the space, without the
    /// environment candidates where they are not measured.
    pub fn search_space(&self) -> CandidateSpace {
        let mut space = self.space.clone();
        if self.env_not_measured.is_some() {
            space.extra.retain(|s| s.env.is_empty());
            space.asked.retain(|s| s.env.is_empty());
        }
        space
    }

    /// One row per distinct candidate of `ops`, in the search's order,
    /// with the ops it applies to; those over `max_channels` are kept as
    /// not measured.
    pub fn rows(&self, ops: &[Collective], max_channels: Option<u32>) -> Vec<PlanRow> {
        let mut rows: Vec<PlanRow> = Vec::new();
        for &op in ops {
            let (allowed, forbidden) = candidates(&self.space, op, max_channels);
            let all = allowed.into_iter().map(|s| (s, true));
            for (setting, measured) in all.chain(forbidden.into_iter().map(|s| (s, false))) {
                match rows.iter_mut().find(|r| r.setting == setting) {
                    Some(r) => r.ops.push(op),
                    None => rows.push(self.row(setting, op, measured, max_channels)),
                }
            }
        }
        rows
    }

    fn row(&self, setting: Setting, op: Collective, measured: bool, max: Option<u32>) -> PlanRow {
        let (knob, why) = match self
            .env
            .iter()
            .find(|e| e.vars == setting.env && !e.vars.is_empty())
        {
            Some(e) => (e.knob, e.why.clone()),
            None => in_process_meaning(&setting),
        };
        let why = match (measured, max, &self.env_not_measured) {
            (false, Some(n), _) => format!("not measured: more channels than --max-channels {n}"),
            (true, _, Some(reason)) if !setting.env.is_empty() => format!("not measured: {reason}"),
            _ => why,
        };
        let measured = measured && (setting.env.is_empty() || self.env_not_measured.is_none());
        PlanRow {
            knob,
            in_child: !setting.env.is_empty(),
            setting,
            ops: vec![op],
            measured,
            why,
        }
    }
}

/// The knob and reason of a candidate set through the communicator or
/// collbench's tuner plugin.
fn in_process_meaning(s: &Setting) -> (Knob, String) {
    if s.channels.is_some() {
        return (
            Knob::Channels,
            "every job: ncclConfig_t minCTAs = maxCTAs (SMs taken)".into(),
        );
    }
    if s.algorithm.is_some() || s.protocol.is_some() {
        return (
            Knob::AlgoProto,
            "every job: a pair NCCL has for the op, via collbench's tuner plugin".into(),
        );
    }
    if s.registration != Registration::None {
        return (
            Knob::Registration,
            "every job: the application must register its buffers".into(),
        );
    }
    if s.cta_policy != CtaPolicy::Default {
        return (
            Knob::CtaPolicy,
            "every job: ncclConfig_t.CTAPolicy (NCCL 2.27+)".into(),
        );
    }
    (Knob::User, "as given".into())
}

/// One candidate of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRow {
    pub knob: Knob,
    pub setting: Setting,
    /// The ops it is tried on.
    pub ops: Vec<Collective>,
    /// Measured in child processes (an environment candidate).
    pub in_child: bool,
    /// False where `--max-channels` forbids it.
    pub measured: bool,
    pub why: String,
}

#[cfg(test)]
mod tests;
