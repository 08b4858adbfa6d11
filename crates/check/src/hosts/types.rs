//! What the host verdict works with and gives: how to judge
//! ([`JudgeConfig`]), the findings ([`Finding`], [`SlowHostEvidence`]),
//! the verdict that holds them ([`HostVerdict`]) and each finding in
//! words. Its own file, below both the schedule (which retests what a
//! verdict suspects) and the judging (which reads the schedule's round
//! numbers), so that data flows one way: matrix -> types -> schedule ->
//! verdict.

use super::matrix::{HostInfo, HostMatrix};
use super::noise::{NoiseRule, Threshold};
use crate::verdict::{Fractions, Status};
use serde::Serialize;

/// How to judge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeConfig {
    /// Hosts in the job (0..hosts).
    pub hosts: usize,
    pub rule: NoiseRule,
    /// Confirmation tests (with good hosts) the schedule gives a suspect
    /// host; one slow one names it.
    pub confirmations: usize,
    /// Tests a link must be slow in before it is named.
    pub link_tests: usize,
    /// Expected busbw of one host pair (a baseline), GB/s.
    pub expected_gbps: Option<f64>,
    /// WARN and FAIL fractions of the expected figure (and of the median
    /// for a slow host or link: below `fail` it is a FAIL, else a WARN).
    pub fractions: Fractions,
    /// Rounds before the first confirmation round, when not the plain
    /// schedule's ([`super::schedule::main_rounds`]): hosts tested within
    /// fabric groups first have as many main rounds as the largest group.
    pub main_rounds: Option<usize>,
    /// Each host's fabric group, when known: a suspect is confirmed with a
    /// good host of its own group first, so that a slow link between
    /// groups cannot confirm it.
    pub group_of: Option<Vec<usize>>,
}

impl JudgeConfig {
    /// The defaults for a job of `hosts` hosts, no baseline.
    pub fn new(hosts: usize) -> JudgeConfig {
        JudgeConfig {
            hosts,
            rule: NoiseRule::default(),
            confirmations: 2,
            link_tests: 3,
            expected_gbps: None,
            fractions: Fractions {
                warn: 0.9,
                fail: 0.75,
            },
            main_rounds: None,
            group_of: None,
        }
    }
}

/// What the verdict says, one line each ([`finding_line`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// A slow host, confirmed by good hosts in confirmation rounds.
    SlowHost(SlowHostEvidence),
    /// Two good hosts slow together, in `tests` tests out of `tests`.
    SlowLink {
        a: usize,
        b: usize,
        ratio: f64,
        tests: usize,
    },
    /// Slow, but not yet confirmed by a good host in a confirmation round.
    SuspectHost(SlowHostEvidence),
    /// A slow pair between good hosts, not yet slow in enough tests.
    SuspectLink {
        a: usize,
        b: usize,
        ratio: f64,
        tests: usize,
    },
    /// The figures spread so much (`spread`, a fraction) that only a host
    /// below `cut` (a ratio to the median, beyond the noise) can be named;
    /// smaller slowdowns and slow links hide in it.
    Unjudgeable { spread: f64, cut: f64 },
    /// Fewer than three hosts measured and no baseline: a lone pair cannot
    /// say which of its hosts is slow.
    TooFewHosts { hosts: usize },
    /// Every test between two fabric groups slow while each group is fast
    /// within itself: the link between the groups (a spine, an uplink),
    /// not a host. `ratio` is the median test over the job median.
    SlowGroupLink {
        a: String,
        b: String,
        ratio: f64,
        tests: usize,
    },
    /// The job median against the baseline's figure.
    BelowBaseline {
        median_gbps: f64,
        expected_gbps: f64,
        ratio: f64,
    },
}

/// What names a host slow: the same figures whether it is confirmed
/// ([`Finding::SlowHost`]) or still a suspect ([`Finding::SuspectHost`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowHostEvidence {
    pub host: usize,
    /// Its fastest pair over the job median.
    pub ratio: f64,
    /// Its pairs below the cut, of all its pairs.
    pub pairs_below: usize,
    pub pairs_total: usize,
    /// The good hosts it was slow with in confirmation rounds.
    pub confirmed_with: Vec<usize>,
}

impl Finding {
    /// The finding's verdict.
    pub fn status(&self, f: Fractions) -> Status {
        let by_ratio = |r: f64| {
            if r < f.fail {
                Status::Fail
            } else {
                Status::Warn
            }
        };
        match self {
            Finding::SlowHost(SlowHostEvidence { ratio, .. })
            | Finding::SlowLink { ratio, .. }
            | Finding::SlowGroupLink { ratio, .. } => by_ratio(*ratio),
            Finding::SuspectHost(_) | Finding::SuspectLink { .. } => Status::Warn,
            Finding::Unjudgeable { .. } => Status::Warn,
            Finding::TooFewHosts { .. } => Status::Info,
            Finding::BelowBaseline { ratio, .. } if *ratio >= f.warn => Status::Pass,
            Finding::BelowBaseline { ratio, .. } => by_ratio(*ratio),
        }
    }

    /// The host this finding names, if it names one.
    pub fn host(&self) -> Option<usize> {
        match self {
            Finding::SlowHost(e) | Finding::SuspectHost(e) => Some(e.host),
            _ => None,
        }
    }

    /// Every host this finding names: a slow or suspect host, or the two
    /// ends of a link.
    pub fn hosts(&self) -> Vec<usize> {
        match self {
            Finding::SlowHost(e) | Finding::SuspectHost(e) => vec![e.host],
            Finding::SlowLink { a, b, .. } | Finding::SuspectLink { a, b, .. } => vec![*a, *b],
            _ => Vec::new(),
        }
    }
}

/// Everything the verdict found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostVerdict {
    /// Worst status of the findings (PASS when none).
    pub status: Status,
    /// What the job's noise allowed: the cut, or too noisy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<Threshold>,
    /// Robust sigma of the log ratios (hosts' scores and good pairs).
    pub noise_sigma: f64,
    pub findings: Vec<Finding>,
    pub matrix: HostMatrix,
}

impl HostVerdict {
    /// Hosts with a score at or above the cut: partners for confirmation.
    pub fn good_hosts(&self) -> Vec<usize> {
        let cut = match self.threshold {
            Some(Threshold::Judgeable { cut, .. } | Threshold::TooNoisy { cut, .. }) => cut,
            None => return Vec::new(),
        };
        self.matrix
            .hosts
            .iter()
            .filter(|h| h.score.is_some_and(|s| s >= cut))
            .map(|h| h.host)
            .collect()
    }

    /// Whether anything named still needs a confirmation round.
    pub fn has_suspects(&self) -> bool {
        self.findings
            .iter()
            .any(|f| matches!(f, Finding::SuspectHost(_) | Finding::SuspectLink { .. }))
    }
}

/// A finding in words, hosts named through `hosts`.
pub fn finding_line(f: &Finding, hosts: &[HostInfo]) -> String {
    let label = |h: usize| hosts.get(h).map_or(format!("h{h}"), HostInfo::label);
    let name = |h: usize| hosts.get(h).map_or(format!("h{h}"), |i| i.name.clone());
    let names = |v: &[usize]| v.iter().map(|&h| name(h)).collect::<Vec<_>>().join(", ");
    match f {
        Finding::SlowHost(e) => format!(
            "host {}: {:.2}x the job median in {} of {} pairs (confirmed with {})",
            label(e.host),
            e.ratio,
            e.pairs_below,
            e.pairs_total,
            names(&e.confirmed_with)
        ),
        Finding::SuspectHost(e) => format!(
            "host {}: {:.2}x the job median in {} of {} pairs, not confirmed (slow in {} confirmation test(s) with a good host)",
            label(e.host),
            e.ratio,
            e.pairs_below,
            e.pairs_total,
            e.confirmed_with.len()
        ),
        Finding::SlowLink { a, b, ratio, tests } => format!(
            "link {} <-> {}: {ratio:.2}x the job median in {tests} of {tests} tests (both hosts fast with others)",
            name(*a),
            name(*b)
        ),
        Finding::SuspectLink { a, b, ratio, tests } => format!(
            "link {} <-> {}: {ratio:.2}x the job median in {tests} test(s), not confirmed by repeats",
            name(*a),
            name(*b)
        ),
        Finding::SlowGroupLink { a, b, ratio, tests } => format!(
            "link between groups {a} <-> {b}: {ratio:.2}x the job median (median of {tests} tests across; both groups fast within)"
        ),
        Finding::Unjudgeable { spread, cut } => format!(
            "host pairs spread by +-{:.0}% (4 x their robust sigma): too noisy to judge hosts or links above {cut:.2}x the job median; run again on a quiet job",
            spread * 100.0
        ),
        Finding::TooFewHosts { hosts } => format!(
            "{hosts} host(s) measured: without a baseline a lone pair cannot say which host is slow"
        ),
        Finding::BelowBaseline {
            median_gbps,
            expected_gbps,
            ratio,
        } => format!(
            "job median {median_gbps:.2} GB/s is {ratio:.2}x the baseline's {expected_gbps:.2} GB/s per host pair"
        ),
    }
}

/// All findings of `v` in words, one line each.
pub fn finding_lines(v: &HostVerdict, hosts: &[HostInfo]) -> Vec<String> {
    v.findings.iter().map(|f| finding_line(f, hosts)).collect()
}
