//! The GPU ceiling: for an op, a layout and an algorithm, the highest
//! busbw the links allow and the link that sets it. docs/ceiling.md
//! derives each formula; the comments here say which one is which.
//!
//! busbw is nccl-tests' normalisation: ring all_reduce's busbw equals the
//! bytes each rank puts on its link per second, so a ring's ceiling is the
//! per-GPU link rate whatever the rank count. These are large-size
//! bounds: below about 1 MiB latency and the LL/LL128 protocols set the
//! pace, and the ceiling says so rather than modelling it.

use crate::links::{has_nvls, intra_link, nvls_efficiency, nvls_possible, IntraLink};
use crate::Missing;
use collbench_core::{Algorithm, Bottleneck, Ceiling, Collective, Topology};

/// Sizes below this are latency-bound; their ceiling is only a bound.
const LARGE_BYTES: u64 = 1 << 20;

/// The shape of the job on the topology.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Layout {
    /// Hosts outside one NVLink domain (1 when NVLink spans the job).
    pub hosts: u64,
    /// Ranks per host (per NVLink domain when it spans hosts).
    pub per_host: u64,
}

impl Layout {
    pub(crate) fn of(topo: &Topology) -> Result<Layout, Missing> {
        let g = topo
            .ranks_per_host()
            .ok_or(Missing("ranks per host unknown"))?;
        let h = topo.hosts.max(1);
        // One NVLink fabric over the hosts (GB200 NVL72) makes them one.
        if topo.nvlink_domain_hosts.unwrap_or(1) >= h && h > 1 {
            return Ok(Layout {
                hosts: 1,
                per_host: g * h,
            });
        }
        Ok(Layout {
            hosts: h,
            per_host: g,
        })
    }

    fn ranks(self) -> f64 {
        (self.hosts * self.per_host) as f64
    }
}

/// A bound before it becomes a [`Ceiling`].
struct Bound {
    gbps: f64,
    by: Bottleneck,
    why: String,
}

fn min(a: Bound, b: Bound) -> Bound {
    if b.gbps < a.gbps {
        b
    } else {
        a
    }
}

/// The ceiling of `op` on a GPU topology with `algorithm` (the one NCCL
/// reported) or, when `None`, the algorithm NCCL runs at large sizes.
pub(crate) fn gpu_ceiling(
    topo: &Topology,
    op: Collective,
    bytes: u64,
    algorithm: Option<Algorithm>,
) -> Result<Ceiling, Missing> {
    let layout = Layout::of(topo)?;
    if layout.ranks() < 2.0 {
        return Err(Missing("one rank moves no data"));
    }
    let (algorithm, bound) = match algorithm {
        Some(a) => (a, bound_for(topo, op, layout, a)?),
        None => best_candidate(topo, op, layout)?,
    };
    let mut why = bound.why;
    let comms = topo.concurrent_comms.unwrap_or(1);
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
    topo: &Topology,
    op: Collective,
    layout: Layout,
    algorithm: Algorithm,
) -> Result<Bound, Missing> {
    match algorithm {
        Algorithm::Nvls if layout.hosts == 1 => nvls(topo, layout),
        Algorithm::Nvls | Algorithm::NvlsTree => nvls_tree(topo, layout),
        Algorithm::Tree => tree(topo, layout),
        Algorithm::CollnetDirect | Algorithm::CollnetChain => collnet(topo, layout),
        _ => by_op(topo, op, layout),
    }
}

/// The algorithm and bound when NCCL reported none: NCCL's large-size
/// choice, or where the topology cannot say whether the switches reduce
/// (NVSwitches, NVLink 4 or newer, `nvls` unknown) the higher of ring's
/// and NVLS's bounds for all_reduce, so that a run NCCL gave NVLS is not
/// put above its ceiling.
fn best_candidate(
    topo: &Topology,
    op: Collective,
    layout: Layout,
) -> Result<(Algorithm, Bound), Missing> {
    let algorithm = default_algorithm(topo, op, layout);
    let bound = bound_for(topo, op, layout, algorithm)?;
    if op != Collective::AllReduce || !nvls_possible(topo) || layout.per_host <= 2 {
        return Ok((algorithm, bound));
    }
    let alt = if layout.hosts == 1 {
        Algorithm::Nvls
    } else {
        Algorithm::NvlsTree
    };
    let b = bound_for(topo, op, layout, alt)?;
    if b.gbps <= bound.gbps {
        return Ok((algorithm, bound));
    }
    Ok((
        alt,
        Bound {
            why: format!(
                "NVLS unknown here (the switches may reduce), so the higher of ring's and NVLS's bounds: {}",
                b.why
            ),
            ..b
        },
    ))
}

/// What NCCL runs for large messages when nothing reported it: NVLS (one
/// NVLink domain) or NVLS tree (several hosts) for all_reduce where the
/// switches reduce, ring for the other collectives and all_reduce
/// elsewhere (NCCL's tuner scales tree by 0.92 and caps it per channel,
/// so ring wins at large sizes), point-to-point for alltoall and
/// sendrecv.
pub(crate) fn default_algorithm(topo: &Topology, op: Collective, layout: Layout) -> Algorithm {
    match op {
        Collective::AllReduce if has_nvls(topo) && layout.per_host > 2 => {
            if layout.hosts == 1 {
                Algorithm::Nvls
            } else {
                Algorithm::NvlsTree
            }
        }
        Collective::AllToAll
        | Collective::AllToAllV
        | Collective::SendRecv
        | Collective::HyperCube => Algorithm::P2p,
        _ => Algorithm::Ring,
    }
}

/// A rate for a `why`: whole GB/s where it is whole, else one decimal
/// (a 200G NIC shared 8 ways is 3.1, not 3).
fn gb(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn intra(topo: &Topology) -> Result<IntraLink, Missing> {
    intra_link(topo).ok_or(Missing("GPU links unknown (no NVLink or PCIe figures)"))
}

/// The NICs' rate one communicator has on a host (a share of them where
/// several run at once).
fn net(topo: &Topology) -> Result<f64, Missing> {
    topo.comm_net_gbps().ok_or(Missing("NIC rate unknown"))
}

fn intra_bound(l: IntraLink, what: &str) -> Bound {
    Bound {
        gbps: l.gbps,
        by: l.via,
        why: format!(
            "{what}: each rank's bytes cross its own link once per busbw byte: busbw <= per-GPU {} {:.0} GB/s ({})",
            l.via.label(),
            l.gbps,
            l.how
        ),
    }
}

/// Ring-shaped traffic and point-to-point, by op.
fn by_op(topo: &Topology, op: Collective, layout: Layout) -> Result<Bound, Missing> {
    let n = layout.ranks();
    let g = layout.per_host as f64;
    if layout.hosts == 1 {
        return Ok(intra_bound(intra(topo)?, "one NVLink domain"));
    }
    let net = net(topo)?;
    let net_gb = gb(net);
    let link = |b: Bound| -> Result<Bound, Missing> {
        if layout.per_host > 1 {
            Ok(min(b, intra_bound(intra(topo)?, "within a host")))
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
            let nic = topo.nic_gbps().ok_or(Missing("NIC rate unknown"))?.min(net);
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
        _ => Bound {
            gbps: net,
            by: Bottleneck::Network,
            why: format!(
                "ring: each ring leaves every host once, one ring per NIC: busbw <= the host's NICs, {net_gb} GB/s"
            ),
        },
    };
    link(b)
}

/// NVLS on one NVLink domain: the switch reduces (multimem.ld_reduce) and
/// multicasts (multimem.st), so each GPU sends S(1+1/n) and receives as
/// much, where a ring moves 2S(n-1)/n: busbw <= 2(n-1)/(n+1) x link x
/// NCCL's NVLS efficiency.
fn nvls(topo: &Topology, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(topo)?;
    let eff = nvls_efficiency(topo);
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
fn nvls_tree(topo: &Topology, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(topo)?;
    let eff = nvls_efficiency(topo);
    let (n, g) = (layout.ranks(), layout.per_host as f64);
    let inside = Bound {
        gbps: 2.0 * (n - 1.0) / n * g / (g + 1.0) * l.gbps * eff,
        by: Bottleneck::Nvls,
        why: format!(
            "NVLS tree: the switch reduces within the host (each GPU sends S(1+1/g)): busbw <= 2(n-1)/n x g/(g+1) x {:.0} GB/s ({}) x {eff} (NCCL's NVLS efficiency)",
            l.gbps, l.how
        ),
    };
    Ok(min(inside, inter_tree(net(topo)?, layout, "NVLS tree")))
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
fn tree(topo: &Topology, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(topo)?;
    let n = layout.ranks();
    let chain = Bound {
        gbps: (n - 1.0) / n * l.gbps,
        by: l.via,
        why: format!(
            "tree: each GPU of the chain in a host sends S up and S down: busbw <= (n-1)/n x {} {:.0} GB/s ({})",
            l.via.label(),
            l.gbps,
            l.how
        ),
    };
    if layout.hosts == 1 {
        return Ok(chain);
    }
    Ok(min(chain, inter_tree(net(topo)?, layout, "tree")))
}

/// CollNet (SHARP): the network switches reduce, so a host sends its data
/// once and receives the result once.
fn collnet(topo: &Topology, layout: Layout) -> Result<Bound, Missing> {
    let l = intra(topo)?;
    let n = layout.ranks();
    let net = net(topo)?;
    let net_gb = gb(net);
    let inside = intra_bound(l, "CollNet within a host");
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
    use collbench_core::GpuTopology;

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
        gpu_ceiling(topo, op, 1 << 30, None).unwrap()
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
}
