//! The path NCCL really took: which network plugin carried traffic between
//! hosts, which transport each pair of ranks used within and across hosts
//! (P2P and how, SHM, NET, NVLS, CollNet), whether GPUDirect RDMA and PXN
//! were used, and what in the environment or the machine forced a fallback.
//!
//! The facts come from NCCL itself: the lines it prints at `NCCL_DEBUG=INFO`
//! (`Using network IB`, `Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA`,
//! `NCCL_IB_DISABLE set by environment to 1.`). [`NcclPath::from_lines`]
//! reads them from any text that holds them: a collbench run's private
//! capture, an nccl-tests or rccl-tests log, a training job's log. Lines of
//! other programs, launcher tags and timestamps in front of NCCL's text are
//! ignored; memory is bounded whatever the log's size ([`MAX_PAIRS`]).
//!
//! [`gate`] judges a path against what a user requires
//! (`--require-transport`) or what the machine's hardware implies.

pub mod gate;
mod lines;
mod parse;

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Rank pairs kept per path (distinct `from -> to via` triples). A 1024-rank
/// job prints tens of thousands of channel lines; the kinds and counts stay
/// exact beyond this, the pair list is marked truncated.
pub const MAX_PAIRS: usize = 4096;

/// Causes kept (each with its evidence line).
pub const MAX_CAUSES: usize = 32;

/// A kind of connection NCCL sets up between two ranks: the word after
/// `via` in its channel lines.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Transport {
    /// GPU to GPU within a host (NVLink or PCIe): `via P2P/...`.
    #[serde(rename = "P2P")]
    P2p,
    /// Through host shared memory: `via SHM/...`.
    #[serde(rename = "SHM")]
    Shm,
    /// Through a network plugin (IB, Socket, OFI, TCPX, ...): `via NET/...`.
    #[serde(rename = "NET")]
    Net,
    /// NVLink SHARP multicast (`via NVLS`, `Connected NVLS`).
    #[serde(rename = "NVLS")]
    Nvls,
    /// In-network reduction (SHARP) through a CollNet plugin.
    #[serde(rename = "COLLNET")]
    CollNet,
}

impl Transport {
    /// NCCL's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Transport::P2p => "P2P",
            Transport::Shm => "SHM",
            Transport::Net => "NET",
            Transport::Nvls => "NVLS",
            Transport::CollNet => "COLLNET",
        }
    }

    /// The kind named by the first word of a `via` text (`P2P/CUMEM`).
    pub fn from_via(via: &str) -> Option<Transport> {
        // NCCL 2.6-2.7: `via direct shared memory`.
        if via.contains("shared memory") {
            return Some(Transport::Shm);
        }
        let head = via.split('/').next()?.trim();
        match head.to_ascii_uppercase().as_str() {
            "P2P" => Some(Transport::P2p),
            "SHM" => Some(Transport::Shm),
            "NET" => Some(Transport::Net),
            "NVLS" | "NVLSTREE" => Some(Transport::Nvls),
            "COLLNET" | "COLLNETDIRECT" | "COLLNETCHAIN" => Some(Transport::CollNet),
            _ => None,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One pair of ranks and how NCCL connected them (one channel's line; the
/// same pair over several channels is kept once per distinct `via`).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct PairPath {
    /// Sending rank.
    pub from: u64,
    /// Receiving rank.
    pub to: u64,
    /// The kind of connection.
    pub transport: Transport,
    /// NCCL's full text after `via` (`NET/IB/0/GDRDMA`, `P2P/CUMEM/read`).
    pub via: String,
}

/// What in the environment or on the machine decided a path, with the
/// line that shows it.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Cause {
    /// The kind of cause.
    pub kind: CauseKind,
    /// NCCL's line (its text after `NCCL INFO`/`NCCL WARN`, cut to 200
    /// characters), or the variable as the record's environment holds it.
    pub evidence: String,
}

/// Causes of a path other than the fastest the hardware offers.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// `NCCL_IB_DISABLE=1`: the IB/RoCE plugin is off.
    IbDisabled,
    /// `NCCL_NET=...` names the network plugin to use.
    NetForced,
    /// An external network plugin (`libnccl-net.so`, aws-ofi-nccl, TCPX)
    /// could not be loaded.
    PluginMissing,
    /// NCCL's IB plugin found no device (or could not open libibverbs).
    NoIbDevice,
    /// `NCCL_P2P_DISABLE=1` (or `NCCL_P2P_LEVEL` too low): GPU traffic
    /// within a host goes through host memory.
    P2pDisabled,
    /// The driver reports no peer access between two GPUs (NCCL's "Could
    /// not enable P2P between dev ..." after `cudaDeviceCanAccessPeer`):
    /// ACS or the IOMMU on the PCIe path, GPUs under different root
    /// complexes, or GPUs whose driver offers no P2P. NCCL then goes
    /// through host memory (SHM) whatever the environment says.
    P2pUnavailable,
    /// `NCCL_SHM_DISABLE=1`.
    ShmDisabled,
    /// `NCCL_NVLS_ENABLE=0`, or NVLS reported unavailable.
    NvlsDisabled,
    /// GPUDirect RDMA off: `NCCL_NET_GDR_LEVEL` too low, NCCL's "GPU
    /// Direct RDMA Disabled", no peer-memory or DMA-BUF support.
    GdrDisabled,
    /// `NCCL_CROSS_NIC`, `NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME` and other
    /// choices of NIC.
    NicChoice,
    /// `NCCL_MAX_NCHANNELS` or `NCCL_MAX_CTAS`: fewer channels than NCCL
    /// would choose.
    ChannelsCapped,
}

impl CauseKind {
    /// Words for people.
    pub fn about(self) -> &'static str {
        match self {
            CauseKind::IbDisabled => "NCCL_IB_DISABLE=1 turns the IB/RoCE plugin off",
            CauseKind::NetForced => "NCCL_NET names the network plugin",
            CauseKind::PluginMissing => "the network plugin could not be loaded",
            CauseKind::NoIbDevice => "NCCL's IB plugin found no usable device",
            CauseKind::P2pDisabled => "NCCL_P2P_DISABLE/NCCL_P2P_LEVEL keep GPUs from P2P",
            CauseKind::P2pUnavailable => {
                "the driver offers no P2P between these GPUs (ACS, IOMMU, root complexes or the GPU)"
            }
            CauseKind::ShmDisabled => "NCCL_SHM_DISABLE=1",
            CauseKind::NvlsDisabled => "NVLS is off or unavailable",
            CauseKind::GdrDisabled => "GPUDirect RDMA is off",
            CauseKind::NicChoice => "the NICs NCCL may use are narrowed by the environment",
            CauseKind::ChannelsCapped => "NCCL_MAX_NCHANNELS/NCCL_MAX_CTAS cap NCCL's channels",
        }
    }
}

/// The path NCCL took, as far as its lines tell. Every fact a log could not
/// tell is `None` or empty, never guessed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcclPath {
    /// NCCL's version (`2.21.5`), from `NCCL version 2.21.5+cuda12.4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The network plugin between hosts, normalised: `IB`, `Socket`, `OFI`
    /// (aws-ofi-nccl, "AWS Libfabric"), `GPUDirectTCPX`, `GPUDirectTCPXO`,
    /// or the name NCCL printed for another plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<String>,
    /// Link layers of the NICs NCCL listed (`IB`, `RoCE`), and OFI's
    /// provider (`efa`), where printed.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub link_layers: BTreeSet<String>,
    /// The NICs NCCL's network plugin said it uses (`mlx5_0:1`, `eth0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<String>,
    /// GPUDirect RDMA: `true` when a NET connection says `GDRDMA`, `false`
    /// when NET connections exist and none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdr: Option<bool>,
    /// PXN (a NET connection proxied through another GPU's NIC: `NET/IB/0(1)`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pxn: bool,
    /// Every kind of connection seen.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub transports: BTreeSet<Transport>,
    /// How P2P connections were made: `CUMEM`, `IPC`, `direct`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub p2p_kinds: BTreeSet<String>,
    /// NVLS multicast: `true` when NCCL said it is available or connected
    /// NVLS, `false` when it said it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvls: Option<bool>,
    /// Pairs of ranks and their connection (at most [`MAX_PAIRS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairPath>,
    /// More distinct pairs were seen than [`MAX_PAIRS`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pairs_truncated: bool,
    /// What decided the path, with evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// Channels NCCL set up for collectives: `24 coll channels, ...`
    /// (NCCL 2.12 and later), else the count in its ring lines
    /// (`Channel 00/04 :    0   1`). The largest over the log's
    /// communicators: a job's smaller sub-communicators do not hide its
    /// main one. The graph search's `nChannels 1` is not read: NCCL
    /// doubles its result afterwards, so it undercounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<u64>,
    /// NCCL INFO/WARN lines read.
    pub nccl_lines: u64,
}

impl NcclPath {
    /// Reads NCCL's lines out of any text; `None` when it holds none.
    pub fn from_text(text: &str) -> Option<NcclPath> {
        NcclPath::from_lines(text.lines())
    }

    /// Reads NCCL's lines out of a sequence of lines (other lines are
    /// skipped); `None` when it holds none.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<NcclPath> {
        let mut reader = parse::Reader::default();
        for line in lines {
            reader.line(line);
        }
        reader.finish()
    }

    /// Whether some NET connection crossed hosts.
    pub fn uses_net(&self) -> bool {
        self.transports.contains(&Transport::Net)
    }

    /// One line for people: `NET/IB (RoCE, GDRDMA, PXN) between hosts; P2P/CUMEM,
    /// SHM within; NVLS`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(net) = &self.net {
            let mut how: Vec<String> = self.link_layers.iter().cloned().collect();
            match self.gdr {
                Some(true) => how.push("GDRDMA".into()),
                Some(false) => how.push("no GDRDMA".into()),
                None => {}
            }
            if self.pxn {
                how.push("PXN".into());
            }
            let how = if how.is_empty() {
                String::new()
            } else {
                format!(" ({})", how.join(", "))
            };
            let used = if self.uses_net() {
                ""
            } else {
                ", no NET connection seen"
            };
            parts.push(format!("NET/{net}{how}{used}"));
        }
        let mut within = Vec::new();
        if self.transports.contains(&Transport::P2p) {
            if self.p2p_kinds.is_empty() {
                within.push("P2P".to_string());
            } else {
                let kinds: Vec<&str> = self.p2p_kinds.iter().map(String::as_str).collect();
                within.push(format!("P2P/{}", kinds.join("+")));
            }
        }
        if self.transports.contains(&Transport::Shm) {
            within.push("SHM".into());
        }
        if !within.is_empty() {
            parts.push(within.join(", "));
        }
        if self.transports.contains(&Transport::Nvls) || self.nvls == Some(true) {
            parts.push("NVLS".into());
        }
        if self.transports.contains(&Transport::CollNet) {
            parts.push("CollNet".into());
        }
        if parts.is_empty() {
            return format!("{} NCCL lines, no path named", self.nccl_lines);
        }
        parts.join("; ")
    }

    /// Joins the path another process saw (its own ranks' connections)
    /// into this one: sets are united, a fact one side knows is kept, and
    /// the bounds hold.
    pub fn merge(&mut self, other: NcclPath) {
        let other_uses_net = other.uses_net();
        self.version = self.version.take().or(other.version);
        if self.net.is_none() || (!self.uses_net() && other_uses_net) {
            self.net = other.net.or(self.net.take());
        }
        self.link_layers.extend(other.link_layers);
        for nic in other.nics {
            if !self.nics.contains(&nic) {
                self.nics.push(nic);
            }
        }
        self.gdr = match (self.gdr, other.gdr) {
            (Some(a), Some(b)) => Some(a || b),
            (a, b) => a.or(b),
        };
        self.pxn |= other.pxn;
        self.transports.extend(other.transports);
        self.p2p_kinds.extend(other.p2p_kinds);
        self.nvls = match (self.nvls, other.nvls) {
            (Some(a), Some(b)) => Some(a || b),
            (a, b) => a.or(b),
        };
        let mut pairs: BTreeSet<PairPath> = std::mem::take(&mut self.pairs).into_iter().collect();
        for p in other.pairs {
            if pairs.len() >= MAX_PAIRS {
                self.pairs_truncated = true;
                break;
            }
            pairs.insert(p);
        }
        self.pairs = pairs.into_iter().collect();
        self.pairs_truncated |= other.pairs_truncated;
        let mut causes: BTreeSet<Cause> = std::mem::take(&mut self.causes).into_iter().collect();
        causes.extend(other.causes);
        self.causes = causes.into_iter().take(MAX_CAUSES).collect();
        self.nccl_lines = self.nccl_lines.saturating_add(other.nccl_lines);
        self.channels = self.channels.max(other.channels);
    }

    /// The causes of one kind.
    pub fn causes_of(&self, kind: CauseKind) -> impl Iterator<Item = &Cause> {
        self.causes.iter().filter(move |c| c.kind == kind)
    }
}

/// Where two paths differ, for `compare`: each entry a short sentence
/// (`network IB -> Socket`), first the ones that move speed most.
pub fn differences(base: &NcclPath, new: &NcclPath) -> Vec<String> {
    let mut out = Vec::new();
    if base.net != new.net && base.net.is_some() && new.net.is_some() {
        out.push(format!(
            "network {} -> {}",
            base.net.as_deref().unwrap_or("?"),
            new.net.as_deref().unwrap_or("?")
        ));
    }
    if let (Some(a), Some(b)) = (base.gdr, new.gdr) {
        if a != b {
            out.push(format!("GPUDirect RDMA {} -> {}", on_off(a), on_off(b)));
        }
    }
    for t in base.transports.symmetric_difference(&new.transports) {
        let (from, to) = if base.transports.contains(t) {
            ("used", "not used")
        } else {
            ("not used", "used")
        };
        out.push(format!("{t} {from} -> {to}"));
    }
    if base.p2p_kinds != new.p2p_kinds && !base.p2p_kinds.is_empty() && !new.p2p_kinds.is_empty() {
        out.push(format!(
            "P2P kind {} -> {}",
            join(&base.p2p_kinds),
            join(&new.p2p_kinds)
        ));
    }
    if base.pxn != new.pxn {
        out.push(format!("PXN {} -> {}", on_off(base.pxn), on_off(new.pxn)));
    }
    if base.link_layers != new.link_layers
        && !base.link_layers.is_empty()
        && !new.link_layers.is_empty()
    {
        out.push(format!(
            "link layer {} -> {}",
            join(&base.link_layers),
            join(&new.link_layers)
        ));
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join("+")
}

#[cfg(test)]
mod tests;
