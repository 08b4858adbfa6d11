//! The gate on paths read from real NCCL logs (crates/report/tests/corpus)
//! with the facts `doctor` finds (NICs, NVLink), and each variant's own
//! ceiling.

use super::*;
use collbench_core::nccl_path::gate::Required;
use collbench_core::{Collective, GpuTopology, NicGroup, NicKind, Topology};
use std::collections::BTreeMap;

/// 8 hosts of 4 GPUs, NCCL 2.6.4, `NCCL_IB_DISABLE=1`: Socket between
/// hosts, SHM within.
const SOCKET_IB_DISABLED: &str = include_str!(
    "../../../report/tests/corpus/nccl-info/nccl-tests__dexhunter-allreduce-experiments__allreduce-8node-32gpu-socket-ib-disabled-v2.6.4.txt"
);

/// One host of 2 GPUs, NCCL 2.23.4, `NCCL_P2P_DISABLE=1`: SHM within.
const P2P_DISABLED: &str = include_str!(
    "../../../report/tests/corpus/nccl-info/nccl-tests__thomaslie210-nccl-results__allreduce-1node-2gpu-p2p-disabled-shm.txt"
);

/// Two hosts of 2 GPUs over IB with GPUDirect RDMA.
const IB_GDR: &str = include_str!(
    "../../../report/tests/corpus/nccl-info/nccl-tests__thomaslie210-nccl-results__allreduce-2node-ib-gdrdma.txt"
);

fn path(log: &str) -> PathSeen {
    PathSeen::nccl(NcclPath::from_text(log).expect("NCCL lines"))
}

/// What `doctor` finds on a host: its GPUs (with NVLink or not) and NICs.
fn facts(hosts: u64, gpus: u64, nvlink_links: u32, nics: &[(NicKind, f64, u64)]) -> Topology {
    Topology {
        hosts,
        ranks_per_host: Some(gpus),
        gpu: Some(GpuTopology {
            count: gpus,
            nvlink_generation: (nvlink_links > 0).then_some(4),
            nvlink_links: Some(nvlink_links),
            nvlink_link_gbps: (nvlink_links > 0).then_some(25.0),
            nvswitch: Some(nvlink_links > 0),
            pcie_generation: Some(4),
            pcie_width: Some(16),
            ..GpuTopology::default()
        }),
        nics: nics
            .iter()
            .map(|&(kind, rate_gbit, count)| NicGroup {
                kind,
                rate_gbit,
                count,
                ..NicGroup::default()
            })
            .collect(),
        ..Topology::default()
    }
}

#[test]
fn ib_devices_with_a_socket_network_fail_naming_ib_disable() {
    let p = path(SOCKET_IB_DISABLED);
    let topo = facts(8, 4, 0, &[(NicKind::Infiniband, 100.0, 1)]);
    let lines = gate_lines(&p, &[], Some(&topo), &BTreeMap::new());
    assert_eq!(lines.len(), 1, "{lines:?}");
    let g = &lines[0];
    assert_eq!(g.status, Status::Fail);
    assert_eq!(
        (g.expected.as_str(), g.used.as_str()),
        ("NET/IB", "NET/Socket")
    );
    assert_eq!(g.because, "InfiniBand NICs on the hosts");
    // The log also says NCCL found no external plugin: both are causes.
    assert_eq!(
        g.causes,
        [
            "NCCL_IB_DISABLE set by environment to 1.",
            "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation"
        ]
    );
    assert!(g.line.contains("cause: NCCL_IB_DISABLE"), "{}", g.line);
    // Ethernet NICs only: Socket is the path they imply, nothing fails.
    let eth = facts(8, 4, 0, &[(NicKind::Ethernet, 10.0, 1)]);
    assert!(gate_lines(&p, &[], Some(&eth), &BTreeMap::new()).is_empty());
}

#[test]
fn required_transports_pass_or_fail_one_line_each() {
    let p = path(SOCKET_IB_DISABLED);
    let lines = gate_lines(
        &p,
        &[Required::Socket, Required::Ib],
        None,
        &BTreeMap::new(),
    );
    let statuses: Vec<(&str, Status)> = lines
        .iter()
        .map(|g| (g.expected.as_str(), g.status))
        .collect();
    assert_eq!(
        statuses,
        [("NET/Socket", Status::Pass), ("NET/IB", Status::Fail)]
    );
    assert_eq!(
        lines[1].line,
        "transport: expected NET/IB (required), NCCL used NET/Socket; cause: NCCL_IB_DISABLE set by environment to 1; NET/Plugin : No plugin found (libnccl-net.so), using internal implementation"
    );
    // A requirement failed and implied by the NICs is said once.
    let topo = facts(8, 4, 0, &[(NicKind::Infiniband, 100.0, 1)]);
    let both = gate_lines(&p, &[Required::Ib], Some(&topo), &BTreeMap::new());
    assert_eq!(both.len(), 1, "{both:?}");
    let ib = gate_lines(
        &path(IB_GDR),
        &[Required::Ib, Required::Gdr],
        Some(&topo),
        &BTreeMap::new(),
    );
    assert!(ib.iter().all(|g| g.status == Status::Pass), "{ib:?}");
}

#[test]
fn nvlink_up_with_p2p_off_fails_naming_p2p_disable() {
    let p = path(P2P_DISABLED);
    let lines = gate_lines(&p, &[], Some(&facts(1, 2, 18, &[])), &BTreeMap::new());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].expected, "P2P within hosts");
    assert_eq!(lines[0].because, "NVLink is up");
    assert!(
        lines[0]
            .causes
            .iter()
            .any(|c| c.contains("NCCL_P2P_DISABLE")),
        "{:?}",
        lines[0].causes
    );
    // PCIe GPUs without NVLink: SHM is no finding.
    assert!(gate_lines(&p, &[], Some(&facts(1, 2, 0, &[])), &BTreeMap::new()).is_empty());
}

#[test]
fn the_cpu_backend_names_its_shared_memory_and_fails_a_requirement() {
    let p = PathSeen::cpu(4, 1);
    assert_eq!(
        p.summary(),
        "cpu backend: shared memory between 4 rank threads of one process (no network)"
    );
    assert!(gate_lines(&p, &[], None, &BTreeMap::new()).is_empty());
    let lines = gate_lines(&p, &[Required::Ib], None, &BTreeMap::new());
    assert_eq!(lines[0].status, Status::Fail);
    assert_eq!(
        lines[0].line,
        "transport: expected NET/IB (required), the job used cpu backend: shared memory between 4 rank threads of one process (no network); cause: the cpu backend does not use NCCL: run with --backend nccl"
    );
    // NCCL ran but its path is unknown: the requirement is not judged.
    let unknown = PathSeen::Unknown { why: "x".into() };
    let lines = gate_lines(&unknown, &[Required::Ib], None, &BTreeMap::new());
    assert_eq!(lines[0].status, Status::Incomplete);
}

#[test]
fn fabric_lists_parse_once() {
    assert_eq!(parse_fabric("all").unwrap(), ALL_VARIANTS);
    assert_eq!(parse_fabric("intra, network,intra").unwrap(), ALL_VARIANTS);
    assert_eq!(parse_fabric("none").unwrap(), []);
    assert_eq!(parse_fabric("network").unwrap(), [Fabric::Network]);
    let e = parse_fabric("nvlink").unwrap_err();
    assert_eq!(
        e,
        "unknown fabric variant 'nvlink' (expected all, none, network, intra)"
    );
    assert!(parse_fabric(",").is_err());
}

/// Two H100 hosts of 8 GPUs with 8 x 400G NICs each.
fn h100x2() -> Topology {
    facts(2, 8, 18, &[(NicKind::Infiniband, 400.0, 8)])
}

#[test]
fn each_variant_has_its_own_ceiling_and_part() {
    let op = (Collective::AllReduce, 1 << 30);
    let topo = h100x2();
    let net = judge_variant(Fabric::Network, op, (40.0, 0), Some(&topo), true);
    let intra = judge_variant(Fabric::Intra, op, (40.0, 0), Some(&topo), true);
    assert_eq!(net.bottleneck.as_deref(), Some("network"), "{net:?}");
    assert_ne!(intra.bottleneck.as_deref(), Some("network"), "{intra:?}");
    let (n, i) = (net.ceiling_gbps.unwrap(), intra.ceiling_gbps.unwrap());
    // One 400G NIC per GPU: 50 GB/s; NVLink within the host: far above.
    assert!((n - 50.0).abs() < 1e-6, "{n}");
    assert!(i > 4.0 * n, "{i} vs {n}");
    // 40 GB/s is healthy through the network and far below NVLink's: a
    // bad NVLink cannot hide behind a good network.
    assert_eq!(net.status, Status::Info, "{}", net.note);
    assert_eq!(intra.status, Status::Warn, "{}", intra.note);
    // NVSwitch hosts reduce in the switch: NVLS sets the host's ceiling.
    assert_eq!(intra.bottleneck.as_deref(), Some("NVLS"), "{intra:?}");
    assert!(intra.note.contains("NVLS is suspect"), "{}", intra.note);
    // A slow NIC warns in the network variant.
    let slow = judge_variant(Fabric::Network, op, (10.0, 0), Some(&topo), true);
    assert_eq!(slow.status, Status::Warn, "{}", slow.note);
    assert!(slow.note.contains("network is suspect"), "{}", slow.note);
    // Wrong elements fail whatever the speed.
    let wrong = judge_variant(Fabric::Intra, op, (400.0, 3), Some(&topo), true);
    assert_eq!(wrong.status, Status::Fail);
}

#[test]
fn a_variant_without_meaning_counts_for_nothing_and_one_not_run_is_incomplete() {
    let line = |status, skipped: Option<&str>| VariantLine {
        variant: Fabric::Network,
        op: "all_reduce".into(),
        size_bytes: 1 << 20,
        path: None,
        busbw_gbps: None,
        ceiling_gbps: None,
        bottleneck: None,
        status,
        skipped: skipped.map(str::to_string),
        note: String::new(),
    };
    let mut report = TransportReport {
        path: PathSeen::cpu(2, 1),
        required: Vec::new(),
        gate: Vec::new(),
        variants: vec![line(Status::Info, Some("one host"))],
    };
    assert_eq!(report.status(), Status::Info);
    report.variants.push(line(Status::Incomplete, None));
    assert_eq!(report.status(), Status::Incomplete);
    assert_eq!(report.named_at(Status::Incomplete), ["network only"]);
    let text = report.text();
    assert!(text.contains("# path measured: cpu backend"), "{text}");
    assert!(text.contains("skipped"), "{text}");
}
