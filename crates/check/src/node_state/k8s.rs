//! Kubernetes node state from the node verdicts: a bad node gets the node
//! condition `CollbenchUnhealthy=True` (its message names the finding,
//! the collbench version and the time) through the status subresource,
//! and the taint `collbench.dev/unhealthy=true:NoSchedule`; a passed node
//! gets the condition False and loses that taint. Only collbench's own
//! condition type and taint key are ever written: every other taint of
//! the node is kept (a node's taint list has no merge key, so acting reads
//! the node first and patches the whole list). The API server is reached
//! through [`ApiServer`]: the pod's service account (`curl`), or a test's.

use super::{reason, rfc3339, NodeJudgement, NodeVerdict};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The node condition collbench owns.
pub const CONDITION: &str = "CollbenchUnhealthy";
/// The taint key collbench owns.
pub const TAINT_KEY: &str = "collbench.dev/unhealthy";
/// Strategic merge patch: conditions merge by type.
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// Why the API server could not be reached or refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum K8sError {
    /// Not in a pod: no KUBERNETES_SERVICE_HOST or no service account.
    #[error("no Kubernetes API here: {0}; run in a pod with a service account, or print the patches with --k8s")]
    NoApi(String),
    /// The request failed (its words).
    #[error("{method} {path} failed: {reason}")]
    Request {
        method: String,
        path: String,
        reason: String,
    },
}

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

/// How collbench reaches the API server.
pub trait ApiServer {
    /// `GET /api/v1/nodes/NODE`.
    fn get_node(&self, node: &str) -> Result<Value, K8sError>;
    /// Sends `patch`.
    fn patch(&self, patch: &Patch) -> Result<(), K8sError>;
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

/// The pod's service account and the API server's address.
pub struct InCluster {
    /// `https://HOST:PORT` (COLLBENCH_K8S_API overrides it, for tests).
    pub url: String,
    pub token: String,
    /// The cluster's CA, when the service account has one.
    pub ca: Option<PathBuf>,
}

impl InCluster {
    /// From KUBERNETES_SERVICE_HOST/PORT and the service account files
    /// (COLLBENCH_K8S_SERVICEACCOUNT names another folder).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<InCluster, K8sError> {
        let url = match env("COLLBENCH_K8S_API") {
            Some(u) => u,
            None => {
                let host = env("KUBERNETES_SERVICE_HOST")
                    .ok_or_else(|| K8sError::NoApi("KUBERNETES_SERVICE_HOST is not set".into()))?;
                let port = env("KUBERNETES_SERVICE_PORT").unwrap_or_else(|| "443".into());
                format!("https://{host}:{port}")
            }
        };
        let dir = PathBuf::from(
            env("COLLBENCH_K8S_SERVICEACCOUNT")
                .unwrap_or_else(|| "/var/run/secrets/kubernetes.io/serviceaccount".into()),
        );
        let token = std::fs::read_to_string(dir.join("token")).map_err(|e| {
            K8sError::NoApi(format!(
                "no service account token in {}: {e}",
                dir.display()
            ))
        })?;
        let ca = Some(dir.join("ca.crt")).filter(|p| p.exists());
        Ok(InCluster {
            url,
            token: token.trim().to_string(),
            ca,
        })
    }

    /// One request through `curl`, its options on stdin (so the token is
    /// on no command line); the response body.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Result<String, K8sError> {
        let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut config = format!(
            "url = {}\nrequest = {method}\nsilent\nshow-error\nfail\nheader = {}\n",
            quote(&format!("{}{path}", self.url)),
            quote(&format!("Authorization: Bearer {}", self.token))
        );
        if let Some(ca) = &self.ca {
            config += &format!("cacert = {}\n", quote(&ca.to_string_lossy()));
        }
        if let Some((content_type, data)) = body {
            config += &format!(
                "header = {}\n",
                quote(&format!("Content-Type: {content_type}"))
            );
            config += &format!("data-binary = {}\n", quote(data));
        }
        let fail = |reason: String| K8sError::Request {
            method: method.into(),
            path: path.into(),
            reason,
        };
        let mut child = Command::new("curl")
            .args(["--config", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot run curl: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin
                .write_all(config.as_bytes())
                .map_err(|e| fail(e.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl ApiServer for InCluster {
    fn get_node(&self, node: &str) -> Result<Value, K8sError> {
        let path = format!("/api/v1/nodes/{node}");
        let text = self.request("GET", &path, None)?;
        serde_json::from_str(&text).map_err(|e| K8sError::Request {
            method: "GET".into(),
            path,
            reason: format!("not a Node: {e}"),
        })
    }
    fn patch(&self, p: &Patch) -> Result<(), K8sError> {
        self.request(
            "PATCH",
            &p.path,
            Some((p.content_type, &p.body.to_string())),
        )
        .map(drop)
    }
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
            let sent = api.patch(&p).map(|()| true);
            out.push((p, sent));
        }
    }
    out
}
