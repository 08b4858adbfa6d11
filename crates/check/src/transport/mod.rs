//! The path `check` measured and the fabric variants (issue #50): which
//! transport the battery took (NCCL's own lines, or the CPU backend's
//! shared memory), the transport gate (what `--require-transport` asks
//! for, and what the machine's NICs and NVLink imply), and the same op
//! through the network alone and within hosts alone, each judged against
//! its own ceiling so that a bad NIC cannot hide behind NVLink and a bad
//! NVLink cannot hide behind a good network.
//!
//! Files: this one (the types and the text), `gate` (the gate's lines),
//! `ceilings` (each variant's topology, ceiling and verdict). The check
//! runs the variants in `check/variants.rs`.

mod ceilings;
mod gate;
#[cfg(test)]
mod tests;

pub use ceilings::{judge_variant, variant_topology, Judged};
pub use gate::{gate_lines, nccl_env, GateLine};

use crate::verdict::Status;
use collbench_core::nccl_path::NcclPath;
use collbench_core::size::format_size;
use serde::Serialize;
use std::fmt::Write;

/// A fabric variant of `check`: the battery's op again over one part of
/// the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fabric {
    /// Every path NCCL chose: the battery's own figure.
    AllPaths,
    /// The network alone: P2P, SHM and NVLS off, so every pair of ranks
    /// crosses the NICs.
    Network,
    /// Within hosts alone: one communicator per host.
    Intra,
}

impl Fabric {
    /// The words of the text table.
    pub fn label(self) -> &'static str {
        match self {
            Fabric::AllPaths => "all paths",
            Fabric::Network => "network only",
            Fabric::Intra => "within hosts",
        }
    }
}

/// The variants `--fabric` names: `all` (the default: every variant
/// that applies to the job), `none`, or a list of `network` and `intra`.
/// The all-paths line is the battery's and is always shown.
pub fn parse_fabric(s: &str) -> Result<Vec<Fabric>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.to_ascii_lowercase().as_str() {
            "all" => out.extend([Fabric::Network, Fabric::Intra]),
            "none" => {}
            "network" | "net" => out.push(Fabric::Network),
            "intra" | "within" => out.push(Fabric::Intra),
            _ => {
                return Err(format!(
                    "unknown fabric variant '{part}' (expected all, none, network, intra)"
                ))
            }
        }
    }
    if s.split(',').all(|p| p.trim().is_empty()) {
        return Err("names no variant (e.g. --fabric network,intra, or all, or none)".into());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Every variant that may apply (`--fabric all`, the default).
pub const ALL_VARIANTS: [Fabric; 2] = [Fabric::Network, Fabric::Intra];

/// The path a part of the check took, as far as it can be told.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathSeen {
    /// What NCCL's own lines say it connected.
    Nccl {
        /// One line for people ([`NcclPath::summary`]).
        summary: String,
        /// The facts.
        path: Box<NcclPath>,
    },
    /// The CPU backend: rank threads of one process copy through its
    /// memory; no byte crosses processes or hosts.
    Cpu {
        /// One line for people.
        summary: String,
    },
    /// The backend ran, but the path cannot be told (NCCL printed no
    /// path line where it was captured, or the backend cannot say).
    Unknown {
        /// Why, in words.
        why: String,
    },
}

impl PathSeen {
    /// NCCL's path.
    pub fn nccl(path: NcclPath) -> PathSeen {
        PathSeen::Nccl {
            summary: path.summary(),
            path: Box::new(path),
        }
    }

    /// The CPU backend's path for rank threads of each process.
    pub fn cpu(ranks_per_process: usize, processes: usize) -> PathSeen {
        let threads = if ranks_per_process == 1 {
            "1 rank thread".to_string()
        } else {
            format!("{ranks_per_process} rank threads")
        };
        let summary = if processes > 1 {
            format!("cpu backend: shared memory between the {threads} of each of {processes} processes (no data crosses processes)")
        } else {
            format!("cpu backend: shared memory between {threads} of one process (no network)")
        };
        PathSeen::Cpu { summary }
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        match self {
            PathSeen::Nccl { summary, .. } | PathSeen::Cpu { summary } => summary.clone(),
            PathSeen::Unknown { why } => format!("unknown ({why})"),
        }
    }
}

/// One fabric variant's line: the path it measured, its busbw, its
/// ceiling and its verdict, or why it was skipped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantLine {
    pub variant: Fabric,
    pub op: String,
    pub size_bytes: u64,
    /// The path this variant measured (`None`: it did not run).
    pub path: Option<PathSeen>,
    /// Out-of-place busbw, GB/s; `None` when it did not run.
    pub busbw_gbps: Option<f64>,
    /// This variant's own ceiling, GB/s, where the hardware is known.
    pub ceiling_gbps: Option<f64>,
    /// The part that sets the ceiling (`network`, `NVLink`, `host memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// INFO (measured, within its ceiling's reach), WARN (far below it),
    /// FAIL (wrong results), INCOMPLETE (could not run).
    pub status: Status,
    /// Why the variant has no meaning for this job; it then counts for
    /// nothing in the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The verdict in words.
    pub note: String,
}

/// The transport part of the check: the path, the gate, the variants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransportReport {
    /// The path the battery took.
    pub path: PathSeen,
    /// What was required (`--require-transport`), in NCCL's names.
    pub required: Vec<String>,
    /// The gate's lines: each requirement met or not, each path the
    /// hardware implies and NCCL did not take.
    pub gate: Vec<GateLine>,
    /// The fabric variants, all paths first.
    pub variants: Vec<VariantLine>,
}

impl TransportReport {
    /// The worst of the gate's and the variants' verdicts (INFO when
    /// nothing was judged).
    pub fn status(&self) -> Status {
        let gate = self.gate.iter().map(|g| g.status);
        let variants = self
            .variants
            .iter()
            .filter(|v| v.skipped.is_none())
            .map(|v| v.status);
        gate.chain(variants).max().unwrap_or(Status::Info)
    }

    /// What has verdict `status`, for the last line: `transport gate`,
    /// the variants' names.
    pub fn named_at(&self, status: Status) -> Vec<String> {
        let mut out = Vec::new();
        if self.gate.iter().any(|g| g.status == status) {
            out.push("transport gate".to_string());
        }
        let variants = self
            .variants
            .iter()
            .filter(|v| v.skipped.is_none() && v.status == status);
        out.extend(variants.map(|v| v.variant.label().to_string()));
        out
    }

    /// The text `check` prints after its table.
    pub fn text(&self) -> String {
        let mut out = format!("#\n# path measured: {}\n", self.path.summary());
        for g in &self.gate {
            let _ = writeln!(out, "# {} {}", g.status.label(), g.line);
        }
        if self.variants.is_empty() {
            return out;
        }
        let _ = writeln!(
            out,
            "#  {:<14} {:<14} {:>7} {:>8} {:>8}  {:<10}  path",
            "fabric variant", "op", "size", "busbw", "ceiling", "verdict"
        );
        for v in &self.variants {
            let figure = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |g| format!("{g:.2}"));
            let verdict = if v.skipped.is_some() {
                "skipped"
            } else {
                v.status.label()
            };
            let _ = writeln!(
                out,
                "#  {:<14} {:<14} {:>7} {:>8} {:>8}  {:<10}  {}",
                v.variant.label(),
                v.op,
                format_size(v.size_bytes),
                figure(v.busbw_gbps),
                figure(v.ceiling_gbps),
                verdict,
                v.path
                    .as_ref()
                    .map_or_else(|| "-".to_string(), PathSeen::summary)
            );
        }
        for v in &self.variants {
            let _ = writeln!(out, "# {}: {}", v.variant.label(), v.note);
        }
        out
    }
}
