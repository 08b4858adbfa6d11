//! Kubernetes node state from the node verdicts: a bad node gets the node
//! condition `CollbenchUnhealthy=True` (its message names the finding,
//! the collbench version and the time) through the status subresource,
//! and the taint `collbench.dev/unhealthy=true:NoSchedule`; a passed node
//! gets the condition False and loses that taint. Only collbench's own
//! condition type and taint key are ever written: every other taint of
//! the node is kept (a node's taint list has no merge key, so acting reads
//! the node first and patches the whole list). The API server is reached
//! through [`ApiServer`] (`crate::kube_api`): the pod's service account,
//! or a test's.

use super::{reason, rfc3339, NodeJudgement, NodeVerdict};
pub use crate::kube_api::{ApiServer, InCluster, K8sError};
use serde::Serialize;
use serde_json::{json, Value};

/// The node condition collbench owns.
pub const CONDITION: &str = "CollbenchUnhealthy";
/// The taint key collbench owns.
pub const TAINT_KEY: &str = "collbench.dev/unhealthy";
/// Strategic merge patch: conditions merge by type.
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// One patch for the API server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Patch {
    pub node: String,
    /// `/api/v1/nodes/NODE` or `/api/v1/nodes/NODE/status`.
    pub path: String,
    pub content_type: &'static str,
    /// A Node document (what kubernetes-validate checks).
    pub body: Value,
}

/// The node's taints without collbench's.
fn others(taints: &[Value]) -> Vec<Value> {
    taints
        .iter()
        .filter(|t| t["key"] != TAINT_KEY)
        .cloned()
        .collect()
}

/// The patches for `j`: `taints` is the node's list as read (`None` in a
/// dry run without the API: the taint patch then shows collbench's alone,
/// and acting would keep the others). A held node gets none; a passed
/// node whose known taints lack collbench's gets only the condition.
pub fn patches(j: &NodeJudgement, taints: Option<&[Value]>, unix_secs: u64) -> Vec<Patch> {
    let now = rfc3339(unix_secs);
    let node = &j.node;
    let (status, why, message) = match j.verdict {
        NodeVerdict::Held => return Vec::new(),
        NodeVerdict::Bad => ("True", "CollbenchCheckFailed", reason(j, unix_secs)),
        NodeVerdict::Passed => ("False", "CollbenchCheckPassed", reason(j, unix_secs)),
    };
    let condition = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node},
        "status": {"conditions": [{
            "type": CONDITION,
            "status": status,
            "reason": why,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }]},
    });
    let mut out = vec![Patch {
        node: node.clone(),
        path: format!("/api/v1/nodes/{node}/status"),
        content_type: STRATEGIC,
        body: condition,
    }];
    let known = taints.map(others);
    let ours = taints.is_some_and(|t| t.len() != others(t).len());
    let list = match j.verdict {
        NodeVerdict::Bad => {
            let mut list = known.unwrap_or_default();
            list.push(json!({"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}));
            Some(list)
        }
        NodeVerdict::Passed if ours => known,
        _ => None,
    };
    if let Some(list) = list {
        out.push(Patch {
            node: node.clone(),
            path: format!("/api/v1/nodes/{node}"),
            content_type: STRATEGIC,
            body: json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node},
                "spec": {"taints": list},
            }),
        });
    }
    out
}

/// Each judged node's patches, and for each whether it was sent: in a
/// dry run (`api` None) only printed; acting reads each node first.
pub fn carry_out(
    judged: &[NodeJudgement],
    api: Option<&dyn ApiServer>,
    unix_secs: u64,
) -> Vec<(Patch, Result<bool, K8sError>)> {
    let mut out = Vec::new();
    for j in judged.iter().filter(|j| j.verdict != NodeVerdict::Held) {
        let Some(api) = api else {
            out.extend(
                patches(j, None, unix_secs)
                    .into_iter()
                    .map(|p| (p, Ok(false))),
            );
            continue;
        };
        let taints = match api.get_node(&j.node) {
            Ok(node) => node["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            Err(e) => {
                for p in patches(j, None, unix_secs) {
                    out.push((p, Err(e.clone())));
                }
                continue;
            }
        };
        for p in patches(j, Some(&taints), unix_secs) {
            let sent = api.patch(&p.path, p.content_type, &p.body).map(|()| true);
            out.push((p, sent));
        }
    }
    out
}
