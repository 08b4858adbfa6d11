//! What `check` means for each node, and what a cluster does with it
//! (issue 51): the operator asks `check` to drain the nodes it found bad
//! and to resume the ones it drained once they pass, instead of writing
//! the glue from the exit code, the JSON and the metrics.
//!
//! Files, each importing only those before it: this one (each node's
//! judgement from the verdict, pure), `events` (one JSON event per
//! finding), `slurm` (drain and resume through `scontrol`), `k8s` (a node
//! condition and a taint per node, as patches or through the API server).
//! Every action is a dry run (what would be done, printed) unless the
//! operator asks to act; a node that was not tested, or that someone
//! else drained, is never touched.

pub mod events;
pub mod k8s;
pub mod slurm;

use crate::host_tests::HostReport;
use crate::hosts::{Finding, SlowHostEvidence};
use crate::verdict::{Fractions, Line, Metric, Status};
use collbench_core::size::format_size;
use serde::Serialize;
use std::path::PathBuf;

/// Whether an action is only printed or taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// Print what would be done; change nothing.
    DryRun,
    /// Do it.
    Apply,
}

/// What `check` does with the node verdicts (all off by default).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeStateOptions {
    /// Slurm: drain bad nodes, resume the ones collbench drained that pass.
    pub slurm: Option<Act>,
    /// Kubernetes: a condition and a taint per bad node, removed on a pass.
    pub k8s: Option<Act>,
    /// Where the JSON events go, one per line (`-`: stdout).
    pub events: Option<PathBuf>,
}

impl NodeStateOptions {
    /// Whether anything is asked of the node verdicts.
    pub fn wanted(&self) -> bool {
        self.slurm.is_some() || self.k8s.is_some() || self.events.is_some()
    }
}

/// The prefix of every Slurm reason and Kubernetes message collbench
/// writes: how it tells the nodes it drained from the ones someone else
/// did.
pub const REASON_PREFIX: &str = "collbench:";

/// What the check says about one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeVerdict {
    /// Found bad: drain it (Slurm), taint it (Kubernetes).
    Bad,
    /// Tested and clean: what collbench did to it can be undone.
    Passed,
    /// Tested but not cleared: a suspect, a host not judged, or a job
    /// verdict that names no node. Nothing is done to it either way.
    Held,
}

/// One node's judgement, with the evidence a reason must name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeJudgement {
    /// The node as the cluster names it (Slurm node, Kubernetes node).
    pub node: String,
    pub verdict: NodeVerdict,
    /// The host of the host tests that gave the verdict (a node runs one
    /// host, or several emulated ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The figure that found it bad, GB/s (its fastest pair, or the line's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure_gbps: Option<f64>,
    /// What the figure was judged against, GB/s: the job median of the
    /// host tests, or the baseline's figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_gbps: Option<f64>,
    /// The test: `sendrecv host pairs at 4 MiB`, `all_reduce 1 GiB`.
    pub test: String,
    /// Why, in words.
    pub why: String,
}

/// Each process's host (as the host tests name it) and node, in process
/// order: how hosts map to nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub host: String,
    pub node: String,
}

pub use crate::host_tests::node_name;

/// The check's outcome, as the node verdicts read it.
pub struct Outcome<'a> {
    pub status: Status,
    pub lines: &'a [Line],
    pub hosts: Option<&'a HostReport>,
    pub fractions: Fractions,
}

/// Every node of the job, judged (in order of its first process).
pub fn judge_nodes(outcome: &Outcome, placements: &[Placement]) -> Vec<NodeJudgement> {
    let mut nodes: Vec<&str> = Vec::new();
    for p in placements {
        if !nodes.contains(&p.node.as_str()) {
            nodes.push(&p.node);
        }
    }
    let battery = battery_status(outcome.lines);
    nodes
        .iter()
        .map(|&node| match outcome.hosts {
            Some(h) => judge_by_hosts(node, h, outcome, placements, battery),
            None if nodes.len() == 1 => judge_alone(node, outcome),
            None => judge_job(node, outcome),
        })
        .collect()
}

/// The worst status of the battery's lines (the pair lines left out: the
/// host verdict speaks for them per host).
fn battery_status(lines: &[Line]) -> Status {
    lines
        .iter()
        .filter(|l| l.metric != Metric::SlowPairs)
        .map(|l| l.status)
        .max()
        .unwrap_or(Status::Pass)
}

fn held(node: &str, test: String, why: String) -> NodeJudgement {
    NodeJudgement {
        node: node.into(),
        verdict: NodeVerdict::Held,
        host: None,
        figure_gbps: None,
        reference_gbps: None,
        test,
        why,
    }
}

/// A node in a job whose host tests ran: bad when a finding names one of
/// its hosts FAIL, passed when none names any and each was judged.
fn judge_by_hosts(
    node: &str,
    h: &HostReport,
    outcome: &Outcome,
    placements: &[Placement],
    battery: Status,
) -> NodeJudgement {
    let test = format!(
        "{} host pairs at {}",
        h.judged_op,
        format_size(h.size_bytes)
    );
    let mine: Vec<usize> = (0..h.hosts.len())
        .filter(|&x| {
            placements
                .iter()
                .any(|p| p.node == node && p.host == h.hosts[x].name)
        })
        .collect();
    let names = |f: &Finding| f.hosts().iter().any(|x| mine.contains(x));
    let findings: Vec<&Finding> = h.verdict.findings.iter().filter(|f| names(f)).collect();
    let failed = findings.iter().find_map(|f| match f {
        Finding::SlowHost(e) if f.status(outcome.fractions) == Status::Fail => Some(e),
        _ => None,
    });
    if let Some(e) = failed {
        return bad_host(node, h, e, test);
    }
    if let Some(f) = findings
        .iter()
        .find(|f| f.status(outcome.fractions) >= Status::Warn)
    {
        let why = crate::hosts::finding_line(f, &h.hosts);
        return held(node, test, format!("not cleared: {why}"));
    }
    // A job too noisy to judge, or judged against a baseline it misses,
    // clears nobody (a host drained at half speed may hide in the noise);
    // a lone pair without a baseline cannot say which host is slow.
    if let Some(f) = h.verdict.findings.iter().find(|f| {
        f.hosts().is_empty()
            && (f.status(outcome.fractions) >= Status::Warn
                || matches!(f, Finding::TooFewHosts { .. }))
    }) {
        let why = crate::hosts::finding_line(f, &h.hosts);
        return held(node, test, format!("not cleared: {why}"));
    }
    let unjudged = h.unjudged_hosts();
    if let Some(&x) = mine.iter().find(|x| unjudged.contains(x)) {
        let why = format!(
            "host {} not judged: no pair test of it ran",
            h.hosts[x].name
        );
        return held(node, test, why);
    }
    if mine.is_empty() {
        return held(node, test, "no host of it was in the host tests".into());
    }
    if battery >= Status::Incomplete {
        let why = format!("the battery is {} and names no node", battery.label());
        return held(node, test, why);
    }
    NodeJudgement {
        verdict: NodeVerdict::Passed,
        why: "every host of it passed the host tests".into(),
        ..held(node, test, String::new())
    }
}

/// A node named slow by the host tests, with its figure and the median.
fn bad_host(node: &str, h: &HostReport, e: &SlowHostEvidence, test: String) -> NodeJudgement {
    let median = h.verdict.matrix.reference_gbps;
    let best = h.verdict.matrix.hosts.get(e.host).and_then(|s| s.best_gbps);
    let host = h.hosts.get(e.host).map_or("?", |i| i.name.as_str());
    let figure = best.map_or("-".into(), |b| format!("{b:.2} GB/s"));
    NodeJudgement {
        node: node.into(),
        verdict: NodeVerdict::Bad,
        host: Some(host.into()),
        figure_gbps: best,
        reference_gbps: Some(median),
        why: format!(
            "host {host} {figure}, {:.2}x the job median {median:.2} GB/s in {} of {} pairs ({test})",
            e.ratio, e.pairs_below, e.pairs_total
        ),
        test,
    }
}

/// The only node of the job (a health check of one node, or processes
/// of one node): the verdict is its own.
fn judge_alone(node: &str, outcome: &Outcome) -> NodeJudgement {
    let worst = outcome
        .lines
        .iter()
        .filter(|l| l.status == outcome.status)
        .find(|l| l.status >= Status::Warn);
    let test = worst.map_or("the battery".into(), |l| {
        format!("{} {}", l.op, format_size(l.size_bytes))
    });
    let why = worst
        .map(|l| {
            format!(
                "{} {}: {}",
                l.op,
                l.status.label(),
                l.note.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_else(|| format!("check {}", outcome.status.label()));
    let verdict = match outcome.status {
        Status::Fail => NodeVerdict::Bad,
        Status::Info | Status::Pass => NodeVerdict::Passed,
        Status::Warn | Status::Incomplete => NodeVerdict::Held,
    };
    let figure = worst.filter(|l| l.metric == Metric::BusbwGbps);
    NodeJudgement {
        node: node.into(),
        verdict,
        host: None,
        figure_gbps: figure.and_then(|l| l.measured),
        reference_gbps: figure.and_then(|l| l.expected),
        test,
        why,
    }
}

/// A node of a job of several nodes whose host tests did not run: the
/// job's pass clears every node; anything else names none.
fn judge_job(node: &str, outcome: &Outcome) -> NodeJudgement {
    if outcome.status <= Status::Pass {
        return NodeJudgement {
            verdict: NodeVerdict::Passed,
            why: "the job passed".into(),
            ..held(node, "the battery".into(), String::new())
        };
    }
    let why = format!(
        "the job is {} without host tests to name a node",
        outcome.status.label()
    );
    held(node, "the battery".into(), why)
}

/// `2026-12-07T03:40:00Z` for `unix_secs`.
pub fn rfc3339(unix_secs: u64) -> String {
    let (date, time) = collbench_core::clock::utc_parts(unix_secs);
    format!("{date}T{time}Z")
}

/// Now, in seconds since 1970.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The reason or message collbench writes for a bad node: its prefix,
/// why, which collbench and when.
pub fn reason(j: &NodeJudgement, unix_secs: u64) -> String {
    format!(
        "{REASON_PREFIX} {} [collbench {} check, {}]",
        j.why,
        env!("CARGO_PKG_VERSION"),
        rfc3339(unix_secs)
    )
}

#[cfg(test)]
mod tests;
