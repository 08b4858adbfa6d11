//! The node step after the verdict (`--slurm`, `--k8s`, `--events`):
//! every process says which host and node it runs on, and rank 0 judges
//! each node, plans (or takes) the cluster's actions and writes the
//! events. Its lines go to stdout after the verdict.

use crate::error::CheckError;
use crate::host_tests::{self, HostReport};
use crate::node_state::events::{self, Action};
use crate::node_state::k8s::{self, ApiServer, InCluster, Patch};
use crate::node_state::slurm::{self, Scontrol, SlurmAction};
use crate::node_state::{self, NodeJudgement, NodeStateOptions, NodeVerdict, Outcome, Placement};
use crate::verdict::{Fractions, Line, Status};
use collbench_core::Bootstrap;
use serde::Serialize;

/// What the node step found and did, for the check's JSON.
#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    pub nodes: Vec<NodeJudgement>,
    /// Slurm's actions (`--slurm`): planned in a dry run, else taken.
    pub slurm: Vec<SlurmAction>,
    /// Kubernetes' patches (`--k8s`): printed in a dry run, else sent.
    pub k8s: Vec<Patch>,
    /// Whether the actions were taken (false: a dry run).
    pub applied: bool,
}

/// Every process's host and node, on rank 0 (`None` elsewhere, and
/// when no node step is asked: then nothing is exchanged).
pub(super) fn placements(
    opts: &NodeStateOptions,
    control: &dyn Bootstrap,
    hostname: &str,
) -> Result<Option<Vec<Placement>>, CheckError> {
    if !opts.wanted() {
        return Ok(None);
    }
    let env = |k: &str| std::env::var(k).ok();
    let mine = (
        host_tests::host_key(env, hostname),
        node_state::node_name(env, hostname),
    );
    let parts = control.gather(serde_json::to_vec(&mine)?)?;
    let Some(parts) = parts else {
        return Ok(None);
    };
    let read = |p: &Vec<u8>| serde_json::from_slice::<(String, String)>(p);
    let all = parts
        .iter()
        .map(read)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CheckError::Malformed(format!("malformed node name from a process: {e}")))?;
    Ok(Some(
        all.into_iter()
            .map(|(host, node)| Placement { host, node })
            .collect(),
    ))
}

/// What rank 0 has of the check, for the node step.
pub(super) struct Verdict<'a> {
    pub status: Status,
    pub lines: &'a [Line],
    pub hosts: Option<&'a HostReport>,
    pub fractions: Fractions,
}

/// Rank 0's node step when asked (`placements` gathered): its report and
/// its lines for stdout; nothing otherwise.
pub(super) fn if_asked(
    opts: &NodeStateOptions,
    verdict: &Verdict,
    placements: Option<&[Placement]>,
) -> Result<(Option<NodeReport>, String), CheckError> {
    let Some(placed) = placements else {
        return Ok((None, String::new()));
    };
    let scontrol = slurm::SystemScontrol;
    let (report, said) = node_step(opts, verdict, placed, &scontrol)?;
    Ok((Some(report), said))
}

/// Rank 0's node step: judgements, Slurm's actions (planned or taken),
/// the events written; returns its report and its lines for stdout.
pub(super) fn node_step(
    opts: &NodeStateOptions,
    verdict: &Verdict,
    placements: &[Placement],
    scontrol: &dyn Scontrol,
) -> Result<(NodeReport, String), CheckError> {
    let now = node_state::now_unix();
    let outcome = Outcome {
        status: verdict.status,
        lines: verdict.lines,
        hosts: verdict.hosts,
        fractions: verdict.fractions,
    };
    let nodes = node_state::judge_nodes(&outcome, placements);
    let mut text = String::new();
    for j in &nodes {
        let verdict = match j.verdict {
            NodeVerdict::Bad => "BAD",
            NodeVerdict::Passed => "passed",
            NodeVerdict::Held => "held (neither bad nor cleared)",
        };
        text += &format!("# node {}: {verdict}: {}\n", j.node, j.why);
    }
    let mut taken = Vec::new();
    let mut event_actions: Vec<(String, Action)> = Vec::new();
    if let Some(act) = opts.slurm {
        let planned = slurm::plan(&nodes, scontrol, now);
        for (a, done, line) in slurm::carry_out(planned, act, scontrol) {
            text += &format!("# {line}\n");
            let (name, detail) = (a.node().to_string(), line.clone());
            let action = match a {
                SlurmAction::Drain { .. } => "drain",
                SlurmAction::Resume { .. } => "resume",
                _ => "none",
            };
            let done = matches!(done, Ok(true));
            event_actions.push((
                name,
                Action {
                    system: "slurm",
                    action,
                    done,
                    detail,
                },
            ));
            taken.push(a);
        }
    }
    let mut patches = Vec::new();
    if let Some(act) = opts.k8s {
        text += &kubernetes(act, &nodes, now, &mut event_actions, &mut patches);
    }
    if let Some(path) = &opts.events {
        let list = events::events(
            &nodes,
            &event_actions,
            verdict.hosts,
            verdict.status,
            verdict.fractions,
            now,
        );
        let json = events::render(&list)?;
        if path.as_os_str() == "-" {
            text += &json;
        } else {
            std::fs::write(path, json).map_err(|error| CheckError::EventsUnwritable {
                path: path.clone(),
                error,
            })?;
        }
    }
    let report = NodeReport {
        nodes,
        slurm: taken,
        k8s: patches,
        applied: opts.slurm == Some(node_state::Act::Apply)
            || opts.k8s == Some(node_state::Act::Apply),
    };
    Ok((report, text))
}

/// Kubernetes' patches for the judged nodes: printed (a dry run) or sent
/// with the pod's service account; one `# k8s:` line and the patch's
/// Node document (one JSON line) each.
fn kubernetes(
    act: node_state::Act,
    nodes: &[NodeJudgement],
    now: u64,
    event_actions: &mut Vec<(String, Action)>,
    taken: &mut Vec<Patch>,
) -> String {
    let mut text = String::new();
    let api = match act {
        node_state::Act::DryRun => None,
        node_state::Act::Apply => match InCluster::from_env(|k| std::env::var(k).ok()) {
            Ok(api) => Some(api),
            Err(e) => return format!("# k8s: FAILED: {e}\n"),
        },
    };
    let api_ref = api.as_ref().map(|a| a as &dyn ApiServer);
    for (patch, sent) in k8s::carry_out(nodes, api_ref, now) {
        let what = format!("PATCH {} ({})", patch.path, patch.content_type);
        let line = match &sent {
            Ok(false) => format!("k8s: would send {what}"),
            Ok(true) => format!("k8s: sent {what}"),
            Err(e) => format!("k8s: FAILED: {e}"),
        };
        text += &format!("# {line}\n{}\n", patch.body);
        let bad = nodes
            .iter()
            .any(|j| j.node == patch.node && j.verdict == NodeVerdict::Bad);
        event_actions.push((
            patch.node.clone(),
            Action {
                system: "kubernetes",
                action: if bad { "taint" } else { "untaint" },
                done: matches!(sent, Ok(true)),
                detail: line,
            },
        ));
        taken.push(patch);
    }
    text
}
