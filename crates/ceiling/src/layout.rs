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

    /// All ranks of the job.
    pub(crate) fn ranks(self) -> f64 {
        (self.hosts * self.per_host) as f64
    }
}
