//! After the battery: the path it took, the transport gate, and the
//! fabric variants (issue #50, docs/transport.md). The variants run the
//! battery's reference op (all_reduce at its largest size) again through
//! the network alone and within hosts alone; a variant without meaning
//! for the job (one host: no network; one rank per host: nothing within;
//! the CPU backend: no data crosses processes) is skipped with its
//! reason, a variant that could not run is INCOMPLETE.

use super::cases::{iterations, Job};
use crate::battery::{run_case, CaseOutcome, CaseRequest, Iterations, Measured};
use crate::error::CheckError;
use crate::host_tests::{host_key, ThisProcess};
use crate::transport::{self, Fabric, PathSeen, TransportReport, VariantLine};
use crate::verdict::{Line, Metric, Status};
use crate::CheckOptions;
use collbench_core::nccl_path::NcclPath;
use collbench_core::{diag, size::format_size, Collective, DataType, Topology};
use serde::{Deserialize, Serialize};

/// The op every variant runs: the battery's line it is compared with.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Reference {
    op: String,
    size_bytes: u64,
}

/// The job's hosts as every process sees them.
struct Hosts {
    /// How many.
    count: usize,
    /// This process's host (index into the hosts, in order of first
    /// process).
    mine: usize,
    /// Ranks on each host.
    ranks: Vec<usize>,
    /// Each host's name.
    names: Vec<String>,
    /// This process's place among its host's processes (0..): its rail.
    slot: usize,
    /// The most processes on one host: the rails.
    slots: usize,
    /// The most ranks one process drives.
    most_local_ranks: usize,
}

/// The path, the gate and the variants; rank 0 gets the report, the
/// other processes `None`. Every process takes part in the variants.
pub(super) fn transport(
    job: &mut Job,
    args: &CheckOptions,
    lines: &[Line],
    is_cpu: bool,
) -> Result<Option<TransportReport>, CheckError> {
    let reference = agree_on_reference(job, lines)?;
    let hosts = discover(job)?;
    let path = battery_path(job, is_cpu);
    let topo = job
        .root
        .then(|| ceiling_topology(args, &hosts, is_cpu, reference.as_ref()))
        .flatten();
    let mut variants = Vec::new();
    if let Some(r) = &reference {
        if let Some(line) = lines
            .iter()
            .find(|l| l.op == r.op && l.size_bytes == r.size_bytes)
        {
            variants.push(from_line(
                Fabric::AllPaths,
                line,
                path.clone(),
                topo.as_ref(),
                !is_cpu,
                "",
            ));
        }
        for &v in &args.fabric {
            let line = match v {
                Fabric::Network => network(job, args, r, &hosts, is_cpu)?,
                _ => intra(job, args, r, &hosts, is_cpu, lines, &path)?,
            };
            variants.extend(line.map(|l| judged(l, topo.as_ref(), !is_cpu)));
        }
    }
    if !job.root {
        return Ok(None);
    }
    let env = transport::nccl_env();
    let gate = transport::gate_lines(&path, &args.require_transport, args.topology.as_ref(), &env);
    Ok(Some(TransportReport {
        path,
        required: args
            .require_transport
            .iter()
            .map(|r| format!("{r:?}").to_lowercase())
            .collect(),
        gate,
        variants,
    }))
}

/// Rank 0's reference op (the all_reduce busbw line of the largest size
/// measured, else the first measured busbw line), on every process.
fn agree_on_reference(job: &Job, lines: &[Line]) -> Result<Option<Reference>, CheckError> {
    let measured = lines
        .iter()
        .filter(|l| l.metric == Metric::BusbwGbps && l.measured.is_some());
    let pick = measured
        .clone()
        .filter(|l| l.op == Collective::AllReduce.name())
        .max_by_key(|l| l.size_bytes)
        .or_else(|| measured.clone().next())
        .map(|l| Reference {
            op: l.op.clone(),
            size_bytes: l.size_bytes,
        });
    if job.control.world_size() == 1 {
        return Ok(pick);
    }
    let word = job
        .control
        .broadcast(job.root.then(|| serde_json::to_vec(&pick)).transpose()?)?;
    Ok(serde_json::from_slice(&word)?)
}

/// Every process's host (NCCL_HOSTID, else its host name) and ranks.
fn discover(job: &Job) -> Result<Hosts, CheckError> {
    let info = job.backend.info();
    let hostname = info.devices.first().map_or("", |d| d.host.as_str());
    let key = host_key(|k| std::env::var(k).ok(), hostname);
    let mine = serde_json::to_vec(&(key, job.backend.local_ranks()))?;
    let all: Vec<(String, usize)> = job
        .control
        .all_gather(mine)?
        .iter()
        .map(|p| serde_json::from_slice(p))
        .collect::<Result<_, _>>()?;
    let mut hosts = Hosts {
        count: 0,
        mine: 0,
        ranks: Vec::new(),
        names: Vec::new(),
        slot: 0,
        slots: 0,
        most_local_ranks: 0,
    };
    let mut processes: Vec<usize> = Vec::new();
    for (p, (name, ranks)) in all.into_iter().enumerate() {
        let h = match hosts.names.iter().position(|n| *n == name) {
            Some(h) => h,
            None => {
                hosts.names.push(name);
                hosts.ranks.push(0);
                processes.push(0);
                hosts.names.len() - 1
            }
        };
        hosts.ranks[h] += ranks;
        hosts.most_local_ranks = hosts.most_local_ranks.max(ranks);
        if p == job.control.rank() {
            hosts.mine = h;
            hosts.slot = processes[h];
        }
        processes[h] += 1;
    }
    hosts.count = hosts.names.len();
    hosts.slots = processes.iter().copied().max().unwrap_or(0);
    Ok(hosts)
}

/// The battery's path (rank 0's word; the other processes' is unused).
fn battery_path(job: &Job, is_cpu: bool) -> PathSeen {
    if is_cpu {
        return PathSeen::cpu(job.backend.local_ranks(), job.control.world_size());
    }
    match &job.path {
        Some(p) => PathSeen::nccl(p.clone()),
        None => PathSeen::Unknown {
            why: unknown_why(&job.backend.info().name),
        },
    }
}

fn unknown_why(backend: &str) -> String {
    if backend == "nccl" {
        "NCCL printed no path line where collbench captures it (is NCCL_DEBUG printing to the terminal?)".into()
    } else {
        format!("the {backend} backend cannot say")
    }
}

/// The hardware each variant's ceiling is drawn from: the GPU topology
/// the CLI found, or on the CPU backend a memory copy probe (rank 0's
/// host), with the job's hosts and ranks.
fn ceiling_topology(
    args: &CheckOptions,
    hosts: &Hosts,
    is_cpu: bool,
    reference: Option<&Reference>,
) -> Option<Topology> {
    if !is_cpu {
        return args.topology.clone();
    }
    reference?;
    let size = reference.map_or(0, |r| r.size_bytes);
    Some(Topology {
        hosts: hosts.count as u64,
        ranks_per_host: hosts.ranks.iter().max().map(|&r| r as u64),
        cpu: Some(collbench_core::CpuTopology {
            cores: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64),
            mem_copy_gbps: collbench_ceiling::probe::mem_copy_gbps(size),
            mem_copy_solo_gbps: collbench_ceiling::probe::mem_copy_solo_gbps(size),
        }),
        ..Topology::default()
    })
}

/// A variant measured, before its ceiling: figures, or why it has none.
struct Raw {
    variant: Fabric,
    reference: Reference,
    path: Option<PathSeen>,
    figures: Result<(f64, u64), RawMiss>,
    /// Words before the verdict (the slowest host, one host's battery).
    prefix: String,
}

enum RawMiss {
    Skipped(String),
    NotRun(String),
}

/// `raw` with its ceiling and verdict.
fn judged(raw: Raw, topo: Option<&Topology>, judge: bool) -> VariantLine {
    let mut line = VariantLine {
        variant: raw.variant,
        op: raw.reference.op.clone(),
        size_bytes: raw.reference.size_bytes,
        path: raw.path,
        busbw_gbps: None,
        ceiling_gbps: None,
        bottleneck: None,
        status: Status::Info,
        skipped: None,
        note: String::new(),
    };
    match raw.figures {
        Err(RawMiss::Skipped(why)) => {
            line.note = format!("skipped: {why}");
            line.skipped = Some(why);
        }
        Err(RawMiss::NotRun(why)) => {
            line.status = Status::Incomplete;
            line.note = format!("could not run: {why}");
        }
        Ok((busbw, wrong)) => {
            let op = Collective::parse(&raw.reference.op).unwrap_or(Collective::AllReduce);
            let j = transport::judge_variant(
                raw.variant,
                (op, raw.reference.size_bytes),
                (busbw, wrong),
                topo,
                judge,
            );
            line.busbw_gbps = Some(busbw);
            line.ceiling_gbps = j.ceiling_gbps;
            line.bottleneck = j.bottleneck;
            line.status = j.status;
            line.note = format!("{}{}", raw.prefix, j.note);
        }
    }
    line
}

/// The battery's own line as a variant (all paths; or within hosts when
/// the job has one host).
fn from_line(
    variant: Fabric,
    line: &Line,
    path: PathSeen,
    topo: Option<&Topology>,
    judge: bool,
    prefix: &str,
) -> VariantLine {
    judged(
        Raw {
            variant,
            reference: Reference {
                op: line.op.clone(),
                size_bytes: line.size_bytes,
            },
            path: Some(path),
            figures: Ok((line.measured.unwrap_or(0.0), line.wrong)),
            prefix: prefix.into(),
        },
        topo,
        judge,
    )
}

/// A variant's iterations: the battery's, without the explain pass.
fn variant_iterations(args: &CheckOptions) -> Iterations {
    Iterations {
        explain: false,
        ..iterations(args, Metric::BusbwGbps)
    }
}

fn request(r: &Reference) -> CaseRequest {
    CaseRequest {
        collective: Collective::parse(&r.op).unwrap_or(Collective::AllReduce),
        dtype: DataType::Float,
        size_bytes: r.size_bytes,
    }
}

fn say(job: &Job, v: Fabric, r: &Reference) {
    if job.root {
        diag::line(&format!(
            "collbench check: {} {} {} ...",
            v.label(),
            r.op,
            format_size(r.size_bytes)
        ));
    }
}

/// The network-only variant: every pair of ranks through the NICs.
fn network(
    job: &mut Job,
    args: &CheckOptions,
    r: &Reference,
    hosts: &Hosts,
    is_cpu: bool,
) -> Result<Option<Raw>, CheckError> {
    let raw = |path, figures| Raw {
        variant: Fabric::Network,
        reference: r.clone(),
        path,
        figures,
        prefix: String::new(),
    };
    let none = || None;
    if is_cpu {
        let why = "the cpu backend moves no data between processes (each process's rank threads share its memory): it has no network path to measure alone";
        return Ok(Some(raw(none(), Err(RawMiss::Skipped(why.into())))));
    }
    if hosts.count < 2 {
        let why = "the job has one host: no network between hosts to measure";
        return Ok(Some(raw(none(), Err(RawMiss::Skipped(why.into())))));
    }
    if hosts.most_local_ranks > 1 {
        let why = format!(
            "a process drives {} ranks, and a communicator of one rank per host needs one rank per process (launch one process per GPU)",
            hosts.most_local_ranks
        );
        return Ok(Some(raw(none(), Err(RawMiss::Skipped(why)))));
    }
    // One communicator per rail: the k-th process of every host, so each
    // holds one rank per host and every pair of its ranks crosses the
    // NICs (NCCL reads P2P/SHM/NVLS switches once per process, so turning
    // them off for one communicator is not possible). All rails run at
    // once, so each host's NICs carry as many communicators as it has
    // ranks, as its ceiling assumes.
    say(job, Fabric::Network, r);
    let mine = measure_group(job, args, r, hosts.slot)?;
    let Some(parts) = job.control.gather(serde_json::to_vec(&mine)?)? else {
        return Ok(None);
    };
    let all: Vec<GroupFigures> = parts
        .iter()
        .map(|p| serde_json::from_slice(p))
        .collect::<Result<_, _>>()?;
    let rails = Groups {
        names: (0..hosts.slots).map(|k| format!("rail {k}")).collect(),
        ranks: vec![hosts.count; hosts.slots],
        what: "rails (the k-th process of every host)",
    };
    Ok(Some(combine_groups(
        raw(None, Err(RawMiss::NotRun(String::new()))),
        &all,
        &rails,
        is_cpu,
    )))
}

/// One process's figures of a variant run on groups of processes side
/// by side (within hosts: one group per host; network only: one per rail).
#[derive(Serialize, Deserialize)]
struct GroupFigures {
    group: usize,
    figures: Result<(f64, u64), String>,
    path: Option<NcclPath>,
}

/// The within-hosts variant: one communicator per host, each measured
/// at once; the job's figure is its slowest host's.
fn intra(
    job: &mut Job,
    args: &CheckOptions,
    r: &Reference,
    hosts: &Hosts,
    is_cpu: bool,
    lines: &[Line],
    path: &PathSeen,
) -> Result<Option<Raw>, CheckError> {
    let mut raw = Raw {
        variant: Fabric::Intra,
        reference: r.clone(),
        path: None,
        figures: Err(RawMiss::Skipped(
            "one rank per host: nothing within hosts to measure".into(),
        )),
        prefix: String::new(),
    };
    if hosts.ranks.iter().all(|&n| n < 2) {
        return Ok(Some(raw));
    }
    if hosts.count == 1 {
        // The battery already ran within the one host: its figure is this
        // variant's, judged against the host's own ceiling.
        let line = lines
            .iter()
            .find(|l| l.op == r.op && l.size_bytes == r.size_bytes);
        raw.figures = Ok(line.map_or((0.0, 0), |l| (l.measured.unwrap_or(0.0), l.wrong)));
        raw.prefix = "the job has one host, so the battery measured within it; ".into();
        raw.path = Some(path.clone());
        return Ok(job.root.then_some(raw));
    }
    say(job, Fabric::Intra, r);
    let mine = measure_group(job, args, r, hosts.mine)?;
    let Some(parts) = job.control.gather(serde_json::to_vec(&mine)?)? else {
        return Ok(None);
    };
    let all: Vec<GroupFigures> = parts
        .iter()
        .map(|p| serde_json::from_slice(p))
        .collect::<Result<_, _>>()?;
    let groups = Groups {
        names: hosts.names.clone(),
        ranks: hosts.ranks.clone(),
        what: "hosts",
    };
    Ok(Some(combine_groups(raw, &all, &groups, is_cpu)))
}

/// This process's figures on the communicator of its `group`.
fn measure_group(
    job: &mut Job,
    args: &CheckOptions,
    r: &Reference,
    group: usize,
) -> Result<GroupFigures, CheckError> {
    let mut mine = GroupFigures {
        group,
        figures: Err("not measured".into()),
        path: None,
    };
    let color = u32::try_from(group).unwrap_or(u32::MAX);
    match job.backend.group(job.control, Some(color)) {
        Ok(Some(mut sub)) => {
            let here = ThisProcess(job.control);
            let it = variant_iterations(args);
            mine.figures = match run_case(sub.as_mut(), &here, request(r), it, job.watchdog)? {
                Some(CaseOutcome::Measured(Measured {
                    busbw_gbps,
                    wrong,
                    nccl_path,
                    ..
                })) => {
                    mine.path = nccl_path.map(|p| *p);
                    Ok((busbw_gbps, wrong))
                }
                Some(CaseOutcome::Skipped(why)) => Err(why),
                None => Err("not measured".into()),
            };
        }
        Ok(None) => mine.figures = Err("the backend left this process out".into()),
        Err(e) => {
            if let Some(f) = job.control.failure() {
                return Err(f.into());
            }
            mine.figures = Err(e.to_string());
        }
    }
    Ok(mine)
}

/// The groups a variant ran on side by side, as rank 0 names them.
struct Groups {
    names: Vec<String>,
    /// Ranks in each group.
    ranks: Vec<usize>,
    /// What they are, plural ("hosts").
    what: &'static str,
}

/// Rank 0's figure of a variant run on groups: the slowest group's, any
/// wrong element counted, a process that could not run it named.
fn combine_groups(mut raw: Raw, all: &[GroupFigures], groups: &Groups, is_cpu: bool) -> Raw {
    let name = |g: usize| groups.names.get(g).map_or("?", String::as_str);
    if let Some((p, why)) = all
        .iter()
        .enumerate()
        .find_map(|(p, f)| f.figures.as_ref().err().map(|e| (p, e)))
    {
        let group = name(all[p].group);
        raw.figures = Err(RawMiss::NotRun(format!("process {p} ({group}): {why}")));
        return raw;
    }
    let figures: Vec<(usize, f64, u64)> = all
        .iter()
        .filter_map(|f| f.figures.as_ref().ok().map(|&(b, w)| (f.group, b, w)))
        .collect();
    let wrong = figures.iter().map(|f| f.2).sum();
    let slowest = figures.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let fastest = figures.iter().map(|f| f.1).fold(0.0, f64::max);
    let Some(&(group, busbw, _)) = slowest else {
        raw.figures = Err(RawMiss::NotRun("no process measured it".into()));
        return raw;
    };
    raw.figures = Ok((busbw, wrong));
    raw.prefix = format!(
        "slowest of {} {} {} ({busbw:.2} GB/s; fastest {fastest:.2}); ",
        groups.names.len(),
        groups.what,
        name(group)
    );
    if is_cpu {
        raw.path = Some(PathSeen::cpu(
            groups.ranks.get(group).copied().unwrap_or(1),
            1,
        ));
    } else {
        let joined = all
            .iter()
            .filter_map(|f| f.path.clone())
            .reduce(|mut a, b| {
                a.merge(b);
                a
            });
        raw.path = Some(joined.map_or_else(
            || PathSeen::Unknown {
                why: unknown_why("nccl"),
            },
            PathSeen::nccl,
        ));
    }
    raw
}
