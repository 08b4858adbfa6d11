//! What the hardware under a run is: the GPUs, NICs and host memory that
//! bound its bandwidth, found at run time (`doctor`, the runner's probe) or
//! described in a topology file (`collbench expect --topology FILE`).
//!
//! Plain data: every field a source could not tell is `None` (shown as
//! "unknown"), never an error. The ceiling model (`collbench-ceiling`)
//! reads it; [`crate::Record::topology`] keeps it with the results.

use serde::{Deserialize, Serialize};

/// The machine a run used or a file describes: identical hosts, and how
/// the job's ranks sit on them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// A name for people (`GKE A3 Mega`), where a file gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where the description's figures come from (a vendor page, a probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Hosts in the job.
    pub hosts: u64,
    /// Ranks on each host (the job's layout; a file may leave it to the
    /// GPU count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks_per_host: Option<u64>,
    /// Communicators of this shape that run at once on each host and share
    /// its NICs (nccl-tests' NCCL_TESTS_SPLIT_MASK: mask 7 on 8-GPU hosts
    /// is 8 of them, one rank per host each); absent: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_comms: Option<u64>,
    /// Hosts that share one NVLink fabric (GB200 NVL72: 18 trays); absent
    /// or 1 where NVLink stops at the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain_hosts: Option<u64>,
    /// The GPUs of one host, where there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTopology>,
    /// The NICs of one host, grouped by kind and rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<NicGroup>,
    /// The CPU side of one host (cores, memory bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTopology>,
}

/// One host's GPUs, alike (a mixed host reports its first GPU's facts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuTopology {
    /// Marketing name (`NVIDIA H200`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// GPUs on the host.
    pub count: u64,
    /// NVLink generation (3: A100, 4: H100/H200, 5: B200/GB200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_generation: Option<u32>,
    /// What the GPU-to-GPU links below are: NVLink (where absent) or AMD
    /// Infinity Fabric (`xgmi`: MI250X, MI300X, MI325X boards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_kind: Option<GpuLinkKind>,
    /// Active GPU-to-GPU links per GPU, NVLink or Infinity Fabric (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_links: Option<u32>,
    /// Data rate of one link, GB/s in each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_link_gbps: Option<f64>,
    /// Whether the GPUs meet in NVSwitches (every pair at full NVLink rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvswitch: Option<bool>,
    /// Where GPUs are joined point to point without a switch: row i,
    /// column j is the number of links between GPU i and GPU j
    /// (`nvidia-smi topo -m`'s NV#, one per Infinity Fabric link), 0 where
    /// the pair has none and talks through PCIe. count x count, symmetric,
    /// 0 on the diagonal. Absent: each GPU's links reach every peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_links: Vec<Vec<u32>>,
    /// Whether the switches reduce in-network (NVLink SHARP, NCCL's NVLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvls: Option<bool>,
    /// PCIe generation of the GPU's link (current, not maximum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_generation: Option<u32>,
    /// PCIe lanes of the GPU's link (current).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    /// Each GPU's own links and NUMA node, where found at run time (a
    /// host's GPUs can differ: one card trained narrower, one NVLink
    /// down). The facts above are GPU 0's, for the ceiling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<GpuLinks>,
}

/// The kind of the GPU-to-GPU links of [`GpuTopology`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GpuLinkKind {
    /// NVIDIA NVLink (through NVSwitches or direct).
    #[default]
    Nvlink,
    /// AMD Infinity Fabric (xGMI) links between Instinct GPUs.
    Xgmi,
}

/// One GPU's PCIe link, NVLink links and NUMA node, as NVML and sysfs
/// tell them (`nvidia-smi -q`'s "GPU Link Info": current and maximum
/// generation and width). Every fact a source could not tell is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuLinks {
    /// NVML's index of the GPU on its host.
    pub index: u64,
    /// PCI bus id (`00000000:1B:00.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// NUMA node of the GPU's PCI device (sysfs `numa_node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i64>,
    /// PCIe generation the link runs at now (an idle GPU lowers it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_generation: Option<u32>,
    /// The highest PCIe generation the GPU and its slot allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_generation: Option<u32>,
    /// PCIe lanes the link trained to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    /// The most lanes the GPU and its slot allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_width: Option<u32>,
    /// NVLink links up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_active: Option<u32>,
    /// NVLink links the GPU has (NVML answers for them, up or down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_total: Option<u32>,
}

/// Kind of network a NIC speaks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NicKind {
    Infiniband,
    Roce,
    Efa,
    Ethernet,
    /// NCCL's socket transport over the loopback device (emulated hosts).
    Loopback,
    #[default]
    Unknown,
}

/// NICs of one host that share kind and rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NicGroup {
    #[serde(default)]
    pub kind: NicKind,
    /// Line rate of one NIC, Gbit/s (as sysfs and vendors state it).
    pub rate_gbit: f64,
    /// NICs in the group.
    #[serde(default = "one")]
    pub count: u64,
    /// Device names (`mlx5_0`, `eth0`), where found at run time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// NUMA node of the NICs, where sysfs tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i64>,
    /// GPU indices on the same NUMA node, where known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub near_gpus: Vec<u64>,
    /// Where the rate came from when it was measured, not read
    /// (`loopback TCP probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

fn one() -> u64 {
    1
}

/// The CPU side of one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CpuTopology {
    /// Logical cores the process may run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u64>,
    /// Host memory copy bandwidth, GB/s of bytes copied (each byte read
    /// once and written once), all cores together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_copy_gbps: Option<f64>,
    /// The same with one thread alone: the fastest one rank writes, which
    /// bounds a run whose writers are fewer than the cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_copy_solo_gbps: Option<f64>,
}

impl Topology {
    /// Ranks on each host: the job's figure, else one per GPU.
    pub fn ranks_per_host(&self) -> Option<u64> {
        self.ranks_per_host
            .or_else(|| self.gpu.as_ref().map(|g| g.count))
            .filter(|&r| r > 0)
    }

    /// The share of a host's NICs one communicator has, GB/s per
    /// direction: all of them, divided among
    /// [`Topology::concurrent_comms`] where several run at once.
    pub fn comm_net_gbps(&self) -> Option<f64> {
        let comms = self.concurrent_comms.unwrap_or(1).max(1) as f64;
        self.host_net_gbps().map(|n| n / comms)
    }

    /// Line rate of all NICs of a host, GB/s per direction; `None` when no
    /// NIC is known.
    pub fn host_net_gbps(&self) -> Option<f64> {
        let sum: f64 = self
            .nics
            .iter()
            .map(|n| n.rate_gbit / 8.0 * n.count as f64)
            .sum();
        (sum > 0.0).then_some(sum)
    }

    /// Line rate of the fastest single NIC, GB/s per direction.
    pub fn nic_gbps(&self) -> Option<f64> {
        self.nics
            .iter()
            .map(|n| n.rate_gbit / 8.0)
            .filter(|r| *r > 0.0)
            .reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_net_sums_every_nic_in_gbytes() {
        let t = Topology {
            hosts: 2,
            nics: vec![NicGroup {
                rate_gbit: 400.0,
                count: 8,
                ..NicGroup::default()
            }],
            ..Topology::default()
        };
        assert_eq!(t.host_net_gbps(), Some(400.0));
        assert_eq!(t.nic_gbps(), Some(50.0));
    }

    #[test]
    fn ranks_per_host_falls_back_to_gpus() {
        let t = Topology {
            hosts: 1,
            gpu: Some(GpuTopology {
                count: 8,
                ..GpuTopology::default()
            }),
            ..Topology::default()
        };
        assert_eq!(t.ranks_per_host(), Some(8));
    }
}
