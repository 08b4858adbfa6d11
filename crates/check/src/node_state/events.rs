//! One JSON event per finding, one per line (`collbench-event/1`), for
//! other systems to consume: each node found bad or held, each node an
//! action touched, each slow link (which names no node), with what was
//! done about it.

use super::{rfc3339, NodeJudgement, NodeVerdict};
use crate::host_tests::HostReport;
use crate::hosts::Finding;
use crate::verdict::{Fractions, Status};
use serde::Serialize;

/// The schema every event carries.
pub const SCHEMA: &str = "collbench-event/1";

/// What a cluster did (or would do) about a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    /// `slurm` or `kubernetes`.
    pub system: &'static str,
    /// `drain`, `resume`, `taint`, `untaint`, or `none` (left as it is).
    pub action: &'static str,
    /// Whether it was done (false in a dry run).
    pub done: bool,
    /// The action's own line.
    pub detail: String,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub schema: &'static str,
    pub time: String,
    pub collbench_version: &'static str,
    /// The check's verdict.
    pub check_status: Status,
    /// `node` or `link`.
    pub kind: &'static str,
    /// The node's verdict (`bad`, `held`, `passed`); absent for a link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<NodeVerdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The host (node events) or both ends (link events).
    pub hosts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_gbps: Option<f64>,
    pub test: String,
    pub message: String,
    pub actions: Vec<Action>,
}

/// The events of a check: a node event for each node that is not a
/// plain pass or that an action touched, a link event for each slow link.
pub fn events(
    judged: &[NodeJudgement],
    actions: &[(String, Action)],
    hosts: Option<&HostReport>,
    check_status: Status,
    fractions: Fractions,
    unix_secs: u64,
) -> Vec<Event> {
    let base = |kind| Event {
        schema: SCHEMA,
        time: rfc3339(unix_secs),
        collbench_version: env!("CARGO_PKG_VERSION"),
        check_status,
        kind,
        verdict: None,
        node: None,
        hosts: Vec::new(),
        figure_gbps: None,
        reference_gbps: None,
        test: String::new(),
        message: String::new(),
        actions: Vec::new(),
    };
    let mut out = Vec::new();
    for j in judged {
        let mine: Vec<Action> = actions
            .iter()
            .filter(|(n, _)| n == &j.node)
            .map(|(_, a)| a.clone())
            .collect();
        let touched = mine.iter().any(|a| a.action != "none");
        if j.verdict == NodeVerdict::Passed && !touched {
            continue;
        }
        out.push(Event {
            verdict: Some(j.verdict),
            node: Some(j.node.clone()),
            hosts: j.host.iter().cloned().collect(),
            figure_gbps: j.figure_gbps,
            reference_gbps: j.reference_gbps,
            test: j.test.clone(),
            message: j.why.clone(),
            actions: mine,
            ..base("node")
        });
    }
    if let Some(h) = hosts {
        for f in &h.verdict.findings {
            let Finding::SlowLink { a, b, ratio, .. } = f else {
                continue;
            };
            let name = |x: usize| h.hosts.get(x).map_or(format!("h{x}"), |i| i.name.clone());
            out.push(Event {
                hosts: vec![name(*a), name(*b)],
                figure_gbps: Some(ratio * h.verdict.matrix.reference_gbps),
                reference_gbps: Some(h.verdict.matrix.reference_gbps),
                test: format!("{} host pairs", h.judged_op),
                message: format!(
                    "{} {}",
                    f.status(fractions).label(),
                    crate::hosts::finding_line(f, &h.hosts)
                ),
                ..base("link")
            });
        }
    }
    out
}

/// The events as JSON lines.
pub fn render(events: &[Event]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for e in events {
        out += &serde_json::to_string(e)?;
        out.push('\n');
    }
    Ok(out)
}
