//! What the GPU formulas read: the machine (its topology and, where a file
//! gives it, its PCIe fabric) and the shape of the job on it.

use crate::fabric::HostFabric;
use crate::Missing;
use collbench_core::Topology;

/// A described or probed machine: the topology and its PCIe fabric.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Machine<'a> {
    pub topo: &'a Topology,
    pub fabric: &'a HostFabric,
}

/// The shape of the job on the topology.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Layout {
    /// Hosts outside one NVLink domain (1 when NVLink spans the job).
    pub hosts: u64,
    /// Ranks per host (per NVLink domain when it spans hosts).
    pub per_host: u64,
    /// Hosts whose NICs one host of the layout has: 1, or the hosts of an
    /// NVLink domain where the job spans several domains (GB200 NVL72
    /// racks), since NCCL makes the domain one node with all its NICs.
    pub nic_hosts: u64,
}

impl Layout {
    pub(crate) fn of(topo: &Topology) -> Result<Layout, Missing> {
        let g = topo
            .ranks_per_host()
            .ok_or(Missing("ranks per host unknown"))?;
        let h = topo.hosts.max(1);
        let d = topo.nvlink_domain_hosts.unwrap_or(1).max(1);
        // One NVLink fabric over the hosts (GB200 NVL72) makes them one.
        if d >= h && h > 1 {
            return Ok(Layout {
                hosts: 1,
                per_host: g * h,
                nic_hosts: h,
            });
        }
        if h > d && d > 1 {
            // Several NVLink domains: NCCL fuses each domain's hosts into
            // one node (its MNNVL clique: `comm->clique` becomes the local
            // ranks in ncclTopoGetSystem, src/graph/topo.cc), rings and
            // trees leave a domain, not a tray, through the domain's NICs.
            // Where the last domain is partial its fewer NICs bound the
            // rings that leave it.
            let domains = h.div_ceil(d);
            let last = h - (domains - 1) * d;
            return Ok(Layout {
                hosts: domains,
                per_host: g * d,
                nic_hosts: last,
            });
        }
        Ok(Layout {
            hosts: h,
            per_host: g,
            nic_hosts: 1,
        })
    }

    /// All ranks of the job.
    pub(crate) fn ranks(self) -> f64 {
        (self.hosts * self.per_host) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::GpuTopology;

    fn nvl72(hosts: u64) -> Topology {
        Topology {
            hosts,
            nvlink_domain_hosts: Some(18),
            gpu: Some(GpuTopology {
                count: 4,
                ..GpuTopology::default()
            }),
            ..Topology::default()
        }
    }

    #[test]
    fn hosts_of_one_nvlink_domain_are_one_host() {
        let l = Layout::of(&nvl72(18)).unwrap();
        assert_eq!((l.hosts, l.per_host), (1, 72));
        // One tray of the domain (Azure ND GB200 v6, a VM) is its 4 GPUs.
        let l = Layout::of(&nvl72(1)).unwrap();
        assert_eq!((l.hosts, l.per_host, l.nic_hosts), (1, 4, 1));
    }

    #[test]
    fn several_nvlink_domains_are_hosts_with_all_their_trays_nics() {
        // 2 racks of 18 trays: NCCL's nodes are the 2 cliques of 72 GPUs.
        let l = Layout::of(&nvl72(36)).unwrap();
        assert_eq!((l.hosts, l.per_host, l.nic_hosts), (2, 72, 18));
        assert_eq!(l.ranks(), 144.0);
        // A partial last rack: its 2 trays' NICs are the fewest a ring leaves through.
        let l = Layout::of(&nvl72(38)).unwrap();
        assert_eq!((l.hosts, l.per_host, l.nic_hosts), (3, 72, 2));
    }

    #[test]
    fn hosts_without_a_shared_domain_keep_their_own_nics() {
        let mut t = nvl72(4);
        t.nvlink_domain_hosts = None;
        let l = Layout::of(&t).unwrap();
        assert_eq!((l.hosts, l.per_host, l.nic_hosts), (4, 4, 1));
    }
}
