//! The transport gate: the path NCCL took against the path a user requires
//! (`--require-transport ib,p2p`) or the path the machine's hardware
//! implies (RDMA NICs present: the network must not be Socket; NVLink up:
//! P2P must not be off). A failure names what was expected, what NCCL
//! used, and the cause seen.

use super::{CauseKind, NcclPath, Transport};
use crate::topology::{NicKind, Topology};
use crate::ParseError;
use std::collections::BTreeMap;
use std::fmt;

/// A path a user can require, in NCCL's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Required {
    /// NCCL's IB plugin (InfiniBand or RoCE).
    Ib,
    /// NCCL's IB plugin over RoCE NICs.
    Roce,
    /// NCCL's TCP socket transport.
    Socket,
    /// aws-ofi-nccl (EFA and other libfabric providers).
    Ofi,
    /// Google's GPUDirect-TCPX plugin.
    Tcpx,
    /// Google's GPUDirect-TCPXO (FasTrak) plugin.
    Tcpxo,
    /// GPU-to-GPU P2P within a host.
    P2p,
    /// Host shared memory within a host.
    Shm,
    /// NVLink SHARP multicast.
    Nvls,
    /// In-network reduction through a CollNet plugin.
    CollNet,
    /// GPUDirect RDMA on NET connections.
    Gdr,
}

impl Required {
    /// Every requirement, in `--help` order, with its flag spelling.
    pub const ALL: [(Required, &'static str); 11] = [
        (Required::Ib, "ib"),
        (Required::Roce, "roce"),
        (Required::Socket, "socket"),
        (Required::Ofi, "ofi"),
        (Required::Tcpx, "tcpx"),
        (Required::Tcpxo, "tcpxo"),
        (Required::P2p, "p2p"),
        (Required::Shm, "shm"),
        (Required::Nvls, "nvls"),
        (Required::CollNet, "collnet"),
        (Required::Gdr, "gdr"),
    ];

    /// Parses one name (`ib`, `efa` as `ofi`, case-insensitive).
    pub fn parse(s: &str) -> Result<Required, ParseError> {
        let lower = s.trim().to_ascii_lowercase();
        let lower = match lower.as_str() {
            "efa" | "libfabric" => "ofi",
            "infiniband" => "ib",
            "gpudirecttcpx" => "tcpx",
            "gpudirecttcpxo" | "fastrak" => "tcpxo",
            "gdrdma" => "gdr",
            other => other,
        };
        Required::ALL
            .iter()
            .find(|(_, name)| *name == lower)
            .map(|(r, _)| *r)
            .ok_or_else(|| ParseError::Unknown {
                what: "transport",
                value: s.to_string(),
                expected: Required::ALL
                    .iter()
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// What the requirement reads as in a finding (`NET/IB`).
    pub fn expected(self) -> &'static str {
        match self {
            Required::Ib => "NET/IB",
            Required::Roce => "NET/IB over RoCE",
            Required::Socket => "NET/Socket",
            Required::Ofi => "NET/OFI (aws-ofi-nccl)",
            Required::Tcpx => "NET/GPUDirectTCPX",
            Required::Tcpxo => "NET/GPUDirectTCPXO",
            Required::P2p => "P2P within hosts",
            Required::Shm => "SHM within hosts",
            Required::Nvls => "NVLS",
            Required::CollNet => "CollNet",
            Required::Gdr => "GPUDirect RDMA on NET",
        }
    }

    fn net(self) -> Option<&'static str> {
        match self {
            Required::Ib | Required::Roce => Some("IB"),
            Required::Socket => Some("Socket"),
            Required::Ofi => Some("OFI"),
            Required::Tcpx => Some("GPUDirectTCPX"),
            Required::Tcpxo => Some("GPUDirectTCPXO"),
            _ => None,
        }
    }

    /// Whether NCCL's printed network name is this plugin or a build of it
    /// (`IBext_v8`: the SHARP plugin's IB; `GPUDirectTCPX_v7`; `FasTrak`:
    /// TCPXO).
    fn names(self, net: &str) -> bool {
        match self {
            Required::Ib | Required::Roce => net == "IB" || net.starts_with("IBext"),
            Required::Tcpx => {
                net.starts_with("GPUDirectTCPX") && !net.starts_with("GPUDirectTCPXO")
            }
            Required::Tcpxo => net.starts_with("GPUDirectTCPXO") || net.starts_with("FasTrak"),
            other => other.net() == Some(net),
        }
    }

    /// Causes that explain a path without this requirement.
    fn causes(self) -> &'static [CauseKind] {
        match self {
            Required::Ib | Required::Roce | Required::Ofi | Required::Tcpx | Required::Tcpxo => &[
                CauseKind::IbDisabled,
                CauseKind::NetForced,
                CauseKind::PluginMissing,
                CauseKind::NoIbDevice,
                CauseKind::NicChoice,
            ],
            Required::Socket => &[CauseKind::NetForced],
            Required::P2p => &[CauseKind::P2pDisabled, CauseKind::P2pUnavailable],
            Required::Shm => &[CauseKind::ShmDisabled],
            Required::Nvls => &[CauseKind::NvlsDisabled],
            Required::CollNet => &[],
            Required::Gdr => &[CauseKind::GdrDisabled],
        }
    }

    /// Whether `path` meets the requirement.
    fn met_by(self, path: &NcclPath) -> bool {
        if self.net().is_some() {
            let layer_ok = self != Required::Roce || path.link_layers.contains("RoCE");
            return path.net.as_deref().is_some_and(|n| self.names(n)) && layer_ok;
        }
        match self {
            Required::P2p => path.transports.contains(&Transport::P2p),
            Required::Shm => path.transports.contains(&Transport::Shm),
            Required::Nvls => path.transports.contains(&Transport::Nvls) || path.nvls == Some(true),
            Required::CollNet => path.transports.contains(&Transport::CollNet),
            Required::Gdr => path.gdr == Some(true),
            _ => false,
        }
    }

    /// What `path` shows where this requirement looks.
    fn used(self, path: &NcclPath) -> String {
        if self.net().is_some() {
            return match &path.net {
                Some(net) if path.link_layers.is_empty() => format!("NET/{net}"),
                Some(net) => format!(
                    "NET/{net} ({})",
                    path.link_layers
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "no network named".into(),
            };
        }
        match self {
            Required::Gdr => match path.gdr {
                Some(false) => "NET without GDRDMA".into(),
                _ => "no NET connection".into(),
            },
            _ => {
                let seen: Vec<&str> = path.transports.iter().map(|t| t.name()).collect();
                if seen.is_empty() {
                    "no connection named".into()
                } else {
                    seen.join(", ")
                }
            }
        }
    }
}

/// A path that does not meet what was required or implied.
#[derive(Debug, Clone, PartialEq)]
pub struct GateFailure {
    /// What was required (`NET/IB`).
    pub expected: String,
    /// What NCCL used (`NET/Socket`).
    pub used: String,
    /// Why it was expected: `required` (a flag) or the hardware seen.
    pub because: String,
    /// Causes seen in NCCL's lines or the environment, for people.
    pub causes: Vec<String>,
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transport: expected {} ({}), NCCL used {}",
            self.expected, self.because, self.used
        )?;
        if self.causes.is_empty() {
            write!(f, "; no cause in NCCL's lines")
        } else {
            // NCCL's sentences end in a full stop; the list has its own
            // separators ("set by environment to 1.; NET/Plugin" read badly).
            let causes: Vec<&str> = self
                .causes
                .iter()
                .map(|c| c.trim_end().trim_end_matches('.'))
                .collect();
            write!(f, "; cause: {}", causes.join("; "))
        }
    }
}

/// Judges `path` against `required`; `env` is the run's NCCL_* settings,
/// searched for causes beside NCCL's own lines.
pub fn require(
    path: &NcclPath,
    required: &[Required],
    env: &BTreeMap<String, String>,
) -> Vec<GateFailure> {
    required
        .iter()
        .filter(|r| !r.met_by(path))
        .map(|r| failure(path, *r, "required", env))
        .collect()
}

/// What the hardware implies: RDMA NICs on a multi-host job mean the
/// network must not be Socket; active NVLink means P2P must be used where
/// a host has more than one rank.
pub fn implied(
    path: &NcclPath,
    topology: &Topology,
    env: &BTreeMap<String, String>,
) -> Vec<GateFailure> {
    let mut out = Vec::new();
    let rdma = topology.nics.iter().find_map(|g| match g.kind {
        NicKind::Infiniband => Some((Required::Ib, "InfiniBand NICs on the hosts")),
        NicKind::Roce => Some((Required::Ib, "RoCE NICs on the hosts")),
        NicKind::Efa => Some((Required::Ofi, "EFA devices on the hosts")),
        _ => None,
    });
    if let Some((req, why)) = rdma {
        if topology.hosts > 1 && path.uses_net() && !req.met_by(path) {
            out.push(failure(path, req, why, env));
        }
    }
    let nvlink = topology
        .gpu
        .as_ref()
        .is_some_and(|g| g.nvlink_links.unwrap_or(0) > 0 && g.count > 1);
    let within = path.transports.contains(&Transport::Shm)
        || path.causes_of(CauseKind::P2pDisabled).next().is_some()
        || path.causes_of(CauseKind::P2pUnavailable).next().is_some();
    if nvlink && within && !Required::P2p.met_by(path) {
        out.push(failure(path, Required::P2p, "NVLink is up", env));
    }
    out
}

fn failure(
    path: &NcclPath,
    req: Required,
    because: &str,
    env: &BTreeMap<String, String>,
) -> GateFailure {
    let kinds = req.causes();
    let mut causes: Vec<String> = path
        .causes
        .iter()
        .filter(|c| kinds.contains(&c.kind))
        .map(|c| c.evidence.clone())
        .collect();
    for (var, kind) in ENV_CAUSES {
        if kinds.contains(&kind) {
            if let Some(value) = env.get(var) {
                let line = format!("{var}={value}");
                if !causes.iter().any(|c| c.starts_with(var)) {
                    causes.push(line);
                }
            }
        }
    }
    GateFailure {
        expected: req.expected().into(),
        used: req.used(path),
        because: because.into(),
        causes,
    }
}

/// Variables of a run's environment that explain a path.
const ENV_CAUSES: [(&str, CauseKind); 8] = [
    ("NCCL_IB_DISABLE", CauseKind::IbDisabled),
    ("NCCL_NET", CauseKind::NetForced),
    ("NCCL_NET_PLUGIN", CauseKind::PluginMissing),
    ("NCCL_P2P_DISABLE", CauseKind::P2pDisabled),
    ("NCCL_P2P_LEVEL", CauseKind::P2pDisabled),
    ("NCCL_SHM_DISABLE", CauseKind::ShmDisabled),
    ("NCCL_NVLS_ENABLE", CauseKind::NvlsDisabled),
    ("NCCL_NET_GDR_LEVEL", CauseKind::GdrDisabled),
];
