//! The hardware that bounds busbw on this host, for `doctor`'s topology
//! lines and a run's record: GPUs through NVML (model, NVLink version and
//! active links, NVSwitch, PCIe generation and width), NICs through sysfs
//! (rate, link layer, NUMA node, the GPUs on that node), cores and a short
//! memory copy probe. A source that is missing leaves its fields unknown.

use super::{Check, Status};
use collbench_ceiling::links::nvlink_link_gbps;
use collbench_core::{CpuTopology, GpuLinks, GpuTopology, NicGroup, NicKind, Topology};
use nvml_wrapper::{Device, Nvml};
use std::path::Path;

/// This host as a one-host topology (ranks per host left to the job).
pub fn local_topology() -> Topology {
    let gpus = nvml_gpus();
    let gpu_numa: Vec<(u64, Option<i64>)> = gpus
        .as_ref()
        .map(|(_, buses)| {
            buses
                .iter()
                .enumerate()
                .map(|(i, b)| (i as u64, pci_numa_node(b)))
                .collect()
        })
        .unwrap_or_default();
    let gpu = gpus.map(|(mut g, _)| {
        for d in &mut g.devices {
            d.numa_node = d.bus_id.as_deref().and_then(pci_numa_node);
        }
        g
    });
    Topology {
        hosts: 1,
        gpu,
        nics: local_nics(Path::new("/sys/class"), &gpu_numa),
        cpu: Some(CpuTopology {
            cores: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64),
            mem_copy_gbps: None,
            mem_copy_solo_gbps: None,
        }),
        ..Topology::default()
    }
}

/// The GPUs NVML sees (facts of GPU 0) and every GPU's PCI bus id.
fn nvml_gpus() -> Option<(GpuTopology, Vec<String>)> {
    let nvml = Nvml::init().ok()?;
    let count = nvml.device_count().ok().filter(|&c| c > 0)?;
    let buses: Vec<String> = (0..count)
        .filter_map(|i| nvml.device_by_index(i).ok()?.pci_info().ok())
        .map(|p| p.bus_id.to_lowercase())
        .collect();
    let d = nvml.device_by_index(0).ok()?;
    let mut g = GpuTopology {
        model: d.name().ok(),
        count: count as u64,
        pcie_generation: d.current_pcie_link_gen().ok(),
        pcie_width: d.current_pcie_link_width().ok(),
        ..GpuTopology::default()
    };
    nvlink_facts(&d, &buses, &mut g);
    if g.nvswitch == Some(false) {
        let remotes: Vec<Vec<String>> = (0..count)
            .map(|i| {
                nvml.device_by_index(i)
                    .map_or(Vec::new(), |d| link_remotes(&d))
            })
            .collect();
        g.peer_links = crate::peers::peer_matrix(&buses, &remotes).unwrap_or_default();
    }
    g.devices = (0..count)
        .filter_map(|i| Some(gpu_links(i, &nvml.device_by_index(i).ok()?)))
        .collect();
    g.nvls = multicast_supported();
    if std::env::var("NCCL_NVLS_ENABLE").as_deref() == Ok("0") {
        g.nvls = Some(false);
    }
    Some((g, buses))
}

/// One GPU's links as NVML reports them (`nvidia-smi -q`'s "GPU Link
/// Info" and `nvidia-smi nvlink -s`); its NUMA node is filled from sysfs
/// by the caller.
fn gpu_links(index: u32, d: &Device) -> GpuLinks {
    let (mut total, mut active) = (0, 0);
    // NVML numbers links 0..NVML_NVLINK_MAX_LINKS (18); a link it answers
    // for exists, up or down.
    for l in 0..18 {
        if let Ok(up) = d.link_wrapper_for(l).is_active() {
            total += 1;
            active += u32::from(up);
        }
    }
    GpuLinks {
        index: u64::from(index),
        bus_id: d.pci_info().ok().map(|p| p.bus_id),
        numa_node: None,
        pcie_generation: d.current_pcie_link_gen().ok(),
        pcie_max_generation: d.max_pcie_link_gen().ok(),
        pcie_width: d.current_pcie_link_width().ok(),
        pcie_max_width: d.max_pcie_link_width().ok(),
        nvlink_active: Some(active),
        nvlink_total: Some(total),
    }
}

/// `CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED` (cuda.h): the attribute NCCL
/// reads before it offers NVLS.
const CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: i32 = 132;

/// Whether GPU 0 can use NVLink SHARP (NVLS): CUDA's multicast support,
/// which needs NVSwitches and their fabric manager; NCCL offers NVLS only
/// where it is set. `None` where libcuda cannot say (no driver, a driver
/// older than the attribute).
fn multicast_supported() -> Option<bool> {
    type Init = unsafe extern "C" fn(u32) -> i32;
    type Get = unsafe extern "C" fn(*mut i32, i32) -> i32;
    type Attr = unsafe extern "C" fn(*mut i32, i32, i32) -> i32;
    // SAFETY: cuInit, cuDeviceGet and cuDeviceGetAttribute take plain
    // integers and write only the int they are given; the library stays
    // loaded while they run.
    unsafe {
        let lib = libloading::Library::new("libcuda.so.1").ok()?;
        let init = lib.get::<Init>(b"cuInit\0").ok()?;
        let get = lib.get::<Get>(b"cuDeviceGet\0").ok()?;
        let attr = lib.get::<Attr>(b"cuDeviceGetAttribute\0").ok()?;
        let mut dev = 0;
        let mut value = 0;
        (init(0) == 0
            && get(&mut dev, 0) == 0
            && attr(&mut value, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev) == 0)
            .then_some(value != 0)
    }
}

/// NVLink: active links, their version and rate, and whether they end in
/// an NVSwitch (a remote end that is none of this host's GPUs).
fn nvlink_facts(d: &Device, gpu_buses: &[String], g: &mut GpuTopology) {
    let mut active = 0;
    let mut version = None;
    let mut to_switch = None;
    // NVML numbers links 0..NVML_NVLINK_MAX_LINKS (18).
    for l in 0..18 {
        let link = d.link_wrapper_for(l);
        if !link.is_active().unwrap_or(false) {
            continue;
        }
        active += 1;
        version = version.or_else(|| link.version().ok());
        if to_switch.is_none() {
            to_switch = link
                .remote_pci_info()
                .ok()
                .map(|p| !gpu_buses.contains(&p.bus_id.to_lowercase()));
        }
    }
    g.nvlink_links = Some(active);
    g.nvlink_generation = version;
    g.nvlink_link_gbps = version.and_then(nvlink_link_gbps);
    g.nvswitch = if active == 0 { Some(false) } else { to_switch };
}

/// The far end of each of a GPU's active NVLinks, by PCI bus id.
fn link_remotes(d: &Device) -> Vec<String> {
    (0..18)
        .map(|l| d.link_wrapper_for(l))
        .filter(|link| link.is_active().unwrap_or(false))
        .filter_map(|link| link.remote_pci_info().ok())
        .map(|p| p.bus_id.to_lowercase())
        .collect()
}

/// NUMA node of a PCI device (`00000000:00:06.0` as NVML writes it).
fn pci_numa_node(bus_id: &str) -> Option<i64> {
    // sysfs names the domain with 4 digits, NVML with 8.
    let short = bus_id.get(bus_id.len().saturating_sub(12)..)?;
    read_i64(
        &Path::new("/sys/bus/pci/devices")
            .join(short)
            .join("numa_node"),
    )
}

fn read_i64(p: &Path) -> Option<i64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn read_text(p: &Path) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Active RDMA ports (InfiniBand, RoCE, EFA) under `class/infiniband`;
/// where there are none, physical Ethernet interfaces under `class/net`
/// with a known speed. Grouped by kind, rate and NUMA node.
pub fn local_nics(class: &Path, gpu_numa: &[(u64, Option<i64>)]) -> Vec<NicGroup> {
    let mut found: Vec<(NicKind, f64, Option<i64>, String)> = Vec::new();
    let ib = class.join("infiniband");
    for dev in entries(&ib) {
        let numa = read_i64(&ib.join(&dev).join("device/numa_node"));
        for port in entries(&ib.join(&dev).join("ports")) {
            let dir = ib.join(&dev).join("ports").join(&port);
            if !read_text(&dir.join("state")).ends_with("ACTIVE") {
                continue;
            }
            // "400 Gb/sec (4X NDR)"
            let rate = read_text(&dir.join("rate"));
            let Some(gbit) = rate.split_whitespace().next().and_then(|r| r.parse().ok()) else {
                continue;
            };
            let kind = if dev.starts_with("efa") || dev.starts_with("rdmap") {
                NicKind::Efa
            } else if read_text(&dir.join("link_layer")) == "Ethernet" {
                NicKind::Roce
            } else {
                NicKind::Infiniband
            };
            found.push((kind, gbit, numa, dev.clone()));
        }
    }
    if found.is_empty() {
        let net = class.join("net");
        for ifc in entries(&net) {
            let dir = net.join(&ifc);
            // Virtual interfaces (lo, bridges, veth) have no device link.
            if !dir.join("device").exists() || read_text(&dir.join("operstate")) != "up" {
                continue;
            }
            // Mb/s; -1 where the driver does not say.
            let Some(mbit) = read_i64(&dir.join("speed")).filter(|&s| s > 0) else {
                continue;
            };
            let numa = read_i64(&dir.join("device/numa_node"));
            found.push((NicKind::Ethernet, mbit as f64 / 1000.0, numa, ifc));
        }
    }
    group(found, gpu_numa)
}

fn group(
    found: Vec<(NicKind, f64, Option<i64>, String)>,
    gpu_numa: &[(u64, Option<i64>)],
) -> Vec<NicGroup> {
    let mut groups: Vec<NicGroup> = Vec::new();
    for (kind, rate, numa, name) in found {
        let numa = numa.filter(|&n| n >= 0);
        match groups
            .iter_mut()
            .find(|g| g.kind == kind && g.rate_gbit == rate && g.numa_node == numa)
        {
            Some(g) => {
                g.count += 1;
                g.names.push(name);
            }
            None => groups.push(NicGroup {
                kind,
                rate_gbit: rate,
                count: 1,
                names: vec![name],
                numa_node: numa,
                near_gpus: gpu_numa
                    .iter()
                    .filter(|(_, n)| numa.is_some() && *n == numa)
                    .map(|(i, _)| *i)
                    .collect(),
                probe: None,
            }),
        }
    }
    groups
}

/// `doctor`'s topology lines (information: always PASS or SKIP): the
/// GPUs, each group of NICs, the cores.
pub fn topology_checks(t: &Topology) -> Vec<Check> {
    let mut out = vec![gpu_check(t.gpu.as_ref())];
    out.extend(nic_checks(&t.nics));
    out.extend(t.cpu.as_ref().map(cpu_check));
    out
}

/// "unknown", for a fact no source gave.
fn unknown() -> String {
    "unknown".to_string()
}

/// The GPUs' line: count and model, NVLink, NVSwitch, PCIe; SKIP when
/// NVML saw none.
fn gpu_check(gpu: Option<&GpuTopology>) -> Check {
    let Some(g) = gpu else {
        return Check::new(
            "topology gpu",
            Status::Skip,
            "no GPU seen (NVML absent or no device)",
            "",
        );
    };
    let nvlink = match (g.nvlink_links, g.nvlink_generation) {
        (Some(0), _) => "no active NVLink".to_string(),
        (Some(l), v) => format!(
            "NVLink {} x{l} active{}",
            v.map_or_else(unknown, |v| v.to_string()),
            g.nvlink_link_gbps
                .map(|r| format!(" ({:.0} GB/s per direction)", r * l as f64))
                .unwrap_or_default()
        ),
        (None, _) => "NVLink unknown".into(),
    };
    let switch = match g.nvswitch {
        Some(true) => "NVSwitch".to_string(),
        Some(false) if !g.peer_links.is_empty() => {
            format!("no NVSwitch ({})", crate::peers::pairs_words(&g.peer_links))
        }
        Some(false) => "no NVSwitch".to_string(),
        None => "NVSwitch unknown".to_string(),
    };
    let nvls = match g.nvls {
        Some(true) => "NVLS",
        Some(false) => "no NVLS",
        None => "NVLS unknown",
    };
    let pcie = format!(
        "PCIe gen{} x{}",
        g.pcie_generation.map_or_else(unknown, |v| v.to_string()),
        g.pcie_width.map_or_else(unknown, |v| v.to_string())
    );
    Check::new(
        "topology gpu",
        Status::Pass,
        format!(
            "{}x {}, {nvlink}, {switch}, {nvls}, {pcie}",
            g.count,
            g.model.clone().unwrap_or_else(unknown)
        ),
        "",
    )
}

/// One line per group of NICs (kind, rate, names, NUMA node, the GPUs
/// near them); one SKIP line when there are none.
fn nic_checks(nics: &[NicGroup]) -> Vec<Check> {
    if nics.is_empty() {
        return vec![Check::new(
            "topology nics",
            Status::Skip,
            "no active RDMA port nor Ethernet interface with a known speed: network unknown (emulated hosts get a loopback TCP probe)",
            "",
        )];
    }
    nics.iter()
        .map(|n| {
            Check::new(
                "topology nics",
                Status::Pass,
                format!(
                    "{}x {:?} {} Gbit/s ({}), NUMA {}{}",
                    n.count,
                    n.kind,
                    n.rate_gbit,
                    n.names.join(" "),
                    n.numa_node.map_or_else(unknown, |v| v.to_string()),
                    if n.near_gpus.is_empty() {
                        String::new()
                    } else {
                        format!(", near GPUs {:?}", n.near_gpus)
                    }
                ),
                "",
            )
        })
        .collect()
}

/// The cores' line, with the memory copy probe's figure where it ran.
fn cpu_check(c: &CpuTopology) -> Check {
    Check::new(
        "topology cpu",
        Status::Pass,
        format!(
            "{} cores, memory copy {}",
            c.cores.map_or_else(unknown, |v| v.to_string()),
            c.mem_copy_gbps
                .map_or_else(unknown, |v| format!("{v:.1} GB/s (probe)"))
        ),
        "",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn rdma_ports_group_by_rate_and_numa_and_name_their_gpus() {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("infiniband");
        for (dev, numa) in [("mlx5_0", "0"), ("mlx5_1", "0"), ("mlx5_2", "1")] {
            write(&ib.join(dev).join("ports/1/state"), "4: ACTIVE");
            write(&ib.join(dev).join("ports/1/rate"), "400 Gb/sec (4X NDR)");
            write(&ib.join(dev).join("ports/1/link_layer"), "InfiniBand");
            write(&ib.join(dev).join("device/numa_node"), numa);
        }
        let nics = local_nics(d.path(), &[(0, Some(0)), (1, Some(1))]);
        assert_eq!(nics.len(), 2);
        assert_eq!(
            (nics[0].count, nics[0].rate_gbit, nics[0].kind),
            (2, 400.0, NicKind::Infiniband)
        );
        assert_eq!(nics[0].near_gpus, vec![0]);
        assert_eq!(nics[1].near_gpus, vec![1]);
    }

    #[test]
    fn no_sysfs_is_an_empty_list_not_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(local_nics(d.path(), &[]).is_empty());
    }

    #[test]
    fn roce_is_an_rdma_port_on_ethernet() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("infiniband/mlx5_3/ports/1");
        write(&p.join("state"), "4: ACTIVE");
        write(&p.join("rate"), "200 Gb/sec (2X HDR)");
        write(&p.join("link_layer"), "Ethernet");
        let nics = local_nics(d.path(), &[]);
        assert_eq!((nics[0].kind, nics[0].rate_gbit), (NicKind::Roce, 200.0));
    }
}
