//! The GPU ceiling: for an op, a layout and an algorithm, the highest
//! busbw the links allow and the link that sets it. docs/ceiling.md
//! derives each formula; the comments here say which one is which.
//!
//! busbw is nccl-tests' normalisation: ring all_reduce's busbw equals the
//! bytes each rank puts on its link per second, so a ring's ceiling is the
//! per-GPU link rate whatever the rank count. These are large-size
//! bounds: below about 1 MiB latency and the LL/LL128 protocols set the
//! pace, and the ceiling says so rather than modelling it.

use crate::bound::{gb, min, Bound};
use crate::choice::candidates;
use crate::layout::{Layout, Machine};
use crate::links::{intra_link, nvls_efficiency, IntraLink};
use crate::mesh::{Mesh, Traffic};
use crate::pcie::{self, Pattern};
use crate::Missing;
use collbench_core::{Algorithm, Bottleneck, Ceiling, Collective};

/// Sizes below this are latency-bound; their ceiling is only a bound.
const LARGE_BYTES: u64 = 1 << 20;

/// The ceiling of `op` on a GPU machine with `algorithm` (the one NCCL
/// reported) or, when `None`, the highest over the algorithms NCCL may
/// pick at large sizes ([`candidates`]).
pub(crate) fn gpu_ceiling(
    m: Machine,
    op: Collective,
    bytes: u64,
    algorithm: Option<Algorithm>,
) -> Result<Ceiling, Missing> {
    let layout = Layout::of(m.topo)?;
    if layout.ranks() < 2.0 {
        return Err(Missing("one rank moves no data"));
    }
    let (algorithm, bound) = match algorithm {
        Some(a) => (a, bound_for(m, op, layout, a)?),
        None => highest_candidate(m, op, layout)?,
    };
    let mut why = bound.why;
    let comms = m.topo.concurrent_comms.unwrap_or(1);
    if comms > 1 && bound.by == Bottleneck::Network {
        why += &format!(
            "; {comms} communicators run at once on each host, so the NIC figure is 1/{comms} of the host's"
        );
    }
    if bytes < LARGE_BYTES {
        why += "; below 1 MiB latency and the LL/LL128 protocols set the pace, \
                so this large-size bound is far above what such sizes reach";
    }
    Ok(Ceiling {
        busbw_gbps: bound.gbps,
        bottleneck: bound.by,
        algorithm,
        why,
    })
}

/// The bound of one algorithm.
fn bound_for(
    m: Machine,
    op: Collective,
    layout: Layout,
    algorithm: Algorithm,
) -> Result<Bound, Missing> {
    match algorithm {
        Algorithm::Nvls if layout.hosts == 1 => nvls(m, layout),
        Algorithm::Nvls | Algorithm::NvlsTree => nvls_tree(m, layout),
        Algorithm::Tree => tree(m, layout),
        Algorithm::CollnetDirect | Algorithm::CollnetChain => collnet(m, layout),
        _ => by_op(m, op, layout),
    }
}

/// The algorithm and bound when NCCL reported none: the highest bound
/// over the algorithms NCCL may pick, so that a healthy figure is never
/// above it whichever NCCL ran. Its `why` names the others' bounds where
/// there were several, and says so where NVLS was unknown.
fn highest_candidate(
    m: Machine,
    op: Collective,
    layout: Layout,
) -> Result<(Algorithm, Bound), Missing> {
    let mut all = Vec::new();
    for a in candidates(m, op, layout) {
        all.push((a, bound_for(m, op, layout, a)?));
    }
    let best = all.iter().enumerate().fold(
        0,
        |i, (j, (_, b))| if b.gbps > all[i].1.gbps { j } else { i },
    );
    let (algorithm, bound) = all.swap_remove(best);
    if all.is_empty() {
        return Ok((algorithm, bound));
    }
    let others: Vec<String> = all
        .iter()
        .map(|(a, b)| format!("{} {}", a.label(), gb((b.gbps * 10.0).round() / 10.0)))
        .collect();
    let unknown = m.topo.gpu.as_ref().is_some_and(|g| g.nvls.is_none())
        && matches!(algorithm, Algorithm::Nvls | Algorithm::NvlsTree);
    let lead = if unknown {
        "NVLS unknown here (the switches may reduce), so the highest of the algorithms NCCL may pick"
    } else {
        "NCCL's algorithm not reported, so the highest of those it may pick"
    };
    Ok((
        algorithm,
        Bound {
            why: format!(
                "{lead} ({} here, against {} GB/s): {}",
                algorithm.label(),
                others.join(", "),
                bound.why
            ),
            ..bound
        },
    ))
}

fn intra(m: Machine) -> Result<IntraLink, Missing> {
    intra_link(m.topo).ok_or(Missing("GPU links unknown (no NVLink or PCIe figures)"))
}

/// The NICs' rate one communicator has on a host of the layout (a share
/// of them where several run at once; an NVLink domain's hosts together
/// where the job spans several domains).
fn net(m: Machine, layout: Layout) -> Result<f64, Missing> {
    let host = m.topo.comm_net_gbps().ok_or(Missing("NIC rate unknown"))?;
    Ok(host * layout.nic_hosts as f64)
}

/// The bound inside one host (one NVLink domain): the GPU's NVLink, or on
/// a host without NVLink its PCIe link and what the GPUs share behind it
/// (`pcie.rs`).
fn host_bound(m: Machine, op: Collective, layout: Layout, what: &str) -> Result<Bound, Missing> {
    let l = intra(m)?;
    if l.via == Bottleneck::Pcie {
        let pattern = match op {
            Collective::AllToAll | Collective::AllToAllV | Collective::HyperCube => Pattern::Spread,
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::Reduce
            | Collective::SendRecv
            | Collective::Gather
            | Collective::Scatter => Pattern::Ring,
        };
        let b = pcie::host_bound(m.topo, m.fabric, &l, pattern, layout.per_host);
        return Ok(Bound {
            why: format!("{what}: {}", b.why),
            ..b
        });
    }
    if let Some(b) = Mesh::of(m.topo, layout.per_host).and_then(|h| h.bound(Traffic::of(op))) {
        return Ok(Bound {
            why: format!("{what}: {}", b.why),
            ..b
        });
    }
    Ok(Bound {
        gbps: l.gbps,
        by: l.via,
        why: format!(
            "{what}: each rank's bytes cross its own link once per busbw byte: busbw <= per-GPU {} {:.0} GB/s ({})",
            l.via.label(),
            l.gbps,
            l.how
        ),
    })
}

/// Ring-shaped traffic and point-to-point, by op.
fn by_op(m: Machine, op: Collective, layout: Layout) -> Result<Bound, Missing> {
    let n = layout.ranks();
    let g = layout.per_host as f64;
    if layout.hosts == 1 {
        let what = if intra(m)?.via == Bottleneck::Nvlink {
            "one NVLink domain"
        } else {
            "one host"
        };
        return host_bound(m, op, layout, what);
    }
    let net = net(m, layout)?;
    let net_gb = gb(net);
    let link = |b: Bound| -> Result<Bound, Missing> {
        if layout.per_host > 1 {
            Ok(min(b, host_bound(m, op, layout, "within a host")?))
        } else {
            Ok(b)
        }
    };
    let b = match op {
        Collective::AllToAll | Collective::AllToAllV | Collective::HyperCube => Bound {
            // Each host sends g x S x (n-g)/n bytes through its NICs.
            gbps: net * (n - 1.0) / (g * (n - g)),
            by: Bottleneck::Network,
            why: format!(
                "alltoall: a host's {g} ranks send (n-g)/n of their bytes off the host: busbw <= NICs {net_gb} GB/s x (n-1)/(g(n-g)) with n={n}, g={g}"
            ),
        },
        Collective::SendRecv => {
            // One NIC, or less where concurrent communicators share them.
            let nic = m.topo.nic_gbps().ok_or(Missing("NIC rate unknown"))?.min(net);
            Bound {
                gbps: nic,
                by: Bottleneck::Network,
                why: format!(
                    "sendrecv: one rank per host sends off the host, through one NIC: busbw <= {} GB/s",
                    gb(nic)
                ),
            }
        }
        Collective::Gather | Collective::Scatter => Bound {
            gbps: net * (n - 1.0) / (n - g),
            by: Bottleneck::Network,
            why: format!(
                "root's host moves (n-g)/n of the bytes through its NICs: busbw <= {net_gb} GB/s x (n-1)/(n-g)"
            ),
        },
        Collective::AllReduce
        | Collective::AllGather
        | Collective::ReduceScatter
        | Collective::Broadcast
        | Collective::Reduce => Bound {
            gbps: net,
            by: Bottleneck::Network,
            why: if layout.nic_hosts > 1 {
                format!(
                    "ring: each ring leaves every NVLink domain once, one ring per NIC: busbw <= the domain's NICs ({} hosts'), {net_gb} GB/s",
                    layout.nic_hosts
                )
            } else {
                format!(
                    "ring: each ring leaves every host once, one ring per NIC: busbw <= the host's NICs, {net_gb} GB/s"
                )
            },
        },
    };
    link(b)
}

/// NVLS on one NVLink domain: the switch reduces (multimem.ld_reduce) and
/// multicasts (multimem.st), so each GPU sends S(1+1/n) and receives as
/// much, where a ring moves 2S(n-1)/n: busbw <= 2(n-1)/(n+1) x link x
/// NCCL's NVLS efficiency.
fn nvls(m: Machine, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(m)?;
    let eff = nvls_efficiency(m.topo);
    let n = layout.ranks();
    Ok(Bound {
        gbps: 2.0 * (n - 1.0) / (n + 1.0) * l.gbps * eff,
        by: Bottleneck::Nvls,
        why: format!(
            "NVLS: the switch reduces and multicasts, so each GPU sends its data once and receives the sum once (S(1+1/n) per direction, not 2S(n-1)/n): \
             busbw <= 2(n-1)/(n+1) x {:.0} GB/s ({}) x {eff} (NCCL's NVLS efficiency) with n={n}, above the {:.0} GB/s NVLink bound because busbw counts the reduction the switch does",
            l.gbps, l.how, l.gbps
        ),
    })
}

/// NVLS within each host, a tree between hosts: a host sends its reduced
/// data, not each GPU's, so with 2 hosts each sends S and receives S
/// (busbw <= 2(n-1)/n x NICs), with more an interior tree node moves 2S
/// ((n-1)/n x NICs).
fn nvls_tree(m: Machine, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(m)?;
    let eff = nvls_efficiency(m.topo);
    let (n, g) = (layout.ranks(), layout.per_host as f64);
    let inside = Bound {
        gbps: 2.0 * (n - 1.0) / n * g / (g + 1.0) * l.gbps * eff,
        by: Bottleneck::Nvls,
        why: format!(
            "NVLS tree: the switch reduces within the host (each GPU sends S(1+1/g)): busbw <= 2(n-1)/n x g/(g+1) x {:.0} GB/s ({}) x {eff} (NCCL's NVLS efficiency)",
            l.gbps, l.how
        ),
    };
    Ok(min(
        inside,
        inter_tree(net(m, layout)?, layout, "NVLS tree"),
    ))
}

/// The tree between hosts, data reduced within each host first.
fn inter_tree(net: f64, layout: Layout, what: &str) -> Bound {
    let net_gb = gb(net);
    let n = layout.ranks();
    let (k, shape) = if layout.hosts == 2 {
        (
            2.0,
            "with 2 hosts each sends its reduced S once and receives S once",
        )
    } else {
        (1.0, "an interior node of the two trees sends 2S")
    };
    Bound {
        gbps: k * (n - 1.0) / n * net,
        by: Bottleneck::Network,
        why: format!(
            "{what}: hosts exchange data reduced inside the host, {shape}: busbw <= {k} x (n-1)/n x NICs {net_gb} GB/s{}",
            if layout.hosts == 2 {
                " (above the NICs' rate: busbw counts the reduction done inside each host, which never crosses the network)"
            } else {
                ""
            }
        ),
    }
}

/// NCCL's tree: a chain inside each host (each GPU sends S up and S down:
/// busbw <= (n-1)/n x link), a double binary tree between hosts.
fn tree(m: Machine, layout: Layout) -> Result<Bound, Missing> {
    let n = layout.ranks();
    let link = host_bound(m, Collective::AllReduce, layout, "the chain")?;
    let chain = Bound {
        gbps: (n - 1.0) / n * link.gbps,
        by: link.by,
        why: format!(
            "tree: each GPU of the chain in a host sends S up and S down: busbw <= (n-1)/n x {:.1} GB/s with n={n} ({})",
            link.gbps, link.why
        ),
    };
    if layout.hosts == 1 {
        return Ok(chain);
    }
    Ok(min(chain, inter_tree(net(m, layout)?, layout, "tree")))
}

/// CollNet (SHARP): the network switches reduce, so a host sends its data
/// once and receives the result once.
fn collnet(m: Machine, layout: Layout) -> Result<Bound, Missing> {
    let n = layout.ranks();
    let net = net(m, layout)?;
    let net_gb = gb(net);
    let inside = host_bound(m, Collective::AllReduce, layout, "CollNet within a host")?;
    Ok(min(
        inside,
        Bound {
            gbps: 2.0 * (n - 1.0) / n * net,
            by: Bottleneck::Network,
            why: format!(
                "CollNet: the network reduces, each host sends its data once and receives the result once: busbw <= 2(n-1)/n x NICs {net_gb} GB/s"
            ),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::HostFabric;
    use collbench_core::{GpuTopology, NicGroup, Topology};

    /// One HGX H100 host: 8 GPUs, 18 NVLink 4 links each, NVSwitches.
    fn hgx(nvls: Option<bool>) -> Topology {
        Topology {
            hosts: 1,
            gpu: Some(GpuTopology {
                count: 8,
                nvlink_generation: Some(4),
                nvlink_links: Some(18),
                nvlink_link_gbps: Some(25.0),
                nvswitch: Some(true),
                nvls,
                ..GpuTopology::default()
            }),
            ..Topology::default()
        }
    }

    fn large(topo: &Topology, op: Collective) -> Ceiling {
        let fabric = HostFabric::default();
        let m = Machine {
            topo,
            fabric: &fabric,
        };
        gpu_ceiling(m, op, 1 << 30, None).unwrap()
    }

    /// Two AWS p4de: 8 A100 (12 NVLink 3 links) and 4 x 100G EFA each.
    fn p4de_pair() -> Topology {
        let mut t = hgx(Some(false));
        t.hosts = 2;
        if let Some(g) = t.gpu.as_mut() {
            g.nvlink_generation = Some(3);
            g.nvlink_links = Some(12);
        }
        t.nics = vec![NicGroup {
            rate_gbit: 100.0,
            count: 4,
            ..NicGroup::default()
        }];
        t
    }

    #[test]
    fn two_hosts_with_slow_nics_are_bounded_by_tree_not_ring() {
        // Tree: each host sends its reduced data once: 2 x 15/16 x 50 GB/s,
        // where ring stops at the 50 GB/s of NICs.
        let c = large(&p4de_pair(), Collective::AllReduce);
        assert_eq!(c.algorithm, Algorithm::Tree);
        assert!((c.busbw_gbps - 93.75).abs() < 1e-9, "{}", c.busbw_gbps);
        assert!(c.why.contains("against ring 50 GB/s"), "{}", c.why);
        // Told it ran ring, the ceiling is ring's.
        let fabric = HostFabric::default();
        let m = Machine {
            topo: &p4de_pair(),
            fabric: &fabric,
        };
        let ring = gpu_ceiling(m, Collective::AllReduce, 1 << 30, Some(Algorithm::Ring)).unwrap();
        assert!((ring.busbw_gbps - 50.0).abs() < 1e-9, "{}", ring.busbw_gbps);
        // Other ops have no tree: ring's NIC bound.
        let rs = large(&p4de_pair(), Collective::ReduceScatter);
        assert!((rs.busbw_gbps - 50.0).abs() < 1e-9, "{}", rs.busbw_gbps);
    }

    #[test]
    fn nvls_on_or_unknown_bounds_all_reduce_by_the_switch() {
        // 2 x 7/9 x 400 x 0.85: above the 400 GB/s of ring.
        for nvls in [Some(true), None] {
            let c = large(&hgx(nvls), Collective::AllReduce);
            assert_eq!(c.algorithm, Algorithm::Nvls, "{nvls:?}");
            assert!((c.busbw_gbps - 528.9).abs() < 0.1, "{}", c.busbw_gbps);
        }
        let unknown = large(&hgx(None), Collective::AllReduce);
        assert!(unknown.why.starts_with("NVLS unknown"), "{}", unknown.why);
    }

    #[test]
    fn nvls_off_is_ring_and_other_ops_never_take_nvls() {
        let off = large(&hgx(Some(false)), Collective::AllReduce);
        assert_eq!(off.algorithm, Algorithm::Ring);
        assert!((off.busbw_gbps - 400.0).abs() < 1e-9);
        let ag = large(&hgx(None), Collective::AllGather);
        assert_eq!(ag.algorithm, Algorithm::Ring);
    }

    #[test]
    fn racks_of_a_shared_nvlink_domain_leave_it_through_all_its_trays_nics() {
        // 2 GB200 NVL72 racks: 18 trays of 4 GPUs, 4 x 400G a tray. A ring
        // leaves a rack through its 72 NICs (3,600 GB/s), so the GPU's
        // NVLink (800 GB/s) bounds it, not one tray's 200 GB/s
        // (coreweave/nccl-tests: 810 GB/s on 2 racks).
        let mut t = hgx(Some(true));
        t.hosts = 36;
        t.nvlink_domain_hosts = Some(18);
        if let Some(g) = t.gpu.as_mut() {
            g.count = 4;
            g.nvlink_generation = Some(5);
            g.nvlink_link_gbps = Some(50.0);
        }
        t.nics = vec![NicGroup {
            rate_gbit: 400.0,
            count: 4,
            ..NicGroup::default()
        }];
        let fabric = HostFabric::default();
        let m = Machine {
            topo: &t,
            fabric: &fabric,
        };
        let ring = gpu_ceiling(m, Collective::AllReduce, 1 << 30, Some(Algorithm::Ring)).unwrap();
        assert_eq!(ring.bottleneck, Bottleneck::Nvlink);
        assert!(
            (ring.busbw_gbps - 800.0).abs() < 1e-9,
            "{}",
            ring.busbw_gbps
        );
        let rs = large(&t, Collective::ReduceScatter);
        assert!((rs.busbw_gbps - 800.0).abs() < 1e-9, "{}", rs.busbw_gbps);
        // alltoall: a rack's 72 ranks send half their bytes off the rack
        // through its 3,600 GB/s of NICs: 3,600 x 143 / (72 x 72) = 99.3
        // (one tray's 200 GB/s gave 200 x 143 / (4 x 140) = 51.1).
        let a2a = large(&t, Collective::AllToAll);
        assert_eq!(a2a.bottleneck, Bottleneck::Network);
        assert!((a2a.busbw_gbps - 99.31).abs() < 0.01, "{}", a2a.busbw_gbps);
    }

    #[test]
    fn a_mesh_bounds_one_pair_by_its_own_links_and_rings_by_every_link() {
        // 8 MI300X, one Infinity Fabric link (64 GB/s, 48 usable) a pair:
        // sendrecv gets one link, all_reduce's rings all 7; no NVLS.
        let t = crate::mesh::tests::mi300x();
        let sr = large(&t, Collective::SendRecv);
        assert!((sr.busbw_gbps - 48.0).abs() < 1e-9, "{}", sr.busbw_gbps);
        assert_eq!(sr.bottleneck, Bottleneck::Xgmi);
        let ar = large(&t, Collective::AllReduce);
        assert_eq!(ar.algorithm, Algorithm::Ring);
        assert!((ar.busbw_gbps - 336.0).abs() < 1e-9, "{}", ar.busbw_gbps);
        assert!(
            ar.why
                .starts_with("one host: rings over GPUs joined without a switch"),
            "{}",
            ar.why
        );
        // Without the matrix a GPU's 7 links are taken for any peer.
        let mut bare = t.clone();
        bare.gpu.as_mut().unwrap().peer_links.clear();
        let sr = large(&bare, Collective::SendRecv);
        assert!((sr.busbw_gbps - 336.0).abs() < 1e-9, "{}", sr.busbw_gbps);
    }
}
