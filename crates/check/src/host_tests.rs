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
use crate::hosts::{self, HostInfo, HostVerdict, JudgeConfig, PairResult, Round};
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
}

impl HostReport {
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
struct ThisProcess<'a>(&'a dyn Bootstrap);

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

/// Runs the host tests of a job of several processes and judges them.
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
    let HostTestPlan {
        size_bytes,
        iters,
        fractions,
        ..
    } = *plan;
    let hostname = backend
        .info()
        .devices
        .first()
        .map(|d| d.host.clone())
        .unwrap_or_default();
    let key = host_key(|k| std::env::var(k).ok(), &hostname);
    let mine = serde_json::to_vec(&(key, backend.local_ranks()))?;
    let parts = control.all_gather(mine)?;
    let (keys, counts): (Vec<String>, Vec<usize>) = parts
        .iter()
        .map(|p| serde_json::from_slice::<(String, usize)>(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckError::Malformed(format!("malformed host name from a process: {e}")))?
        .into_iter()
        .unzip();
    let (host_list, host_of) = group_hosts(&keys, &counts);
    if host_list.len() < 2 {
        return Err(HostTestsSkipped::OneHost {
            processes: keys.len(),
            host: host_list.first().map_or("?", |h| h.name.as_str()).into(),
        }
        .into());
    }
    let cfg = JudgeConfig {
        fractions,
        ..JudgeConfig::new(host_list.len())
    };
    let mut test = PairTest {
        backend,
        control,
        watchdog,
        host: host_of[control.rank()],
        size_bytes,
        iters,
        broken: plan
            .hooks
            .fail_pairs_of_process
            .and_then(|p| Some((*host_of.get(p)?, p))),
    };
    let mut tally = Tally::default();
    let name = |h: usize| host_list[h].name.as_str();
    let (verdict, rounds) = hosts::run(&cfg, SEED, |round: &Round| -> Result<_, CheckError> {
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
    })?;
    Ok(HostReport {
        hosts: host_list,
        size_bytes,
        judged_op: JUDGED.name(),
        rounds,
        verdict,
        sendrecv: tally.sendrecv,
        all_reduce: tally.all_reduce,
        failures: tally.failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_runner::BackendError;

    #[test]
    fn nccl_hostid_names_the_host_before_the_hostname() {
        let env = |k: &str| (k == "NCCL_HOSTID").then(|| "emu1-2".to_string());
        assert_eq!(host_key(env, "node7"), "emu1-2");
        assert_eq!(host_key(|_| None, "node7"), "node7");
        assert_eq!(host_key(|_| Some(String::new()), "node7"), "node7");
    }

    #[test]
    fn processes_on_one_host_share_it_and_its_ranks() {
        let keys: Vec<String> = ["a", "a", "b", "b", "a"].map(String::from).to_vec();
        let (hosts, of) = group_hosts(&keys, &[2, 2, 2, 2, 2]);
        assert_eq!(of, [0, 0, 1, 1, 0]);
        assert_eq!(hosts[0].name, "a");
        // Ranks 0-3 and 8-9: the label spans them.
        assert_eq!(hosts[0].ranks, 0..10);
        assert_eq!(hosts[1].ranks, 4..8);
        assert_eq!(hosts[1].label(), "b (ranks 4-7)");
    }

    #[test]
    fn a_pair_is_as_fast_as_its_slowest_process_and_fails_with_any() {
        let part = |pair: Option<usize>, s: f64, error: Option<&str>| ProcessFigures {
            pair,
            size_bytes: 1 << 20,
            sendrecv_gbps: s,
            all_reduce_gbps: 2.0 * s,
            error: error.map(|reason| PairFailure::Join {
                reason: reason.into(),
            }),
        };
        let parts = [
            part(Some(0), 2.0, None),
            part(Some(0), 1.5, None),
            part(Some(1), 2.0, None),
            part(Some(1), 2.1, Some("ncclCommInitRank: remote error")),
            part(None, 0.0, None),
        ];
        let f = combine(3, &parts);
        assert_eq!(f[0].sendrecv_gbps, 1.5);
        assert_eq!(f[0].all_reduce_gbps, 3.0);
        assert_eq!(f[0].error, None);
        assert_eq!(
            f[1].outcome(),
            Err(PairFailure::Join {
                reason: "ncclCommInitRank: remote error".into()
            })
        );
        // A pair nobody reported (cannot happen in a healthy job).
        assert_eq!(f[2].outcome(), Err(PairFailure::Unreported));
    }

    #[test]
    fn a_process_at_another_size_fails_its_pair() {
        let at = |pair: usize, size_bytes: u64| ProcessFigures {
            pair: Some(pair),
            size_bytes,
            sendrecv_gbps: 1.0,
            all_reduce_gbps: 1.0,
            error: None,
        };
        let f = combine(
            2,
            &[
                at(0, 4 << 20),
                at(1, 4 << 20),
                at(0, 64 << 20),
                at(1, 4 << 20),
            ],
        );
        assert_eq!(
            f[0].outcome(),
            Err(PairFailure::SizeMismatch {
                size_bytes: 64 << 20,
                rank0_bytes: 4 << 20
            })
        );
        assert_eq!(f[1].error, None);
    }

    /// Rank 0 of four processes on hosts h0..h3, the others played by the
    /// test: each gives what rank 0 gives, on a host of its own.
    struct FourHosts;

    impl Bootstrap for FourHosts {
        fn rank(&self) -> usize {
            0
        }
        fn world_size(&self) -> usize {
            4
        }
        fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
            Ok(data.unwrap_or_default())
        }
        fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
            Ok(Some(vec![data; 4]))
        }
        /// Only the exchange of host names uses it.
        fn all_gather(&self, _data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
            Ok((0..4)
                .map(|h| serde_json::to_vec(&(format!("h{h}"), 1)).unwrap())
                .collect())
        }
    }

    /// A backend with the trait's `group`: it cannot test pairs. Nothing
    /// else of it may run.
    struct NoGroups;

    impl Backend for NoGroups {
        fn info(&self) -> collbench_runner::BackendInfo {
            Default::default()
        }
        fn local_ranks(&self) -> usize {
            1
        }
        fn world_size(&self) -> usize {
            4
        }
        fn supports(&self, _: &collbench_runner::CaseSpec) -> Result<(), BackendError> {
            Ok(())
        }
        fn time(
            &mut self,
            _: &collbench_runner::CaseSpec,
            _: &collbench_runner::Timing,
        ) -> Result<collbench_runner::Measurement, BackendError> {
            unreachable!("a pair test ran without a group")
        }
        fn check(
            &mut self,
            _: &collbench_runner::CaseSpec,
            _: u64,
            _: bool,
        ) -> Result<u64, BackendError> {
            unreachable!("a pair test ran without a group")
        }
    }

    #[test]
    fn a_backend_that_cannot_test_pairs_skips_them_in_one_line_naming_no_host() {
        let mut rounds = Vec::new();
        let e = run_host_tests(
            &mut NoGroups,
            &FourHosts,
            &Watchdog::default(),
            &HostTestPlan {
                size_bytes: 1 << 20,
                iters: Iterations {
                    warmup: 1,
                    timed: 1,
                    explain: false,
                },
                fractions: Fractions {
                    warn: 0.9,
                    fail: 0.75,
                },
                hooks: TestHooks::default(),
            },
            &mut |line| rounds.push(line.to_string()),
        )
        .unwrap_err();
        let skipped = match &e {
            CheckError::HostTestsSkipped(s) => Some(s),
            _ => None,
        };
        assert_eq!(
            skipped,
            Some(&HostTestsSkipped::GroupsUnsupported(
                "this backend cannot run tests on a group of the job's processes".into()
            ))
        );
        // `check`'s note is this one line, and no round was reported.
        let note = format!("host tests skipped: {e:#}");
        assert!(!note.contains('\n') && !note.contains("h0"), "{note}");
        assert!(rounds.is_empty(), "{rounds:?}");
    }
}
