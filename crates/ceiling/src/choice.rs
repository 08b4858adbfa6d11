//! Which algorithms NCCL may run an op with at large sizes on a machine
//! and a layout, when it did not report the one it ran. The ceiling is
//! then the highest of their bounds, so that no healthy figure sits above
//! it whichever NCCL picked; an algorithm is left out only where NCCL
//! cannot run it (no NVLS without NVLink SHARP, no PAT with several ranks
//! a host, no CollNet without the network plugin and
//! `NCCL_COLLNET_ENABLE`, which a topology does not tell) or where NCCL's
//! own tuning model ranks it below ring ([`tuner_rules_out_tree`]).

use crate::layout::{Layout, Machine};
use crate::links::{has_nvls, nvls_possible};
use collbench_core::{Algorithm, Collective};

/// The algorithms NCCL may pick for `op` at large sizes.
pub(crate) fn candidates(m: Machine, op: Collective, layout: Layout) -> Vec<Algorithm> {
    let nvls = (has_nvls(m.topo) || nvls_possible(m.topo)) && layout.per_host > 2;
    match op {
        Collective::AllReduce => {
            let mut v = vec![Algorithm::Ring];
            if layout.hosts > 1 && !tuner_rules_out_tree(m, layout) {
                v.push(Algorithm::Tree);
            }
            if nvls {
                v.push(if layout.hosts == 1 {
                    Algorithm::Nvls
                } else {
                    Algorithm::NvlsTree
                });
            }
            v
        }
        // PAT runs with one rank a host; its bound is ring's.
        Collective::AllGather | Collective::ReduceScatter
            if layout.per_host == 1 && layout.hosts > 1 =>
        {
            vec![Algorithm::Ring, Algorithm::Pat]
        }
        Collective::AllToAll
        | Collective::AllToAllV
        | Collective::SendRecv
        | Collective::HyperCube => vec![Algorithm::P2p],
        Collective::AllGather
        | Collective::ReduceScatter
        | Collective::Broadcast
        | Collective::Reduce
        | Collective::Gather
        | Collective::Scatter => vec![Algorithm::Ring],
    }
}

/// NCCL's tuning model's cap on tree's bus rate per channel at 2 nodes,
/// GB/s (`perChMaxTreeBws` in src/graph/tuning.cc, its N2 column: Volta
/// 18.5, Ampere 23.6, Hopper 41.4, Blackwell 42.8), by NVLink generation
/// (2 Volta, 3 Ampere, 4 Hopper, 5 Blackwell); `None` where unknown.
fn tree_cap_per_channel(m: Machine) -> Option<f64> {
    Some(match m.topo.gpu.as_ref()?.nvlink_generation? {
        2 => 18.5,
        3 => 23.6,
        4 => 41.4,
        5 => 42.8,
        _ => return None,
    })
}

/// Whether NCCL's tuner gives ring the higher rate than tree for a large
/// all_reduce on 2 hosts, so that it never runs tree there. NCCL's model
/// (src/graph/tuning.cc) rates each channel: at 2 nodes both by their
/// intra-node rate, tree's at most 0.92 of it and at most
/// `perChMaxTreeBws`, then turns bus rates into algorithm rates by 1/2 for
/// tree and n/(2(n-1)) for ring. A ring channel leaves the host through
/// one NIC, so its rate is at most that NIC's. With NICs fast for their
/// GPU (A100 with 200G, H100 with 400G) ring comes out ahead and tree is
/// left out; with slower NICs (A100 with 100G, as on AWS p4d) tree wins
/// and its 2-host bound, twice ring's network share, is the ceiling. The
/// tree figure is the most NCCL could rate it (the cap), so tree is left
/// out only where NCCL could not prefer it.
fn tuner_rules_out_tree(m: Machine, layout: Layout) -> bool {
    if layout.hosts != 2 {
        // Beyond 2 nodes NCCL rates tree by its inter-node rate, at most
        // ring's; its bound is under ring's too, so keeping it is harmless.
        return false;
    }
    let (Some(cap), Some(nic)) = (tree_cap_per_channel(m), m.topo.nic_gbps()) else {
        return false;
    };
    let n = layout.ranks();
    let ring = nic * n / (2.0 * (n - 1.0));
    let tree = 0.5 * cap;
    ring > tree
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::HostFabric;
    use collbench_core::{GpuTopology, NicGroup, Topology};

    fn a100_pair(nic_gbit: f64, nics: u64) -> Topology {
        Topology {
            hosts: 2,
            gpu: Some(GpuTopology {
                count: 8,
                nvlink_generation: Some(3),
                nvlink_links: Some(12),
                nvlink_link_gbps: Some(25.0),
                nvswitch: Some(true),
                nvls: Some(false),
                ..GpuTopology::default()
            }),
            nics: vec![NicGroup {
                rate_gbit: nic_gbit,
                count: nics,
                ..NicGroup::default()
            }],
            ..Topology::default()
        }
    }

    fn all_reduce(t: &Topology) -> Vec<Algorithm> {
        let f = HostFabric::default();
        let m = Machine {
            topo: t,
            fabric: &f,
        };
        candidates(m, Collective::AllReduce, Layout::of(t).unwrap())
    }

    #[test]
    fn two_a100_hosts_consider_tree_with_100g_nics_not_with_200g() {
        // 12.5 GB/s x 16/30 = 6.7 under tree's 23.6 / 2: tree may win.
        assert_eq!(
            all_reduce(&a100_pair(100.0, 4)),
            [Algorithm::Ring, Algorithm::Tree]
        );
        // 25 x 16/30 = 13.3 over 11.8: NCCL runs ring.
        assert_eq!(all_reduce(&a100_pair(200.0, 4)), [Algorithm::Ring]);
    }

    #[test]
    fn one_host_never_considers_tree_and_nvls_needs_the_switches() {
        let mut t = a100_pair(200.0, 4);
        t.hosts = 1;
        assert_eq!(all_reduce(&t), [Algorithm::Ring]);
        if let Some(g) = t.gpu.as_mut() {
            g.nvlink_generation = Some(4);
            g.nvls = None;
        }
        assert_eq!(all_reduce(&t), [Algorithm::Ring, Algorithm::Nvls]);
    }
}
