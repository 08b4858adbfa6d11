//! collbench-ceiling: "is my busbw normal?". For a topology (found by a
//! probe or described in a file), an op, a size, a placement and an
//! algorithm, the busbw the hardware allows and the part that sets it
//! (NVLink, Infinity Fabric, NVLS, PCIe, network, host memory). docs/ceiling.md gives the
//! formulas and their sources.
//!
//! Modules: [`links`] (the bandwidths a topology offers), `model` (GPU
//! formulas per algorithm), `mesh` (GPUs joined point to point without a
//! switch), `choice` (the algorithms NCCL may pick),
//! `pcie` and [`fabric`] (hosts without NVLink), `cpu` (the CPU backend's
//! memory traffic), `bound` and `layout` (what the formulas share),
//! [`mod@file`] (topology TOML), [`builtin`] (topologies/ built in),
//! [`probe`] (memory and loopback probes),
//! [`split`] (nccl-tests' split communicators), [`published`] (vendors'
//! and the anchors' figures the model is held to),
//! [`mod@annotate`] (a record's rows get their ceilings), [`expect`] (`collbench
//! expect`'s text and JSON).
//!
//! Not for: finding GPUs or NICs (`doctor` does, through NVML and sysfs),
//! printing, deciding verdicts.
#![forbid(unsafe_code)]

pub mod annotate;
mod bound;
pub mod builtin;
mod choice;
mod cpu;
pub mod expect;
pub mod fabric;
pub mod file;
mod layout;
pub mod links;
mod mesh;
mod model;
mod pcie;
pub mod probe;
pub mod published;
pub mod split;

use collbench_core::{Algorithm, Ceiling, Collective, Topology};

pub use annotate::{annotate, annotate_described, annotate_with};
pub use fabric::HostFabric;
pub use file::{load, FileError};
pub use probe::CopyLevel;

/// Why a row has no ceiling: the input the model lacked, in words
/// ("NIC rate unknown"). Not an error: the row is shown as "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Missing(pub &'static str);

/// What a ceiling is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Query {
    pub op: Collective,
    /// The size column, bytes.
    pub bytes: u64,
    pub in_place: bool,
    /// The algorithm NCCL reported for the row (`--explain`), if any.
    pub algorithm: Option<Algorithm>,
}

/// The ceiling of `q` on `topo`: the CPU model where the topology has no
/// GPUs but a memory bandwidth, the GPU model otherwise.
pub fn ceiling(topo: &Topology, q: &Query) -> Result<Ceiling, Missing> {
    ceiling_with(topo, q, &[])
}

/// [`ceiling`] with the cache levels a CPU run's probe measured
/// ([`probe::cache_copy_levels`]): a CPU row whose buffers fit one is
/// bounded by its rate, not host memory's.
pub fn ceiling_with(topo: &Topology, q: &Query, levels: &[CopyLevel]) -> Result<Ceiling, Missing> {
    ceiling_in(topo, &HostFabric::default(), q, levels)
}

/// [`ceiling_with`] on a machine whose PCIe fabric is described
/// ([`HostFabric`], a topology file's `[pcie]` table): a host without
/// NVLink is then also bounded by what its GPUs share (switch uplinks,
/// the link between sockets, host memory where they cannot do
/// peer-to-peer).
pub fn ceiling_in(
    topo: &Topology,
    fabric: &HostFabric,
    q: &Query,
    levels: &[CopyLevel],
) -> Result<Ceiling, Missing> {
    if topo.gpu.is_none() && topo.cpu.is_some() {
        let ranks = topo.hosts.max(1) * topo.ranks_per_host().unwrap_or(1);
        if topo.hosts > 1 {
            return Err(Missing("CPU ranks over several hosts: network unknown"));
        }
        return cpu::cpu_ceiling(topo, q, ranks, levels);
    }
    let m = layout::Machine { topo, fabric };
    model::gpu_ceiling(m, q.op, q.bytes, q.algorithm)
}
