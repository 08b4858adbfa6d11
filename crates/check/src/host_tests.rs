//! `check`'s host tests in a job of several processes: which processes
//! share a host, then [`hosts::run`]'s rounds, each host pair of a round
//! on a communicator of its own ([`Backend::group`]) while the other
//! pairs run theirs, and the verdict that names a slow host or link
//! (docs/hosts.md).
//!
//! Every process takes every step, so the control plane's calls stay
//! matched: each process measures its pair, rank 0 gathers the figures,
//! combines them per pair and broadcasts the round's results, and every
//! process judges the same figures, so all of them choose the same
//! confirmation rounds. A pair test that failed is listed, never judged
//! (`failure`).

mod failure;

pub use crate::error::HostTestsSkipped;
pub use failure::{FailedPair, PairFailure};

use crate::battery::{run_case, CaseOutcome, CaseRequest, Iterations};
use crate::error::{self, CheckError};
use crate::fabric::{self, GroupSource};
use crate::hosts::{self, HostGroups, HostInfo, HostVerdict, JudgeConfig, PairResult, Round};
use crate::verdict::Fractions;
use crate::TestHooks;
use collbench_core::{Bootstrap, Collective, DataType, PeerFailure, Progress, RankProgress};
use collbench_runner::{Backend, Watchdog};
use failure::{PairOutcome, Tally};
use serde::{Deserialize, Serialize};

/// Seed of the schedule: the same on every process, and from run to run.
const SEED: u64 = 1;

/// The op the verdict judges: a pair's link as point-to-point traffic.
const JUDGED: Collective = Collective::SendRecv;

/// What the host tests found, for the text, the JSON and `report`.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    /// The hosts, in the order of their first rank.
    pub hosts: Vec<HostInfo>,
    /// Size of each pair test, bytes.
    pub size_bytes: u64,
    /// Op the verdict judges (`sendrecv`); all_reduce is measured beside.
    pub judged_op: &'static str,
    /// Rounds run (main and confirmation).
    pub rounds: usize,
    /// Findings and the host-pair matrix (sendrecv busbw).
    pub verdict: HostVerdict,
    /// sendrecv busbw of every pair test that ran, round by round.
    pub sendrecv: Vec<PairResult>,
    /// all_reduce busbw of every pair test that ran, round by round.
    pub all_reduce: Vec<PairResult>,
    /// Pair tests that failed: listed, never judged (no figure of theirs
    /// reaches the verdict).
    pub failures: Vec<FailedPair>,
    /// The hosts' fabric groups, when the tests followed them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<HostGroups>,
    /// Why `--groups` gave no groups (the tests ran without them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_note: Option<String>,
}

impl HostReport {
    /// The verdict's cut (a ratio to the job median), when it has one.
    pub fn slow_cut(&self) -> Option<f64> {
        use crate::hosts::noise::Threshold;
        match self.verdict.threshold {
            Some(Threshold::Judgeable { cut, .. } | Threshold::TooNoisy { cut, .. }) => Some(cut),
            None => None,
        }
    }

    /// Hosts that no pair test measured (every test of theirs failed):
    /// not judged, so the check is INCOMPLETE.
    pub fn unjudged_hosts(&self) -> Vec<usize> {
        self.verdict
            .matrix
            .hosts
            .iter()
            .filter(|s| s.score.is_none() && s.host < self.hosts.len())
            .map(|s| s.host)
            .collect()
    }
}

/// One process's part of a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ProcessFigures {
    /// Index of its pair in the round; `None`: it sat the round out.
    pair: Option<usize>,
    /// Size it tested at: every process must test the same (a process
    /// that did not would pair its calls with the wrong ones).
    size_bytes: u64,
    sendrecv_gbps: f64,
    all_reduce_gbps: f64,
    /// Why its test failed, if it did.
    error: Option<PairFailure>,
}

/// One pair's figures in a round, as every process learns them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PairFigures {
    sendrecv_gbps: f64,
    all_reduce_gbps: f64,
    error: Option<PairFailure>,
}

impl PairFigures {
    /// Its figures, or why it has none.
    fn outcome(&self) -> PairOutcome {
        match &self.error {
            Some(failure) => Err(failure.clone()),
            None => Ok((self.sendrecv_gbps, self.all_reduce_gbps)),
        }
    }
}

/// The name of this process's host: NCCL_HOSTID where set (NCCL's own
/// notion of a host, and how emulated hosts are told apart), else the
/// host name the backend reports.
pub fn host_key(env: impl Fn(&str) -> Option<String>, hostname: &str) -> String {
    env("NCCL_HOSTID")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| hostname.to_string())
}

/// The name of this process's node: SLURMD_NODENAME (a Slurm node), else
/// NODE_NAME (Kubernetes: set it from the downward API's `spec.nodeName`),
/// else the host name.
pub fn node_name(env: impl Fn(&str) -> Option<String>, hostname: &str) -> String {
    ["SLURMD_NODENAME", "NODE_NAME"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.is_empty()))
        .unwrap_or_else(|| hostname.to_string())
}

/// Hosts from every process's host key and rank count (indexed by
/// process): hosts in the order of their first process, each with the
/// span of its global ranks, and each process's host.
pub fn group_hosts(keys: &[String], local_ranks: &[usize]) -> (Vec<HostInfo>, Vec<usize>) {
    let mut hosts: Vec<HostInfo> = Vec::new();
    let mut host_of = Vec::with_capacity(keys.len());
    let mut first_rank = 0;
    for (key, &g) in keys.iter().zip(local_ranks) {
        let ranks = first_rank..first_rank + g;
        first_rank += g;
        match hosts.iter().position(|h| &h.name == key) {
            Some(h) => {
                // Ranks of a host need not be contiguous; the label
                // shows the span from its first to its last.
                let r = &mut hosts[h].ranks;
                *r = r.start.min(ranks.start)..r.end.max(ranks.end);
                host_of.push(h);
            }
            None => {
                host_of.push(hosts.len());
                hosts.push(HostInfo {
                    name: key.clone(),
                    ranks,
                });
            }
        }
    }
    (hosts, host_of)
}

/// Each pair's figures from the processes' parts: a pair is as fast as
/// its slowest process saw it (as nccl-tests reports the slowest rank),
/// and fails when any of its processes failed (its figures then mean
/// nothing: 0).
fn combine(pairs: usize, parts: &[ProcessFigures]) -> Vec<PairFigures> {
    let mut out: Vec<Option<PairFigures>> = vec![None; pairs];
    for p in parts {
        let Some(slot) = p.pair.and_then(|i| out.get_mut(i)) else {
            continue;
        };
        let f = slot.get_or_insert(PairFigures {
            sendrecv_gbps: f64::INFINITY,
            all_reduce_gbps: f64::INFINITY,
            error: None,
        });
        if f.error.is_none() && p.size_bytes != parts[0].size_bytes {
            f.error = Some(PairFailure::SizeMismatch {
                size_bytes: p.size_bytes,
                rank0_bytes: parts[0].size_bytes,
            });
        }
        f.sendrecv_gbps = f.sendrecv_gbps.min(p.sendrecv_gbps);
        f.all_reduce_gbps = f.all_reduce_gbps.min(p.all_reduce_gbps);
        if f.error.is_none() {
            f.error = p.error.clone();
        }
    }
    out.into_iter()
        .map(|f| {
            let mut f = f.unwrap_or_else(|| PairFigures {
                error: Some(PairFailure::Unreported),
                ..Default::default()
            });
            if f.error.is_some() {
                f.sendrecv_gbps = 0.0;
                f.all_reduce_gbps = 0.0;
            }
            f
        })
        .collect()
}

/// The job's control plane as a world of one, for a pair test measured by
/// this process alone on its group's backend: the runner's data stays
/// here, while the job's failure and an abort still travel (a peer lost
/// during the test stops it; a stuck test stops the job).
pub(crate) struct ThisProcess<'a>(pub(crate) &'a dyn Bootstrap);

impl Bootstrap for ThisProcess<'_> {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        collbench_core::SingleProcess.broadcast(data)
    }
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Ok(Some(vec![data]))
    }
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        Ok(vec![data])
    }
    fn publish_progress(&self, progress: Progress) {
        self.0.publish_progress(progress)
    }
    fn progress_of_all(&self) -> Option<Vec<RankProgress>> {
        None
    }
    fn abort_job(&self, failure: &PeerFailure) {
        self.0.abort_job(failure)
    }
    fn failure(&self) -> Option<PeerFailure> {
        self.0.failure()
    }
}

/// What the host tests run and how they judge (the same on every
/// process).
#[derive(Debug, Clone)]
pub struct HostTestPlan {
    /// Size of each pair test, bytes.
    pub size_bytes: u64,
    pub iters: Iterations,
    pub fractions: Fractions,
    /// Where the hosts' fabric groups come from (`--groups`), if anywhere.
    pub groups: Option<GroupSource>,
    pub hooks: TestHooks,
}

/// What one process does in a round: joins its pair's group, measures
/// sendrecv and all_reduce there, and says how it went.
struct PairTest<'a> {
    backend: &'a mut dyn Backend,
    control: &'a dyn Bootstrap,
    watchdog: &'a Watchdog,
    /// This process's host.
    host: usize,
    size_bytes: u64,
    iters: Iterations,
    /// The host whose pair tests fail (test hook), and its process.
    broken: Option<(usize, usize)>,
    /// Each host's fabric group, when grouped.
    group_of: Option<Vec<usize>>,
    /// Test hook: tests between groups read this fraction of their figures.
    link_factor: Option<f64>,
}

impl PairTest<'_> {
    fn round(&mut self, round: &Round) -> Result<Vec<PairFigures>, CheckError> {
        let pair = round
            .pairs
            .iter()
            .position(|&(a, b)| a == self.host || b == self.host);
        let mut mine = ProcessFigures {
            pair,
            size_bytes: self.size_bytes,
            ..Default::default()
        };
        // Joining is collective over the whole job: its failure is the
        // job's (the control plane), or this process's NCCL, which the
        // pair reports.
        // The test hook's broken host: both processes of its pair skip the
        // test (every process knows which host it is), so neither waits.
        let broken = pair
            .map(|p| round.pairs[p])
            .zip(self.broken)
            .filter(|((a, b), (host, _))| a == host || b == host);
        match self.backend.group(self.control, pair.map(|p| p as u32)) {
            Ok(Some(_)) if broken.is_some() => {
                let process = broken.map_or(0, |(_, (_, process))| process);
                mine.error = Some(PairFailure::Test {
                    reason: format!(
                        "process {}: the pair tests of process {process}'s host are off (COLLBENCH_TEST_FAIL_PAIRS)",
                        self.control.rank()
                    ),
                });
            }
            Ok(Some(mut sub)) => {
                if let Err(failure) = self.measure(sub.as_mut(), &mut mine) {
                    mine.error = Some(failure);
                }
                let (a, b) = pair.map_or((0, 0), |p| round.pairs[p]);
                if let (Some(f), Some(g)) = (self.link_factor, &self.group_of) {
                    if g.get(a) != g.get(b) {
                        mine.sendrecv_gbps *= f;
                        mine.all_reduce_gbps *= f;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                if let Some(f) = self.control.failure() {
                    return Err(f.into());
                }
                mine.error = Some(PairFailure::joining(e));
            }
        }
        let parts = self.control.gather(serde_json::to_vec(&mine)?)?;
        let answer = match parts {
            Some(parts) => {
                let parts: Vec<ProcessFigures> = parts
                    .iter()
                    .map(|p| serde_json::from_slice(p))
                    .collect::<Result<_, _>>()
                    .map_err(|e| {
                        CheckError::Malformed(format!("malformed pair figures from a process: {e}"))
                    })?;
                Some(serde_json::to_vec(&combine(round.pairs.len(), &parts))?)
            }
            None => None,
        };
        let figures = self.control.broadcast(answer)?;
        Ok(serde_json::from_slice(&figures)?)
    }

    /// Both ops on the group's backend; each failure (an error, wrong
    /// results) is said with this process's rank, and the other op still
    /// runs, so that the pair's figures say what went wrong where.
    fn measure(&self, sub: &mut dyn Backend, mine: &mut ProcessFigures) -> Result<(), PairFailure> {
        let here = ThisProcess(self.control);
        let mut errors = Vec::new();
        for (op, out) in [
            (JUDGED, &mut mine.sendrecv_gbps),
            (Collective::AllReduce, &mut mine.all_reduce_gbps),
        ] {
            let req = CaseRequest {
                collective: op,
                dtype: DataType::Float,
                size_bytes: self.size_bytes,
            };
            match run_case(sub, &here, req, self.iters, self.watchdog) {
                Ok(Some(CaseOutcome::Measured(m))) => {
                    *out = m.best_busbw_gbps();
                    if m.wrong > 0 {
                        errors.push(format!("{op} {} wrong elements", m.wrong));
                    }
                }
                Ok(Some(CaseOutcome::Skipped(why))) => errors.push(format!("{op}: {why}")),
                Ok(None) => errors.push(format!("{op}: not measured")),
                Err(e) => errors.push(format!("{op}: {}", error::chain(&e))),
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        Err(PairFailure::Test {
            reason: format!("process {}: {}", self.control.rank(), errors.join(", ")),
        })
    }
}

/// The hosts, each process's host, and each host's node.
type Discovered = (Vec<HostInfo>, Vec<usize>, Vec<String>);

/// Every process's host: the hosts in the order of their first process,
/// and each process's host. A job on one host has nothing to test.
fn discover_hosts(
    backend: &dyn Backend,
    control: &dyn Bootstrap,
) -> Result<Discovered, CheckError> {
    let hostname = backend
        .info()
        .devices
        .first()
        .map(|d| d.host.clone())
        .unwrap_or_default();
    let env = |k: &str| std::env::var(k).ok();
    let (key, node) = (host_key(env, &hostname), node_name(env, &hostname));
    let mine = serde_json::to_vec(&(key, backend.local_ranks(), node))?;
    let parts = control.all_gather(mine)?;
    let all = parts
        .iter()
        .map(|p| serde_json::from_slice::<(String, usize, String)>(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckError::Malformed(format!("malformed host name from a process: {e}")))?;
    let keys: Vec<String> = all.iter().map(|p| p.0.clone()).collect();
    let counts: Vec<usize> = all.iter().map(|p| p.1).collect();
    let (host_list, host_of) = group_hosts(&keys, &counts);
    // Each host's node: its first process's.
    let nodes = (0..host_list.len())
        .map(|h| {
            host_of
                .iter()
                .position(|&x| x == h)
                .map_or_else(String::new, |p| all[p].2.clone())
        })
        .collect();
    if host_list.len() < 2 {
        return Err(HostTestsSkipped::OneHost {
            processes: keys.len(),
            host: host_list.first().map_or("?", |h| h.name.as_str()).into(),
        }
        .into());
    }
    Ok((host_list, host_of, nodes))
}

/// The hosts' fabric groups, rank 0's word on every process: `None`
/// without `--groups`, else the groups or why there are none (the host
/// tests then run without them, and say so).
fn agree_on_groups(
    control: &dyn Bootstrap,
    source: Option<&GroupSource>,
    hosts: &[HostInfo],
    nodes: &[String],
) -> Result<Option<Result<HostGroups, String>>, CheckError> {
    let Some(source) = source else {
        return Ok(None);
    };
    let mine = (control.rank() == 0).then(|| {
        let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
        let groups = fabric::resolve(source, &names, nodes).map_err(|e| e.to_string());
        serde_json::to_vec(&groups)
    });
    let word = control.broadcast(mine.transpose()?)?;
    let groups: Result<Vec<String>, String> = serde_json::from_slice(&word)?;
    Ok(Some(groups.map(|g| HostGroups::from_names(&g))))
}

/// Runs the host tests of a job of several processes and judges them:
/// within and then across fabric groups when `plan.groups` gives them.
/// `progress` hears one line per round (rank 0 passes a printer, the
/// others nothing). Errors are the job's (a lost peer), or
/// [`HostTestsSkipped`]: pair tests that fail are listed, never judged.
pub fn run_host_tests(
    backend: &mut dyn Backend,
    control: &dyn Bootstrap,
    watchdog: &Watchdog,
    plan: &HostTestPlan,
    progress: &mut dyn FnMut(&str),
) -> Result<HostReport, CheckError> {
    let (host_list, host_of, nodes) = discover_hosts(backend, control)?;
    let groups = agree_on_groups(control, plan.groups.as_ref(), &host_list, &nodes)?;
    let (groups, group_note) = match groups {
        Some(Ok(g)) => (Some(g), None),
        Some(Err(why)) => (None, Some(format!("hosts tested without groups: {why}"))),
        None => (None, None),
    };
    let cfg = JudgeConfig {
        fractions: plan.fractions,
        ..JudgeConfig::new(host_list.len())
    };
    let mut test = PairTest {
        backend,
        control,
        watchdog,
        host: host_of[control.rank()],
        size_bytes: plan.size_bytes,
        iters: plan.iters,
        broken: plan
            .hooks
            .fail_pairs_of_process
            .and_then(|p| Some((*host_of.get(p)?, p))),
        group_of: groups.as_ref().map(|g| g.of_host.clone()),
        link_factor: plan.hooks.group_link_factor,
    };
    let mut tally = Tally::default();
    let name = |h: usize| host_list[h].name.as_str();
    let measure = |round: &Round| -> Result<_, CheckError> {
        let outcomes: Vec<PairOutcome> = test
            .round(round)?
            .iter()
            .map(PairFigures::outcome)
            .collect();
        let judged = tally.add(round, &outcomes)?;
        let mut line = format!("round {}:", round.index + 1);
        for (&(a, b), outcome) in round.pairs.iter().zip(&outcomes) {
            line += &match outcome {
                Ok((s, r)) => format!(" {}<->{} {s:.2}/{r:.2} GB/s", name(a), name(b)),
                Err(_) => format!(" {}<->{} failed", name(a), name(b)),
            };
        }
        progress(&format!("{line} (sendrecv/all_reduce)"));
        Ok(judged)
    };
    let (verdict, rounds) = match &groups {
        Some(g) => hosts::run_grouped(&cfg, g, SEED, measure)?,
        None => hosts::run(&cfg, SEED, measure)?,
    };
    Ok(HostReport {
        hosts: host_list,
        size_bytes: plan.size_bytes,
        judged_op: JUDGED.name(),
        rounds,
        verdict,
        sendrecv: tally.sendrecv,
        all_reduce: tally.all_reduce,
        failures: tally.failures,
        groups,
        group_note,
    })
}

#[cfg(test)]
mod tests;
