//! The transport gate's lines: the path the battery took against what
//! `--require-transport` asks for and what the machine's hardware implies
//! (RDMA NICs on a job of several hosts: the network must not be Socket;
//! NVLink up: P2P must not be off). Judging lives in
//! `collbench_core::nccl_path::gate`; this file turns it into lines with
//! a verdict, and says what the CPU backend's path is instead of refusing.

use super::PathSeen;
use crate::verdict::Status;
use collbench_core::nccl_path::gate::{self, GateFailure, Required};
use collbench_core::Topology;
use serde::Serialize;
use std::collections::BTreeMap;

/// One line of the gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateLine {
    /// PASS (a requirement met), FAIL (not met, or implied and not
    /// taken), INCOMPLETE (the path cannot be told).
    pub status: Status,
    /// What was expected (`NET/IB`).
    pub expected: String,
    /// What was used (`NET/Socket`).
    pub used: String,
    /// Why it was expected: `required`, or the hardware seen.
    pub because: String,
    /// The causes seen (`NCCL_IB_DISABLE set by environment to 1.`).
    pub causes: Vec<String>,
    /// The whole line for people.
    pub line: String,
}

impl GateLine {
    fn failed(f: GateFailure) -> GateLine {
        GateLine {
            status: Status::Fail,
            line: f.to_string(),
            expected: f.expected,
            used: f.used,
            because: f.because,
            causes: f.causes,
        }
    }
}

/// The NCCL_* variables of this process's environment, where causes such
/// as `NCCL_IB_DISABLE=1` are looked for beside NCCL's own lines.
pub fn nccl_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("NCCL_"))
        .collect()
}

/// The gate's lines for `path`: each requirement (met: PASS; not met:
/// FAIL naming expected, used and cause), then what `topology` implies
/// (only its failures). The CPU backend uses no NCCL transport: each
/// requirement fails, naming its shared memory. A path that cannot be
/// told leaves each requirement INCOMPLETE.
pub fn gate_lines(
    path: &PathSeen,
    required: &[Required],
    topology: Option<&Topology>,
    env: &BTreeMap<String, String>,
) -> Vec<GateLine> {
    match path {
        PathSeen::Nccl { path, .. } => {
            let failed = gate::require(path, required, env);
            let mut out: Vec<GateLine> = required
                .iter()
                .filter(|r| !failed.iter().any(|f| f.expected == r.expected()))
                .map(|r| GateLine {
                    status: Status::Pass,
                    expected: r.expected().into(),
                    used: path.summary(),
                    because: "required".into(),
                    causes: Vec::new(),
                    line: format!(
                        "transport: expected {} (required), NCCL used {}",
                        r.expected(),
                        path.summary()
                    ),
                })
                .collect();
            out.extend(failed.into_iter().map(GateLine::failed));
            if let Some(topo) = topology {
                let implied = gate::implied(path, topo, env);
                let new = implied
                    .into_iter()
                    .filter(|f| !out.iter().any(|g| g.expected == f.expected));
                out.extend(new.map(GateLine::failed).collect::<Vec<_>>());
            }
            out
        }
        PathSeen::Cpu { summary } => required
            .iter()
            .map(|r| {
                GateLine::failed(GateFailure {
                    expected: r.expected().into(),
                    used: summary.clone(),
                    because: "required".into(),
                    causes: vec![
                        "the cpu backend does not use NCCL: run with --backend nccl".into(),
                    ],
                })
            })
            .map(|mut g| {
                // NCCL's word in the line would be wrong: the CPU backend used it.
                g.line = g.line.replace("NCCL used", "the job used");
                g
            })
            .collect(),
        PathSeen::Unknown { why } => required
            .iter()
            .map(|r| GateLine {
                status: Status::Incomplete,
                expected: r.expected().into(),
                used: "unknown".into(),
                because: "required".into(),
                causes: Vec::new(),
                line: format!(
                    "transport: expected {} (required), but the path NCCL took cannot be told ({why})",
                    r.expected()
                ),
            })
            .collect(),
    }
}
