//! The bandwidths a topology offers one GPU and one host, in GB/s per
//! direction: the inputs of every formula of the model (`model.rs`).

use collbench_core::{Bottleneck, GpuLinkKind, Topology};

/// PCIe payload rate per lane and direction, GB/s, by generation (line
/// rate after 8b/10b or 128b/130b encoding: gen3 8 GT/s, each generation
/// after doubles it; gen6's FLIT mode keeps the 242/256 efficiency).
pub fn pcie_lane_gbps(generation: u32) -> Option<f64> {
    Some(match generation {
        1 => 0.25,
        2 => 0.5,
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    })
}

/// The share of an NVLink's data rate that NCCL's kernels can fill with
/// payload: an SM writes at most 128 B per NVLink packet, behind a 16 B
/// header flit (copy engines use 256 B, but NCCL's collectives run on
/// SMs). Sources: NCCL's maintainer in nccl-tests#149 ("25GB/s ...
/// converts to ~20GB/s effective ... SMs are limited to 128B payload
/// size") and NCCL#1397, where Nsight showed request headers at 1/8 of the
/// user data on Hopper. Bidirectional traffic costs a little more (NCCL
/// assumes 20.6 GB/s per NVLink 4 link); that part is not counted, so this
/// stays a bound: the h200x2 anchor's reduce reaches 372 GB/s of the 400
/// it gives 18 NVLink 4 links.
pub const NVLINK_SM_PAYLOAD_SHARE: f64 = 128.0 / 144.0;

/// The share of a PCIe link's line rate that an SM's writes can fill with
/// payload: NCCL's kernels store 128 B at a time (the maintainer's "SMs
/// are limited to 128B payload size", nccl-tests#149, said of NVLink; a
/// GPU's PCIe writes are cut the same way), and each PCIe transaction
/// layer packet carries 24 B besides its payload (a 4-byte framing token
/// with the sequence number, a 16-byte header for a 64-bit address, a
/// 4-byte LCRC; PCIe 3.0 and later). 128 / 152 = 0.84: a gen5 x16 link
/// (63 GB/s) carries at most 53 GB/s of NCCL's data a direction. Copy
/// engines write 256 B packets and reach 0.86 (54 GB/s measured
/// peer-to-peer on RTX PRO 6000 hosts), which NCCL's SM-driven
/// transfers do not use.
pub const PCIE_SM_PAYLOAD_SHARE: f64 = 128.0 / 152.0;

/// The share of an Infinity Fabric (xGMI) link's rate that carries data:
/// AMD gives each MI300X link "up to 64 GB/s" and says CRC and protocol
/// overhead "reduce the usable bandwidth to approximately 48 GB/s per
/// link", "about 75% of the theoretical peak" (ROCm blog, "Understanding
/// RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025).
pub const XGMI_PAYLOAD_SHARE: f64 = 0.75;

/// What one GPU can send to its peers on the host, and through what.
#[derive(Debug, Clone, PartialEq)]
pub struct IntraLink {
    /// Payload GB/s per direction.
    pub gbps: f64,
    pub via: Bottleneck,
    /// How `gbps` was reached, for a ceiling's `why`.
    pub how: String,
}

/// The payload share of one GPU-to-GPU link of the topology's kind, the
/// part it names, and why, for a `why`.
pub fn gpu_link_share(topo: &Topology) -> (f64, Bottleneck, &'static str) {
    let kind = topo.gpu.as_ref().and_then(|g| g.link_kind);
    match kind {
        Some(GpuLinkKind::Xgmi) => (
            XGMI_PAYLOAD_SHARE,
            Bottleneck::Xgmi,
            "0.75: AMD's usable 48 of an Infinity Fabric link's 64 GB/s after CRC and protocol overhead",
        ),
        Some(GpuLinkKind::Nvlink) | None => (
            NVLINK_SM_PAYLOAD_SHARE,
            Bottleneck::Nvlink,
            "8/9: an SM's NVLink packet carries 128 B behind a 16 B header",
        ),
    }
}

/// The fastest path from a GPU to its peers on the host: its GPU-to-GPU
/// links where it has active ones (links x rate per link x the link's
/// payload share), else its PCIe link (lanes x rate per lane x the SM
/// payload share).
pub fn intra_link(topo: &Topology) -> Option<IntraLink> {
    let gpu = topo.gpu.as_ref()?;
    if let (Some(links), Some(rate)) = (gpu.nvlink_links, gpu.nvlink_link_gbps) {
        if links > 0 && rate > 0.0 {
            let (share, via, why) = gpu_link_share(topo);
            return Some(IntraLink {
                gbps: links as f64 * rate * share,
                via,
                how: format!("{links} links x {rate} GB/s x {why}"),
            });
        }
    }
    let generation = gpu.pcie_generation?;
    let lane = pcie_lane_gbps(generation)?;
    let width = gpu.pcie_width?;
    Some(IntraLink {
        gbps: pcie_payload_gbps(generation, width)?,
        via: Bottleneck::Pcie,
        how: format!(
            "gen{generation} x{width}, {:.1} GB/s of line rate x 128/152: an SM's PCIe packet carries 128 B behind 24 B of framing, header and CRC",
            lane * width as f64
        ),
    })
}

/// The payload an SM can put on a PCIe link of `generation` and `width`
/// lanes, GB/s per direction ([`PCIE_SM_PAYLOAD_SHARE`] of line rate).
pub fn pcie_payload_gbps(generation: u32, width: u32) -> Option<f64> {
    Some(pcie_lane_gbps(generation)? * width as f64 * PCIE_SM_PAYLOAD_SHARE)
}

/// NVLink data rate of one link per direction, GB/s, by generation
/// (NVIDIA's per-GPU totals over links: NVLink 3 on A100 600 GB/s both
/// ways over 12 links, NVLink 4 on H100 900 over 18, NVLink 5 on B200
/// 1,800 over 18).
pub fn nvlink_link_gbps(generation: u32) -> Option<f64> {
    Some(match generation {
        1 => 20.0,
        2..=4 => 25.0,
        5 => 50.0,
        _ => return None,
    })
}

/// Whether the topology says its switches reduce (NVLS) on a GPU that has
/// it (NVLink 4 and newer).
pub fn has_nvls(topo: &Topology) -> bool {
    topo.gpu
        .as_ref()
        .is_some_and(|g| g.nvls == Some(true) && g.nvlink_generation.is_some_and(|v| v >= 4))
}

/// Whether the switches may reduce though the topology does not say:
/// NVSwitches on NVLink 4 or newer with `nvls` unknown (a driver that
/// could not tell, a file that left it out).
pub fn nvls_possible(topo: &Topology) -> bool {
    topo.gpu.as_ref().is_some_and(|g| {
        g.nvls.is_none() && g.nvswitch == Some(true) && g.nvlink_generation.is_some_and(|v| v >= 4)
    })
}

/// NCCL's NVLS efficiency by GPU generation (`nvlsEfficiency` in NCCL's
/// src/graph/tuning.cc: Hopper 0.85, Blackwell 0.74): the share of link
/// rate the multimem reduction streams at. Hopper's where the generation
/// is unknown (NCCL reported NVLS, so the GPU has it).
pub fn nvls_efficiency(topo: &Topology) -> f64 {
    match topo.gpu.as_ref().and_then(|g| g.nvlink_generation) {
        Some(g) if g >= 5 => 0.74,
        _ => 0.85,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::GpuTopology;

    fn gpu(g: GpuTopology) -> Topology {
        Topology {
            hosts: 1,
            gpu: Some(g),
            ..Topology::default()
        }
    }

    #[test]
    fn nvlink_wins_over_pcie() {
        let t = gpu(GpuTopology {
            count: 8,
            nvlink_links: Some(18),
            nvlink_link_gbps: Some(25.0),
            pcie_generation: Some(5),
            pcie_width: Some(16),
            ..GpuTopology::default()
        });
        let l = intra_link(&t).unwrap();
        // 18 x 25 GB/s of line rate, 8/9 of it payload: 400 GB/s.
        assert_eq!(l.via, Bottleneck::Nvlink);
        assert!((l.gbps - 400.0).abs() < 1e-9, "{}", l.gbps);
        assert!(l.how.contains("18 links x 25 GB/s"), "{}", l.how);
    }

    #[test]
    fn pcie_gen4_x16_carries_about_26_5_gbps_of_payload() {
        let t = gpu(GpuTopology {
            count: 2,
            nvlink_links: Some(0),
            pcie_generation: Some(4),
            pcie_width: Some(16),
            ..GpuTopology::default()
        });
        let l = intra_link(&t).unwrap();
        assert_eq!(l.via, Bottleneck::Pcie);
        // 31.5 GB/s of line rate, 128 of every 152 bytes payload.
        assert!((l.gbps - 26.53).abs() < 0.01, "{}", l.gbps);
        assert!(l.how.contains("31.5 GB/s of line rate"), "{}", l.how);
    }

    #[test]
    fn nvls_is_possible_only_where_unknown_on_nvlink4_switches() {
        let mut g = GpuTopology {
            count: 8,
            nvlink_generation: Some(4),
            nvswitch: Some(true),
            ..GpuTopology::default()
        };
        assert!(nvls_possible(&gpu(g.clone())));
        g.nvls = Some(false);
        assert!(!nvls_possible(&gpu(g.clone())));
        g.nvls = None;
        g.nvlink_generation = Some(3);
        assert!(!nvls_possible(&gpu(g)));
    }

    #[test]
    fn nothing_known_is_none() {
        assert_eq!(intra_link(&gpu(GpuTopology::default())), None);
    }
}
