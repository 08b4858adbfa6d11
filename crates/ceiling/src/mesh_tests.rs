//! The mesh rules on boards whose links are published: MI300X's full
//! Infinity Fabric mesh, DGX-1's hybrid cube mesh, and a host whose GPUs
//! are NVLink-bridged in pairs.

use super::*;
use collbench_core::{GpuLinkKind, GpuTopology};

fn topo(g: GpuTopology) -> Topology {
    Topology {
        hosts: 1,
        gpu: Some(g),
        ..Topology::default()
    }
}

/// 8 MI300X: one x16 Infinity Fabric link (64 GB/s a direction) to each peer.
pub(crate) fn mi300x() -> Topology {
    let full: Vec<Vec<u32>> = (0..8)
        .map(|i| (0..8).map(|j| u32::from(i != j)).collect())
        .collect();
    topo(GpuTopology {
        count: 8,
        link_kind: Some(GpuLinkKind::Xgmi),
        nvlink_links: Some(7),
        nvlink_link_gbps: Some(64.0),
        nvswitch: Some(false),
        peer_links: full,
        pcie_generation: Some(5),
        pcie_width: Some(16),
        ..GpuTopology::default()
    })
}

/// GPUs 0-2 of an A100 PCIe host: 0 and 1 bridged (12 NVLink 3 links),
/// 2 on PCIe gen4 x16 only.
fn bridged_three() -> Topology {
    topo(GpuTopology {
        count: 3,
        nvlink_links: Some(12),
        nvlink_link_gbps: Some(25.0),
        nvswitch: Some(false),
        peer_links: vec![vec![0, 12, 0], vec![12, 0, 0], vec![0, 0, 0]],
        pcie_generation: Some(4),
        pcie_width: Some(16),
        ..GpuTopology::default()
    })
}

/// DGX-1 with V100: 6 NVLink 2 links a GPU, NV1 or NV2 to 4 peers, none
/// to 3, PCIe gen3 x16 (NVIDIA's DGX-1 page: "a cube ... with all twelve
/// edges connected through NVLink (some edges have two NVLink
/// connections)"; GPU 0 with two links to GPUs 3 and 4 and one to 1 and 2,
/// as Li et al., "Evaluating Modern GPU Interconnect", TPDS 2020, measure).
fn dgx1(pcie: bool) -> Topology {
    let m = [
        [0, 1, 1, 2, 2, 0, 0, 0],
        [1, 0, 2, 1, 0, 2, 0, 0],
        [1, 2, 0, 2, 0, 0, 1, 0],
        [2, 1, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 1, 1, 2],
        [0, 2, 0, 0, 1, 0, 2, 1],
        [0, 0, 1, 0, 1, 2, 0, 2],
        [0, 0, 0, 1, 2, 1, 2, 0],
    ];
    topo(GpuTopology {
        count: 8,
        nvlink_links: Some(6),
        nvlink_link_gbps: Some(25.0),
        nvswitch: Some(false),
        peer_links: m.iter().map(|r| r.to_vec()).collect(),
        pcie_generation: pcie.then_some(3),
        pcie_width: pcie.then_some(16),
        ..GpuTopology::default()
    })
}

fn bound(t: &Topology, ranks: u64, traffic: Traffic) -> Bound {
    Mesh::of(t, ranks).unwrap().bound(traffic).unwrap()
}

#[test]
fn a_full_infinity_fabric_mesh_rings_over_all_seven_links_and_pairs_over_one() {
    // 7 x 64 GB/s x 0.75 (AMD's usable 48 GB/s a link).
    let ring = bound(&mi300x(), 8, Traffic::Ring);
    assert!((ring.gbps - 336.0).abs() < 1e-9, "{}", ring.gbps);
    assert_eq!(ring.by, Bottleneck::Xgmi);
    assert!(
        ring.why.contains("narrowest split, GPU 0 to the rest"),
        "{}",
        ring.why
    );
    let pair = bound(&mi300x(), 8, Traffic::Pairs);
    assert!((pair.gbps - 48.0).abs() < 1e-9, "{}", pair.gbps);
    assert!(pair.why.contains("GPU 0 to GPU 1"), "{}", pair.why);
    let fan = bound(&mi300x(), 8, Traffic::FanOut);
    assert!((fan.gbps - 336.0).abs() < 1e-9, "{}", fan.gbps);
    // 4 of the 8: 3 links each.
    let four = bound(&mi300x(), 4, Traffic::Ring);
    assert!((four.gbps - 144.0).abs() < 1e-9, "{}", four.gbps);
}

#[test]
fn a_gpu_without_links_puts_every_ring_on_its_pcie_link() {
    // GPU 2 reaches 0 and 1 only through PCIe gen4 x16 (26.5 GB/s of
    // payload), though 0 and 1 share 266.7 GB/s of NVLink.
    let ring = bound(&bridged_three(), 3, Traffic::Ring);
    assert!((ring.gbps - 26.53).abs() < 0.01, "{}", ring.gbps);
    assert_eq!(ring.by, Bottleneck::Pcie);
    assert!(ring.why.contains("GPU 2 to the rest"), "{}", ring.why);
    let pairs = bound(&bridged_three(), 3, Traffic::Pairs);
    assert!((pairs.gbps - 26.53).abs() < 0.01, "{}", pairs.gbps);
    assert_eq!(pairs.by, Bottleneck::Pcie);
    // The bridged pair alone: its 12 links.
    let two = bound(&bridged_three(), 2, Traffic::Ring);
    assert!((two.gbps - 266.67).abs() < 0.01, "{}", two.gbps);
    assert_eq!(two.by, Bottleneck::Nvlink);
}

#[test]
fn dgx1_rings_are_bounded_by_a_gpus_six_links_and_its_pcie() {
    // Every split crosses at least a GPU's 6 links (133.3 GB/s) and the
    // PCIe of a GPU with a peer it has no link to (13.3 GB/s, gen3 x16).
    let ring = bound(&dgx1(true), 8, Traffic::Ring);
    assert!((ring.gbps - 146.6).abs() < 0.1, "{}", ring.gbps);
    assert_eq!(ring.by, Bottleneck::Nvlink);
    // sendrecv 0 -> 1 -> ... : NV1 pairs (22.2 GB/s) and 4 -> 5, 5 -> 6 ...;
    // the slowest is one link.
    let pairs = bound(&dgx1(true), 8, Traffic::Pairs);
    assert!((pairs.gbps - 22.22).abs() < 0.01, "{}", pairs.gbps);
    // With PCIe unknown no split is known whole and a pair without a
    // link has no known route: no mesh bound, the GPU's links stand.
    let bare = Mesh::of(&dgx1(false), 8).unwrap();
    assert!(bare.bound(Traffic::Ring).is_none());
    assert!(bare.bound(Traffic::Pairs).is_none());
}

#[test]
fn a_pair_without_links_takes_the_better_of_pcie_and_a_gpu_both_reach() {
    // DGX-1 GPU 0 and GPU 5 share no link; through GPU 1 (NV1 then NV2)
    // one link's 22.2 GB/s beats PCIe gen3's 13.3.
    let m = Mesh::of(&dgx1(true), 8).unwrap();
    let (gbps, linked) = m.pair(0, 5).unwrap();
    assert!((gbps - 22.22).abs() < 0.01 && linked, "{gbps}");
}

#[test]
fn switches_missing_matrices_and_unknown_rates_are_no_mesh() {
    let mut t = mi300x();
    t.gpu.as_mut().unwrap().nvswitch = Some(true);
    assert!(Mesh::of(&t, 8).is_none());
    let mut t = mi300x();
    t.gpu.as_mut().unwrap().peer_links.clear();
    assert!(Mesh::of(&t, 8).is_none());
    let mut t = mi300x();
    t.gpu.as_mut().unwrap().nvlink_link_gbps = None;
    assert!(Mesh::of(&t, 8).is_none());
    // More ranks than the matrix has GPUs: not described.
    assert!(Mesh::of(&mi300x(), 16).is_none());
}

#[test]
fn traffic_follows_the_op() {
    assert_eq!(Traffic::of(Collective::SendRecv), Traffic::Pairs);
    assert_eq!(Traffic::of(Collective::AllToAll), Traffic::FanOut);
    assert_eq!(Traffic::of(Collective::AllGather), Traffic::Ring);
}
