//! Slurm node state from the node verdicts: drain each bad node with a
//! reason naming the finding, resume each node collbench drained once it
//! passes, and leave every other node as it is (a node someone else
//! drained keeps its drain, whatever collbench finds). `scontrol` is
//! reached through [`Scontrol`], so the plan is tested without Slurm.

use super::{reason, Act, NodeJudgement, NodeVerdict, REASON_PREFIX};
use serde::Serialize;
use std::process::Command;

/// Why `scontrol` could not tell or do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SlurmError {
    /// `scontrol` could not be started (not on PATH: not a Slurm node).
    #[error("cannot run scontrol: {reason}; run check on a Slurm node or without --slurm")]
    NotFound { reason: String },
    /// `scontrol` ran and failed (an unknown node, no permission).
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
}

/// How collbench reaches Slurm: `scontrol`, or a test's stand-in.
pub trait Scontrol {
    /// The output of `scontrol show node NODE`.
    fn show_node(&self, node: &str) -> Result<String, SlurmError>;
    /// Runs `scontrol update` with these arguments.
    fn update(&self, args: &[String]) -> Result<(), SlurmError>;
}

/// The `scontrol` program on PATH.
pub struct SystemScontrol;

impl SystemScontrol {
    fn run(args: &[String]) -> Result<String, SlurmError> {
        let out =
            Command::new("scontrol")
                .args(args)
                .output()
                .map_err(|e| SlurmError::NotFound {
                    reason: e.to_string(),
                })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(SlurmError::Failed {
            command: format!("scontrol {}", shell_words(args)),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Scontrol for SystemScontrol {
    fn show_node(&self, node: &str) -> Result<String, SlurmError> {
        Self::run(&["show".into(), "node".into(), node.into()])
    }
    fn update(&self, args: &[String]) -> Result<(), SlurmError> {
        let mut all = vec!["update".to_string()];
        all.extend(args.iter().cloned());
        Self::run(&all).map(drop)
    }
}

/// A node's state as `scontrol show node` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// `IDLE+DRAIN`, `MIXED`, ...
    pub state: String,
    /// The reason without Slurm's `[user@time]` suffix.
    pub reason: Option<String>,
}

impl NodeState {
    /// Drained or draining (new jobs go elsewhere), or down.
    pub fn out_of_service(&self) -> bool {
        self.state
            .split('+')
            .any(|s| s.starts_with("DRAIN") || s == "DOWN" || s == "FAIL")
    }

    /// Whether collbench drained it (its reason starts with the prefix).
    pub fn drained_by_collbench(&self) -> bool {
        self.out_of_service()
            && self
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with(REASON_PREFIX))
    }
}

/// Reads `State=` and `Reason=` from `scontrol show node` output.
pub fn parse_show_node(text: &str) -> Option<NodeState> {
    let mut state = None;
    let mut reason = None;
    for line in text.lines().map(str::trim) {
        if let Some(r) = line.strip_prefix("Reason=") {
            // Slurm appends "[user@2026-12-07T03:40:00]" to a reason.
            let r = match r.rfind(" [") {
                Some(i) if r.ends_with(']') => &r[..i],
                _ => r,
            };
            reason = Some(r.trim().to_string()).filter(|r| !r.is_empty() && r != "(null)");
            continue;
        }
        for field in line.split_whitespace() {
            if let Some(s) = field.strip_prefix("State=") {
                state = Some(s.to_string());
            }
        }
    }
    Some(NodeState {
        state: state?,
        reason,
    })
}

/// What collbench does to one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SlurmAction {
    /// Found bad and in service: drain it with this reason.
    Drain { node: String, reason: String },
    /// Passed, and drained by collbench: resume it.
    Resume { node: String, was: String },
    /// Found bad but already out of service: left as it is.
    AlreadyDrained { node: String, reason: String },
    /// Passed, but drained by someone else: left as it is.
    NotOurs { node: String, reason: String },
    /// Its state could not be read: left as it is.
    Unknown { node: String, error: SlurmError },
}

impl SlurmAction {
    /// The node it is about.
    pub fn node(&self) -> &str {
        match self {
            SlurmAction::Drain { node, .. }
            | SlurmAction::Resume { node, .. }
            | SlurmAction::AlreadyDrained { node, .. }
            | SlurmAction::NotOurs { node, .. }
            | SlurmAction::Unknown { node, .. } => node,
        }
    }

    /// The `scontrol update` arguments, for the actions that change a node.
    pub fn update_args(&self) -> Option<Vec<String>> {
        match self {
            SlurmAction::Drain { node, reason } => Some(vec![
                format!("NodeName={node}"),
                "State=DRAIN".into(),
                format!("Reason={reason}"),
            ]),
            SlurmAction::Resume { node, .. } => {
                Some(vec![format!("NodeName={node}"), "State=RESUME".into()])
            }
            _ => None,
        }
    }
}

/// The actions for `judged` nodes: only bad nodes and passed ones are
/// looked up (a held node is never touched).
pub fn plan(judged: &[NodeJudgement], slurm: &dyn Scontrol, unix_secs: u64) -> Vec<SlurmAction> {
    let mut out = Vec::new();
    for j in judged.iter().filter(|j| j.verdict != NodeVerdict::Held) {
        let node = j.node.clone();
        let state = match slurm.show_node(&node).map(|t| parse_show_node(&t)) {
            Ok(Some(s)) => s,
            Ok(None) => {
                let error = SlurmError::Failed {
                    command: format!("scontrol show node {node}"),
                    stderr: "no State= in its output".into(),
                };
                out.push(SlurmAction::Unknown { node, error });
                continue;
            }
            Err(error) => {
                out.push(SlurmAction::Unknown { node, error });
                continue;
            }
        };
        let was = state.reason.clone().unwrap_or_default();
        match j.verdict {
            NodeVerdict::Bad if state.out_of_service() => {
                out.push(SlurmAction::AlreadyDrained { node, reason: was })
            }
            NodeVerdict::Bad => out.push(SlurmAction::Drain {
                node,
                reason: reason(j, unix_secs),
            }),
            NodeVerdict::Passed if state.drained_by_collbench() => {
                out.push(SlurmAction::Resume { node, was })
            }
            NodeVerdict::Passed if state.out_of_service() => {
                out.push(SlurmAction::NotOurs { node, reason: was })
            }
            NodeVerdict::Passed | NodeVerdict::Held => {}
        }
    }
    out
}

/// Takes the actions (`Act::Apply`) or only says them: one line each
/// for stdout, and each action with whether it was done.
pub fn carry_out(
    actions: Vec<SlurmAction>,
    act: Act,
    slurm: &dyn Scontrol,
) -> Vec<(SlurmAction, Result<bool, SlurmError>, String)> {
    actions
        .into_iter()
        .map(|a| {
            let (done, line) = match (a.update_args(), act) {
                (Some(args), Act::DryRun) => (
                    Ok(false),
                    format!("would run: scontrol update {}", shell_words(&args)),
                ),
                (Some(args), Act::Apply) => match slurm.update(&args) {
                    Ok(()) => (
                        Ok(true),
                        format!("ran: scontrol update {}", shell_words(&args)),
                    ),
                    Err(e) => (Err(e.clone()), format!("FAILED: {e}")),
                },
                (None, _) => (Ok(false), left_alone(&a)),
            };
            (a, done, format!("slurm: {line}"))
        })
        .collect()
}

/// Why a node is left as it is, in words.
fn left_alone(a: &SlurmAction) -> String {
    match a {
        SlurmAction::AlreadyDrained { node, reason } => {
            format!("{node} is bad but already out of service ({reason}): left as it is")
        }
        SlurmAction::NotOurs { node, reason } => {
            format!("{node} passed but was drained by someone else ({reason}): left drained")
        }
        SlurmAction::Unknown { node, error } => {
            format!("{node}: its state cannot be read ({error}): left as it is")
        }
        SlurmAction::Drain { node, .. } | SlurmAction::Resume { node, .. } => node.clone(),
    }
}

/// `args` as one shell line, each word quoted where it must be.
pub fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = a
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./,:@+".contains(c));
            if plain && !a.is_empty() {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
