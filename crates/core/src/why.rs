//! Why a row is low (issue #50 item 6): for a row far below its ceiling,
//! the causes collbench can show from what it knows, each with its
//! evidence: the transport NCCL fell back to, GPUDirect RDMA off, a GPU
//! whose NICs sit on the other socket, a PCIe link trained narrower than
//! it can, NVLink links down, fewer channels than NCCL would choose.
//!
//! [`why`] is the rule, pure over [`Facts`] (the record's topology, the
//! path NCCL took, the run's environment, the row's bottleneck and
//! channels); [`machine`] the causes that belong to the host alone, for
//! `doctor`; `crate::why_rows` gives a record's low placements theirs. A row's ceiling says what bounds it (its `why` is the
//! formula); these causes say why the row did not reach it.

use crate::ceiling::Bottleneck;
use crate::nccl_path::gate;
use crate::nccl_path::{CauseKind, NcclPath, Transport};
use crate::topology::{GpuLinks, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Under this fraction of its ceiling a large row is low: the one cut
/// `check` warns at (no published healthy figure sits under it,
/// docs/ceiling.md).
pub const LOW_FRACTION: f64 = 0.4;

/// Rows from this size are judged: below it latency and NCCL's LL
/// protocols set the pace, not the links.
pub const LOW_FROM_BYTES: u64 = 64 << 20;

/// One cause of a low row, with the facts that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cause {
    /// What was found.
    pub finding: Finding,
    /// The line or figures that show it, for people (NCCL's own line where
    /// it printed one).
    pub evidence: String,
}

/// What can hold a row under its ceiling, from most to least it can cost
/// (a fallback to sockets is ten times, a link at half width twice, a NIC
/// across sockets or GDR off tens of percent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Finding {
    /// NCCL took a slower path than the hardware offers (`NET/Socket`
    /// where InfiniBand is up, SHM where NVLink is).
    TransportFallback {
        /// What the hardware implies (`NET/IB`).
        expected: String,
        /// What NCCL used (`NET/Socket`).
        used: String,
        /// The first cause NCCL's lines or the environment show
        /// (`NCCL_IB_DISABLE set by environment to 1.`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// NET connections without GPUDirect RDMA: data crosses host memory;
    /// for `doctor`, no peer-memory module loaded.
    GdrOff,
    /// A GPU with no NIC on its NUMA node: its traffic crosses the link
    /// between sockets.
    NicOtherSocket {
        /// The first such GPU.
        gpu: u64,
        gpu_numa: i64,
        /// The NIC it would use, and its node.
        nic: String,
        nic_numa: i64,
    },
    /// A GPU's PCIe link trained narrower than its maximum.
    PcieDowntrained {
        /// The first such GPU.
        gpu: u64,
        gen: u32,
        max_gen: u32,
        width: u32,
        max_width: u32,
    },
    /// NVLink links down.
    NvlinkInactive {
        /// The first GPU with links down.
        gpu: u64,
        active: u32,
        total: u32,
    },
    /// NCCL ran fewer channels than it would choose.
    FewChannels {
        /// Channels NCCL ran.
        used: u64,
        /// The least NCCL's defaults give here (one per NIC a host's ranks
        /// use); absent where only a cap in the environment shows it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<u64>,
    },
}

impl Finding {
    /// The name people read (`transport fallback`).
    pub fn label(&self) -> &'static str {
        match self {
            Finding::TransportFallback { .. } => "transport fallback",
            Finding::GdrOff => "GPUDirect RDMA off",
            Finding::NicOtherSocket { .. } => "NIC on the other socket",
            Finding::PcieDowntrained { .. } => "PCIe link below its maximum",
            Finding::NvlinkInactive { .. } => "NVLink links inactive",
            Finding::FewChannels { .. } => "few channels",
        }
    }

    /// A few words for a table cell (`NET/Socket, not NET/IB`).
    pub fn short(&self) -> String {
        match self {
            Finding::TransportFallback { expected, used, .. } => format!("{used}, not {expected}"),
            Finding::GdrOff => "no GPUDirect RDMA".into(),
            Finding::NicOtherSocket { gpu, nic, .. } => {
                format!("GPU {gpu}'s NIC {nic} across sockets")
            }
            Finding::PcieDowntrained {
                gpu,
                gen,
                max_gen,
                width,
                max_width,
            } => format!("GPU {gpu} PCIe gen{gen}/{max_gen} x{width}/x{max_width}"),
            Finding::NvlinkInactive { gpu, active, total } => {
                format!("GPU {gpu} NVLink {active} of {total} up")
            }
            Finding::FewChannels { used, default } => match default {
                Some(d) => format!("{used} channels for {d} NICs"),
                None => format!("{used} channels, capped"),
            },
        }
    }

    /// The row bottlenecks this can lower (`None`: any).
    fn touches(&self, by: Bottleneck) -> bool {
        use Bottleneck::*;
        match self {
            Finding::TransportFallback { .. } => true,
            Finding::GdrOff | Finding::NicOtherSocket { .. } => by == Network,
            Finding::PcieDowntrained { .. } => matches!(by, Pcie | Network),
            Finding::NvlinkInactive { .. } => matches!(by, Nvlink | Nvls),
            Finding::FewChannels { .. } => by != HostMemory,
        }
    }
}

impl Cause {
    /// `transport fallback: NCCL used NET/Socket ...`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.finding.label(), self.evidence)
    }
}

/// What [`why`] reads. Every part may be missing (a log without NCCL's
/// lines, a run without a topology); a cause needs its own facts.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The part that sets the row's ceiling.
    pub bottleneck: Option<Bottleneck>,
    /// The machine (the record's, or a described one).
    pub topology: Option<&'a Topology>,
    /// The path NCCL took.
    pub path: Option<&'a NcclPath>,
    /// The run's environment (NCCL_* settings).
    pub env: &'a BTreeMap<String, String>,
    /// Channels NCCL ran the row with (`--explain`), else its log's count.
    pub channels: Option<u64>,
}

/// The causes of a row at `fraction_of_ceiling` of its ceiling, most
/// costly first; none for a row at [`LOW_FRACTION`] or more (or a
/// fraction that is no number).
pub fn why(fraction_of_ceiling: f64, facts: &Facts) -> Vec<Cause> {
    if fraction_of_ceiling.is_nan() || fraction_of_ceiling >= LOW_FRACTION {
        return Vec::new();
    }
    let mut out = transport_fallback(facts);
    if let Some(t) = facts.topology {
        out.extend(pcie_downtrained(t));
        out.extend(nvlink_inactive(t));
        out.extend(nic_other_socket(t));
    }
    out.extend(gdr_off(facts));
    out.extend(few_channels(facts));
    if let Some(by) = facts.bottleneck {
        out.retain(|c| c.finding.touches(by));
    }
    out
}

/// The causes that belong to the host alone (no run needed): PCIe links
/// below their maximum, NVLink links down, GPUs without a NIC on their
/// socket. `doctor` names them.
pub fn machine(t: &Topology) -> Vec<Cause> {
    let mut out = Vec::new();
    out.extend(pcie_downtrained(t));
    out.extend(nvlink_inactive(t));
    out.extend(nic_other_socket(t));
    out
}

/// `NET/Socket` where the NICs are RDMA, SHM where NVLink is up (the
/// transport gate's judgement); without a topology, a Socket network or
/// SHM that NCCL's lines say was forced.
fn transport_fallback(f: &Facts) -> Vec<Cause> {
    let Some(path) = f.path else {
        return Vec::new();
    };
    let failures = f
        .topology
        .map(|t| gate::implied(path, t, f.env))
        .unwrap_or_default();
    let mut out: Vec<Cause> = failures
        .into_iter()
        .map(|g| {
            let cause = g.causes.first().cloned();
            let evidence = format!(
                "NCCL used {} where {} was expected ({}){}",
                g.used,
                g.expected,
                g.because,
                cause
                    .as_deref()
                    .map(|c| format!("; {c}"))
                    .unwrap_or_default()
            );
            Cause {
                finding: Finding::TransportFallback {
                    expected: g.expected,
                    used: g.used,
                    cause,
                },
                evidence,
            }
        })
        .collect();
    if out.is_empty() {
        out.extend(forced_fallback(path));
    }
    out
}

/// A fallback NCCL's own lines show was forced, whatever the hardware.
fn forced_fallback(path: &NcclPath) -> Vec<Cause> {
    let mut out = Vec::new();
    let net_causes = [
        CauseKind::IbDisabled,
        CauseKind::PluginMissing,
        CauseKind::NoIbDevice,
        CauseKind::NetForced,
    ];
    let net_cause = path.causes.iter().find(|c| net_causes.contains(&c.kind));
    if let (Some("Socket"), true, Some(c)) = (path.net.as_deref(), path.uses_net(), net_cause) {
        let expected = "an RDMA network (NET/IB, NET/OFI)".to_string();
        out.push(fallback(expected, "NET/Socket".into(), &c.evidence));
    }
    let p2p_off = path
        .causes_of(CauseKind::P2pDisabled)
        .chain(path.causes_of(CauseKind::P2pUnavailable))
        .next();
    if let (Some(c), true) = (p2p_off, path.transports.contains(&Transport::Shm)) {
        out.push(fallback(
            "P2P within hosts".into(),
            "SHM".into(),
            &c.evidence,
        ));
    }
    out
}

fn fallback(expected: String, used: String, cause: &str) -> Cause {
    Cause {
        evidence: format!("NCCL used {used} where {expected} was possible; {cause}"),
        finding: Finding::TransportFallback {
            expected,
            used,
            cause: Some(cause.to_string()),
        },
    }
}

/// NET connections without GDRDMA (a Socket network never has it: its
/// fallback is the cause then).
fn gdr_off(f: &Facts) -> Option<Cause> {
    let path = f.path?;
    if path.gdr != Some(false) || path.net.as_deref() == Some("Socket") {
        return None;
    }
    let evidence = match path.causes_of(CauseKind::GdrDisabled).next() {
        Some(c) => c.evidence.clone(),
        None => {
            let via = path
                .pairs
                .iter()
                .find(|p| p.transport == Transport::Net)
                .map(|p| format!(" (`via {}`)", p.via))
                .unwrap_or_default();
            format!("no NET connection says GDRDMA{via}: data crosses host memory")
        }
    };
    Some(Cause {
        finding: Finding::GdrOff,
        evidence,
    })
}

/// The GPUs whose links are below their maximum width. A lower
/// generation alone is not one: an idle GPU lowers it to save power, and
/// the facts are read after the rows (doctor's PCIe line says the same).
fn pcie_downtrained(t: &Topology) -> Option<Cause> {
    let low: Vec<(&GpuLinks, u32, u32, u32, u32)> = gpus(t)
        .iter()
        .filter_map(|g| {
            let (w, wmax) = (g.pcie_width?, g.pcie_max_width?);
            let (gen, gmax) = (g.pcie_generation?, g.pcie_max_generation?);
            (w < wmax).then_some((g, gen, gmax, w, wmax))
        })
        .collect();
    let &(g, gen, max_gen, width, max_width) = low.first()?;
    let each: Vec<String> = low
        .iter()
        .map(|(g, gen, gmax, w, wmax)| {
            format!("GPU {} x{w} of x{wmax} (gen {gen} of {gmax})", g.index)
        })
        .collect();
    Some(Cause {
        finding: Finding::PcieDowntrained {
            gpu: g.index,
            gen,
            max_gen,
            width,
            max_width,
        },
        evidence: format!(
            "NVML: {}; the link trained narrower than it can (reseat the card, check the riser)",
            each.join(", ")
        ),
    })
}

/// The GPUs with NVLink links down.
fn nvlink_inactive(t: &Topology) -> Option<Cause> {
    let down: Vec<(&GpuLinks, u32, u32)> = gpus(t)
        .iter()
        .filter_map(|g| {
            let (a, n) = (g.nvlink_active?, g.nvlink_total?);
            (a < n).then_some((g, a, n))
        })
        .collect();
    let &(g, active, total) = down.first()?;
    let each: Vec<String> = down
        .iter()
        .map(|(g, a, n)| format!("GPU {} {a} of {n}", g.index))
        .collect();
    Some(Cause {
        finding: Finding::NvlinkInactive {
            gpu: g.index,
            active,
            total,
        },
        evidence: format!("NVML: NVLink links up: {}", each.join(", ")),
    })
}

/// The GPUs whose NUMA node has none of the host's NICs (each NIC's node
/// known); the nearest NIC named is the first listed.
fn nic_other_socket(t: &Topology) -> Option<Cause> {
    let nics: Vec<(&str, i64)> = t
        .nics
        .iter()
        .filter_map(|g| Some((g, g.numa_node?)))
        .flat_map(|(g, n)| g.names.iter().map(move |name| (name.as_str(), n)))
        .collect();
    let (first_nic, nic_numa) = *nics.first()?;
    let far: Vec<(u64, i64)> = gpus(t)
        .iter()
        .filter_map(|g| Some((g.index, g.numa_node.filter(|&n| n >= 0)?)))
        .filter(|(_, n)| !nics.iter().any(|(_, m)| m == n))
        .collect();
    let &(gpu, gpu_numa) = far.first()?;
    let gpus: Vec<String> = far.iter().map(|(i, _)| i.to_string()).collect();
    let nodes: Vec<String> = nics.iter().map(|(n, m)| format!("{n} NUMA {m}")).collect();
    Some(Cause {
        finding: Finding::NicOtherSocket {
            gpu,
            gpu_numa,
            nic: first_nic.to_string(),
            nic_numa,
        },
        evidence: format!(
            "sysfs: GPU {} on NUMA {gpu_numa} and no NIC there ({}): their traffic crosses the link between sockets",
            gpus.join(", "),
            nodes.join(", ")
        ),
    })
}

/// Fewer channels than NCCL would choose: a cap in the environment
/// (`NCCL_MAX_NCHANNELS=2`, in NCCL's lines or the run's variables), or
/// fewer than the NICs a multi-host row's ranks can use (NCCL's defaults
/// give each at least one).
fn few_channels(f: &Facts) -> Option<Cause> {
    let used = f.channels?;
    let from_log = f
        .path
        .and_then(|p| p.causes_of(CauseKind::ChannelsCapped).next())
        .map(|c| (c.evidence.clone(), cap_value(&c.evidence)));
    let from_env = ["NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"]
        .iter()
        .find_map(|v| {
            let value = f.env.get(*v)?;
            Some((format!("{v}={value}"), value.trim().parse().ok()))
        });
    if let Some((line, cap)) = from_log.or(from_env) {
        if cap.is_none_or(|c: u64| used <= c) {
            return Some(Cause {
                finding: Finding::FewChannels {
                    used,
                    default: None,
                },
                evidence: format!("NCCL ran {used} channels; {line}"),
            });
        }
    }
    let t = f.topology?;
    let nics: u64 = t.nics.iter().map(|g| g.count).sum();
    let default = nics.min(t.ranks_per_host().unwrap_or(1));
    if t.hosts < 2 || f.bottleneck != Some(Bottleneck::Network) || used >= default {
        return None;
    }
    Some(Cause {
        finding: Finding::FewChannels {
            used,
            default: Some(default),
        },
        evidence: format!(
            "NCCL ran {used} channels where {default} NICs carry the row (NCCL's defaults give each NIC a channel at least)"
        ),
    })
}

/// `NCCL_MAX_NCHANNELS set by environment to 2.` -> 2.
fn cap_value(line: &str) -> Option<u64> {
    let value = line.rsplit(" to ").next()?;
    value.trim().trim_end_matches('.').parse().ok()
}

fn gpus(t: &Topology) -> &[GpuLinks] {
    t.gpu.as_ref().map_or(&[], |g| g.devices.as_slice())
}

#[cfg(test)]
#[path = "why_tests.rs"]
pub(crate) mod tests;
