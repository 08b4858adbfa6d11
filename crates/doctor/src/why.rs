//! What on this host can hold a row under its ceiling (issue #50 item 6,
//! docs/ceiling.md "Why a row is low"): the causes that belong to the
//! machine alone ([`collbench_core::why::machine`]: a PCIe link below its
//! width, NVLink links down, a GPU with no NIC on its socket) and, where
//! the host has InfiniBand or RoCE NICs, whether a peer-memory module
//! lets NICs read GPU memory (GPUDirect RDMA).

use super::{Check, Status};
use collbench_core::why::{machine, Cause, Finding};
use collbench_core::{NicKind, Topology};
use std::path::Path;

/// Kernel modules that give NICs GPU memory: NVIDIA's (driver 470 and
/// later) and Mellanox's older one.
const PEER_MEMORY_MODULES: [&str; 2] = ["nvidia_peermem", "nv_peer_mem"];

/// `doctor`'s "why" lines: one WARN per machine cause, a PASS when the
/// GPUs' links were read and none was found, and the GPUDirect RDMA
/// module's line. `modules` is the text of /proc/modules (`None`:
/// unreadable).
pub fn why_checks(t: &Topology, modules: Option<&str>) -> Vec<Check> {
    let mut out: Vec<Check> = machine(t).iter().map(cause_check).collect();
    let read = t.gpu.as_ref().is_some_and(|g| !g.devices.is_empty());
    if out.is_empty() && read {
        out.push(Check::new(
            "why machine",
            Status::Pass,
            "every GPU's PCIe link at its width, no NVLink link down, no GPU without a NIC on its socket",
            "",
        ));
    }
    out.extend(gdr_module_check(t, modules));
    out
}

/// Reads /proc/modules under `root` (`/` on a real host).
pub fn read_modules(root: &Path) -> Option<String> {
    std::fs::read_to_string(root.join("proc/modules")).ok()
}

fn cause_check(c: &Cause) -> Check {
    let hint = match c.finding {
        Finding::PcieDowntrained { .. } => {
            "reseat the card or check its riser and slot; compare nvidia-smi -q's GPU Link Info under load"
        }
        Finding::NvlinkInactive { .. } => {
            "check nvidia-smi nvlink -s and, on NVSwitch systems, the fabric manager; a reset may bring links back"
        }
        Finding::NicOtherSocket { .. } => {
            "put a NIC on each socket's PCIe root, or run those GPUs' ranks where NCCL can reach a NIC on their socket (PXN)"
        }
        _ => "",
    };
    Check::new(
        &format!("why {}", c.finding.label()),
        Status::Warn,
        c.evidence.clone(),
        hint,
    )
}

/// GPUDirect RDMA's kernel module, where InfiniBand or RoCE NICs could
/// use it. A missing module WARNs only: DMA-BUF (NCCL 2.19 and later on
/// the open kernel modules, Linux 5.12 and later) needs none.
fn gdr_module_check(t: &Topology, modules: Option<&str>) -> Option<Check> {
    let rdma = t
        .nics
        .iter()
        .any(|n| matches!(n.kind, NicKind::Infiniband | NicKind::Roce));
    if !rdma {
        return None;
    }
    let name = "why GPUDirect RDMA";
    let Some(text) = modules else {
        return Some(Check::new(
            name,
            Status::Skip,
            "/proc/modules unreadable: peer-memory module unknown",
            "",
        ));
    };
    let loaded = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|m| PEER_MEMORY_MODULES.contains(m));
    Some(match loaded {
        Some(m) => Check::new(
            name,
            Status::Pass,
            format!("{m} loaded: NICs can read GPU memory"),
            "",
        ),
        None => Check::new(
            name,
            Status::Warn,
            format!(
                "{}: neither nvidia_peermem nor nv_peer_mem in /proc/modules",
                Finding::GdrOff.label()
            ),
            "modprobe nvidia_peermem, or use DMA-BUF (NCCL 2.19+, the open kernel modules, Linux 5.12+); without either, NET traffic crosses host memory",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::local_nics;
    use collbench_core::{GpuLinks, GpuTopology};

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn gpu(index: u64, numa: i64) -> GpuLinks {
        GpuLinks {
            index,
            numa_node: Some(numa),
            pcie_generation: Some(5),
            pcie_max_generation: Some(5),
            pcie_width: Some(16),
            pcie_max_width: Some(16),
            nvlink_active: Some(18),
            nvlink_total: Some(18),
            ..GpuLinks::default()
        }
    }

    /// A faked sysfs: `mlx5_0` on NUMA 0, and GPUs as given.
    fn host(devices: Vec<GpuLinks>) -> Topology {
        let d = tempfile::tempdir().unwrap();
        let port = d.path().join("infiniband/mlx5_0/ports/1");
        write(&port.join("state"), "4: ACTIVE");
        write(&port.join("rate"), "400 Gb/sec (4X NDR)");
        write(&port.join("link_layer"), "InfiniBand");
        write(&d.path().join("infiniband/mlx5_0/device/numa_node"), "0");
        let numa: Vec<(u64, Option<i64>)> =
            devices.iter().map(|g| (g.index, g.numa_node)).collect();
        Topology {
            hosts: 1,
            nics: local_nics(d.path(), &numa),
            gpu: Some(GpuTopology {
                count: devices.len() as u64,
                devices,
                ..GpuTopology::default()
            }),
            ..Topology::default()
        }
    }

    const PEERMEM: &str = "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n\
                           nvidia 56807424 10 nvidia_uvm,nvidia_peermem, Live 0x0000000000000000 (POE)\n";

    #[test]
    fn a_healthy_host_passes_both_lines() {
        let t = host(vec![gpu(0, 0), gpu(1, 0)]);
        let c = why_checks(&t, Some(PEERMEM));
        let status: Vec<_> = c.iter().map(|c| (c.name.as_str(), c.status)).collect();
        assert_eq!(
            status,
            [
                ("why machine", Status::Pass),
                ("why GPUDirect RDMA", Status::Pass)
            ]
        );
        assert!(c[1].message.starts_with("nvidia_peermem loaded"));
    }

    #[test]
    fn each_machine_cause_warns_with_its_evidence() {
        let mut narrow = gpu(1, 0);
        narrow.pcie_width = Some(8);
        let mut down = gpu(2, 0);
        down.nvlink_active = Some(16);
        let t = host(vec![gpu(0, 0), narrow, down, gpu(3, 1)]);
        let c = why_checks(&t, Some(PEERMEM));
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "why PCIe link below its maximum",
                "why NVLink links inactive",
                "why NIC on the other socket",
                "why GPUDirect RDMA"
            ]
        );
        assert!(c[..3].iter().all(|c| c.status == Status::Warn));
        assert!(c[0].message.contains("GPU 1 x8 of x16"), "{}", c[0].message);
        assert!(c[1].message.contains("GPU 2 16 of 18"), "{}", c[1].message);
        assert!(c[2].message.contains("GPU 3 on NUMA 1"), "{}", c[2].message);
        assert!(c[2].message.contains("mlx5_0 NUMA 0"), "{}", c[2].message);
    }

    #[test]
    fn a_missing_peer_memory_module_warns_only_where_rdma_nics_are() {
        let t = host(vec![gpu(0, 0)]);
        let modules = "nvidia 56807424 10 nvidia_uvm, Live 0x0 (POE)\nmlx5_ib 4096 0 - Live 0x0\n";
        let c = why_checks(&t, Some(modules));
        assert_eq!(c[1].status, Status::Warn);
        assert!(c[1]
            .message
            .contains("neither nvidia_peermem nor nv_peer_mem"));
        assert!(c[1].hint.contains("modprobe nvidia_peermem"));
        // The older Mellanox module counts.
        let c = why_checks(&t, Some("nv_peer_mem 16384 0 - Live 0x0\n"));
        assert_eq!(c[1].status, Status::Pass);
        // Unreadable: not judged.
        assert_eq!(why_checks(&t, None)[1].status, Status::Skip);
        // No RDMA NIC: no line at all.
        let mut plain = t.clone();
        plain.nics.clear();
        assert_eq!(why_checks(&plain, Some(modules)).len(), 1);
    }

    #[test]
    fn a_faked_root_is_read_for_its_modules() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_modules(d.path()), None);
        write(&d.path().join("proc/modules"), PEERMEM);
        assert_eq!(read_modules(d.path()).as_deref(), Some(PEERMEM));
    }
}
