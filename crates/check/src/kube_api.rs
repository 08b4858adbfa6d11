//! The Kubernetes API server as the pod's service account reaches it
//! (`curl`, the bearer token and body on its stdin, never on a command
//! line), or a test's stand-in: the node state's patches and the node
//! labels that give `--groups label` its groups both go through it.

use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

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

/// How collbench reaches the API server.
pub trait ApiServer {
    /// `GET /api/v1/nodes/NODE`.
    fn get_node(&self, node: &str) -> Result<Value, K8sError>;
    /// `PATCH PATH` with `body` as `content_type`.
    fn patch(&self, path: &str, content_type: &str, body: &Value) -> Result<(), K8sError>;
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
    fn patch(&self, path: &str, content_type: &str, body: &Value) -> Result<(), K8sError> {
        self.request("PATCH", path, Some((content_type, &body.to_string())))
            .map(drop)
    }
}
