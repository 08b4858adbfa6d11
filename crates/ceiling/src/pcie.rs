//! The bound inside a host whose GPUs have no NVLink: each GPU's PCIe
//! link, and what the GPUs share behind it ([`HostFabric`]): a PCIe
//! switch's link to the CPU, the link between the sockets, and, where the
//! GPUs cannot reach each other peer-to-peer, host memory (NCCL's SHM
//! transport writes every byte to host memory and the next GPU reads it
//! back). docs/ceiling.md derives each.
//!
//! Where the ranks could sit on fewer switches or sockets than the host
//! has (a job on 4 of 8 GPUs), the bound takes the placement that shares
//! least: a ceiling must not sit under what a placement reaches.

use crate::bound::{gb, min, Bound};
use crate::fabric::HostFabric;
use crate::links::{pcie_payload_gbps, IntraLink};
use collbench_core::{Bottleneck, Topology};

/// How the ranks of a host send to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// Each rank sends its busbw bytes to one neighbour (ring, chain,
    /// sendrecv): a ring crosses a boundary once each way.
    Ring,
    /// Each rank sends to every other (alltoall): a group of k of g ranks
    /// sends k(g-k)/g of its bytes across its boundary.
    Spread,
}

/// The bound on busbw of `g` ranks of one host reaching each other through
/// PCIe: the GPU's own link (`link`), and the fabric's shared parts where
/// `fabric` tells them.
pub(crate) fn host_bound(
    topo: &Topology,
    fabric: &HostFabric,
    link: &IntraLink,
    pattern: Pattern,
    g: u64,
) -> Bound {
    let own = Bound {
        gbps: link.gbps,
        by: Bottleneck::Pcie,
        why: format!(
            "each rank's bytes cross its own PCIe link once per busbw byte: busbw <= {:.1} GB/s ({})",
            link.gbps, link.how
        ),
    };
    let count = topo.gpu.as_ref().map_or(g, |gpu| gpu.count.max(g));
    let shared = [
        memory(topo, fabric, g),
        uplink(fabric, pattern, g),
        sockets(fabric, pattern, g, count),
    ];
    shared.into_iter().flatten().fold(own, min)
}

/// Share of a rank's busbw bytes that cross a boundary around `k` of `g`
/// ranks, per rank of the group, over the boundary's rate: busbw <= rate
/// x this factor.
fn crossing_factor(pattern: Pattern, k: f64, g: f64) -> f64 {
    match pattern {
        Pattern::Ring => 1.0,
        Pattern::Spread => (g - 1.0) / (k * (g - k)),
    }
}

/// SHM: without peer-to-peer each busbw byte of each rank is written to
/// host memory once and read once, so memory carries 2g bytes per busbw
/// byte, and moves 2 x its copy rate of traffic.
fn memory(topo: &Topology, fabric: &HostFabric, g: u64) -> Option<Bound> {
    if fabric.p2p != Some(false) || g < 2 {
        return None;
    }
    let copy = topo.cpu.as_ref().and_then(|c| c.mem_copy_gbps)?;
    Some(Bound {
        gbps: copy / g as f64,
        by: Bottleneck::HostMemory,
        why: format!(
            "no peer-to-peer between the GPUs (NVML P2P status), so NCCL's SHM transport writes every byte to host memory and the next GPU reads it back: \
             memory carries 2 x {g} bytes per busbw byte and moves 2 x {} GB/s: busbw <= {} / {g}",
            gb(copy),
            gb(copy)
        ),
    })
}

/// A PCIe switch's link to the CPU, where the ranks cannot all sit behind
/// one switch: a ring crosses it once each way; SHM sends every rank's
/// bytes through it, both ways.
fn uplink(fabric: &HostFabric, pattern: Pattern, g: u64) -> Option<Bound> {
    let k = fabric.gpus_per_switch.filter(|&k| k > 1)?;
    let rate = pcie_payload_gbps(fabric.uplink_generation?, fabric.uplink_width?)?;
    let (gbps, how) = if fabric.p2p == Some(false) {
        (
            rate / k.min(g) as f64,
            format!(
                "SHM sends each of the switch's {} ranks' bytes up it and back",
                k.min(g)
            ),
        )
    } else if g > k {
        (
            rate * crossing_factor(pattern, k as f64, g as f64),
            format!("{g} ranks cannot sit behind one switch of {k}, so traffic crosses its uplink"),
        )
    } else {
        return None;
    };
    Some(Bound {
        gbps,
        by: Bottleneck::Pcie,
        why: format!(
            "PCIe switch uplink gen{} x{} ({:.1} GB/s of payload): {how}: busbw <= {:.1} GB/s",
            fabric.uplink_generation.unwrap_or(0),
            fabric.uplink_width.unwrap_or(0),
            rate,
            gbps
        ),
    })
}

/// The link between the sockets, where the ranks cannot all sit on one.
fn sockets(fabric: &HostFabric, pattern: Pattern, g: u64, count: u64) -> Option<Bound> {
    let s = fabric.sockets.filter(|&s| s > 1)?;
    let link = fabric.socket_link_gbps?;
    let per_socket = count.div_ceil(s);
    if g <= per_socket {
        return None;
    }
    let gbps = link * crossing_factor(pattern, per_socket as f64, g as f64);
    Some(Bound {
        gbps,
        by: Bottleneck::Pcie,
        why: format!(
            "{g} ranks span {s} sockets ({per_socket} GPUs each), so traffic crosses the link between them ({} GB/s a direction): busbw <= {:.1} GB/s",
            gb(link),
            gbps
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{CpuTopology, GpuTopology};

    fn host(copy: Option<f64>) -> Topology {
        Topology {
            hosts: 1,
            gpu: Some(GpuTopology {
                count: 8,
                pcie_generation: Some(5),
                pcie_width: Some(16),
                ..GpuTopology::default()
            }),
            cpu: Some(CpuTopology {
                cores: None,
                mem_copy_gbps: copy,
                mem_copy_solo_gbps: None,
            }),
            ..Topology::default()
        }
    }

    fn link() -> IntraLink {
        crate::links::intra_link(&host(None)).unwrap()
    }

    #[test]
    fn shm_is_bounded_by_host_memory_over_the_ranks() {
        // 2 sockets of 8 DDR5-4800 channels: 614 GB/s of traffic, 307 of copy.
        let f = HostFabric {
            p2p: Some(false),
            ..HostFabric::default()
        };
        let b = host_bound(&host(Some(307.2)), &f, &link(), Pattern::Ring, 8);
        assert_eq!(b.by, Bottleneck::HostMemory);
        assert!((b.gbps - 38.4).abs() < 1e-9, "{}", b.gbps);
        // With peer-to-peer, memory is not on the path: the link bounds.
        let p2p = HostFabric::default();
        let b = host_bound(&host(Some(307.2)), &p2p, &link(), Pattern::Ring, 8);
        assert_eq!(b.by, Bottleneck::Pcie);
        assert!((b.gbps - 53.05).abs() < 0.01, "{}", b.gbps);
    }

    #[test]
    fn switches_and_sockets_bound_only_ranks_that_cannot_share_one() {
        let f = HostFabric {
            sockets: Some(2),
            socket_link_gbps: Some(20.0),
            gpus_per_switch: Some(4),
            uplink_generation: Some(4),
            uplink_width: Some(16),
            ..HostFabric::default()
        };
        let t = host(None);
        // 4 ranks fit one switch and one socket: the GPU link alone.
        let b = host_bound(&t, &f, &link(), Pattern::Ring, 4);
        assert!((b.gbps - 53.05).abs() < 0.01, "{}", b.gbps);
        // 8 ranks: the ring crosses the sockets' 20 GB/s once each way.
        let b = host_bound(&t, &f, &link(), Pattern::Ring, 8);
        assert!((b.gbps - 20.0).abs() < 1e-9, "{}", b.why);
        // alltoall: 4 ranks on a side send 4 x 4/8 of their bytes across:
        // busbw <= 20 x 7/16.
        let b = host_bound(&t, &f, &link(), Pattern::Spread, 8);
        assert!((b.gbps - 8.75).abs() < 1e-9, "{}", b.why);
    }
}
