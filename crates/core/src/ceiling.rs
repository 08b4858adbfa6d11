//! A row's physical ceiling as data: the busbw the hardware allows for an
//! op, size, layout and algorithm, and the part that sets it. The model
//! that computes it lives in `collbench-ceiling`; records, printers and
//! checks only carry and show it.

use serde::{Deserialize, Serialize};

/// The resource that bounds a row's busbw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// GPU-to-GPU NVLink (through NVSwitch or direct).
    Nvlink,
    /// GPU-to-GPU AMD Infinity Fabric (xGMI) links, joined without a switch.
    Xgmi,
    /// NVLink SHARP: the switch's multicast and reduction.
    Nvls,
    /// The GPU's PCIe link (no NVLink between the GPUs).
    Pcie,
    /// The host's NICs and the network behind them.
    Network,
    /// Host memory bandwidth (the CPU backend's ranks copy through it).
    HostMemory,
}

impl Bottleneck {
    /// The name people read in tables (`NVLink`, `host memory`).
    pub fn label(self) -> &'static str {
        match self {
            Bottleneck::Nvlink => "NVLink",
            Bottleneck::Xgmi => "Infinity Fabric",
            Bottleneck::Nvls => "NVLS",
            Bottleneck::Pcie => "PCIe",
            Bottleneck::Network => "network",
            Bottleneck::HostMemory => "host memory",
        }
    }

    /// The snake_case name used in JSON and CSV.
    pub fn key(self) -> &'static str {
        match self {
            Bottleneck::Nvlink => "nvlink",
            Bottleneck::Xgmi => "xgmi",
            Bottleneck::Nvls => "nvls",
            Bottleneck::Pcie => "pcie",
            Bottleneck::Network => "network",
            Bottleneck::HostMemory => "host_memory",
        }
    }
}

/// How the data moves, as NCCL names its algorithms (plus the CPU
/// backend's and point-to-point patterns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    Ring,
    Tree,
    Nvls,
    NvlsTree,
    CollnetDirect,
    CollnetChain,
    Pat,
    /// Point-to-point sends (alltoall, sendrecv).
    P2p,
    /// The CPU backend: rank threads copying through host memory.
    CpuCopy,
}

impl Algorithm {
    /// The algorithm NCCL reported for a placement: its first collective
    /// (not point-to-point) kernel's, where `--explain` recorded one.
    pub fn reported(explain: Option<&crate::Explanation>) -> Option<Algorithm> {
        explain
            .and_then(|e| e.kernels.iter().find(|k| !k.is_p2p()))
            .and_then(|k| Algorithm::from_nccl(&k.algo))
    }

    /// Reads NCCL's algorithm name as `--explain` records it (`RING`,
    /// `NVLS_TREE`, `CollNetDirect`); `None` for names it does not model.
    pub fn from_nccl(name: &str) -> Option<Algorithm> {
        let n: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        Some(match n.as_str() {
            "ring" => Algorithm::Ring,
            "tree" => Algorithm::Tree,
            "nvls" => Algorithm::Nvls,
            "nvlstree" => Algorithm::NvlsTree,
            "collnetdirect" => Algorithm::CollnetDirect,
            "collnetchain" => Algorithm::CollnetChain,
            "pat" => Algorithm::Pat,
            "p2p" | "sendrecv" => Algorithm::P2p,
            _ => return None,
        })
    }

    /// The name people read (`ring`, `NVLS tree`).
    pub fn label(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Nvls => "NVLS",
            Algorithm::NvlsTree => "NVLS tree",
            Algorithm::CollnetDirect => "CollNet direct",
            Algorithm::CollnetChain => "CollNet chain",
            Algorithm::Pat => "PAT",
            Algorithm::P2p => "p2p",
            Algorithm::CpuCopy => "cpu copy",
        }
    }
}

/// One placement's ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ceiling {
    /// The highest busbw the hardware allows, GB/s.
    pub busbw_gbps: f64,
    /// The part that sets it.
    pub bottleneck: Bottleneck,
    /// The algorithm the bound is for (NCCL's report where there was one,
    /// else the best candidate).
    pub algorithm: Algorithm,
    /// Why, in one line (formula and inputs), for people.
    pub why: String,
}

impl Ceiling {
    /// `busbw` as a percentage of this ceiling.
    pub fn percent_of(&self, busbw_gbps: f64) -> f64 {
        if self.busbw_gbps > 0.0 {
            100.0 * busbw_gbps / self.busbw_gbps
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_names_read_whatever_their_case() {
        assert_eq!(Algorithm::from_nccl("NVLS_TREE"), Some(Algorithm::NvlsTree));
        assert_eq!(Algorithm::from_nccl("Ring"), Some(Algorithm::Ring));
        assert_eq!(
            Algorithm::from_nccl("CollNetDirect"),
            Some(Algorithm::CollnetDirect)
        );
        assert_eq!(Algorithm::from_nccl("bogus"), None);
    }
}
