use super::*;
use crate::topology::{GpuTopology, NicGroup, NicKind};

/// A log of the corpus (real NCCL output, crates/report/tests/corpus).
pub(crate) fn corpus(name: &str) -> NcclPath {
    let path = format!(
        "{}/../report/tests/corpus/nccl-info/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    NcclPath::from_text(&text).unwrap()
}

const SOCKET_IB_DISABLED: &str =
    "nccl-tests__dexhunter-allreduce-experiments__allreduce-8node-32gpu-socket-ib-disabled-v2.6.4";
const IB_NO_GDR: &str = "nccl-tests__thomaslie210-nccl-results__allreduce-2node-ib-nogdr";
const P2P_DISABLED: &str =
    "nccl-tests__thomaslie210-nccl-results__allreduce-1node-2gpu-p2p-disabled-shm";
const IB_GDR: &str = "nccl-tests__thomaslie210-nccl-results__allreduce-2node-ib-gdrdma";

pub(crate) fn ib_hosts(hosts: u64) -> Topology {
    Topology {
        hosts,
        ranks_per_host: Some(4),
        gpu: Some(GpuTopology {
            count: 4,
            ..GpuTopology::default()
        }),
        nics: vec![NicGroup {
            kind: NicKind::Infiniband,
            rate_gbit: 100.0,
            count: 1,
            names: vec!["mlx5_0".into()],
            ..NicGroup::default()
        }],
        ..Topology::default()
    }
}

fn gpu(index: u64) -> GpuLinks {
    GpuLinks {
        index,
        numa_node: Some(0),
        pcie_generation: Some(5),
        pcie_max_generation: Some(5),
        pcie_width: Some(16),
        pcie_max_width: Some(16),
        nvlink_active: Some(18),
        nvlink_total: Some(18),
        ..GpuLinks::default()
    }
}

fn with_gpus(mut t: Topology, devices: Vec<GpuLinks>) -> Topology {
    t.gpu.as_mut().unwrap().devices = devices;
    t
}

fn facts<'a>(
    by: Bottleneck,
    t: Option<&'a Topology>,
    p: Option<&'a NcclPath>,
    env: &'a BTreeMap<String, String>,
) -> Facts<'a> {
    Facts {
        bottleneck: Some(by),
        topology: t,
        path: p,
        env,
        channels: p.and_then(|p| p.channels),
    }
}

pub(crate) fn kinds(causes: &[Cause]) -> Vec<&'static str> {
    causes.iter().map(|c| c.finding.label()).collect()
}

#[test]
fn a_socket_fallback_in_a_real_log_is_named_with_nccls_line() {
    let p = corpus(SOCKET_IB_DISABLED);
    let env = BTreeMap::new();
    let t = ib_hosts(8);
    let c = why(0.05, &facts(Bottleneck::Network, Some(&t), Some(&p), &env));
    assert_eq!(kinds(&c)[0], "transport fallback", "{c:?}");
    let Finding::TransportFallback {
        expected,
        used,
        cause,
    } = &c[0].finding
    else {
        unreachable!()
    };
    assert_eq!((expected.as_str(), used.as_str()), ("NET/IB", "NET/Socket"));
    assert_eq!(
        cause.as_deref(),
        Some("NCCL_IB_DISABLE set by environment to 1.")
    );
    assert!(
        c[0].line().contains("NCCL used NET/Socket where NET/IB"),
        "{}",
        c[0].line()
    );
    // Sockets never do GPUDirect RDMA: the fallback is the cause, not GDR.
    assert!(!kinds(&c).contains(&"GPUDirect RDMA off"), "{c:?}");
}

#[test]
fn without_a_topology_the_forced_socket_fallback_still_shows() {
    let p = corpus(SOCKET_IB_DISABLED);
    let env = BTreeMap::new();
    let c = why(0.05, &facts(Bottleneck::Network, None, Some(&p), &env));
    // The same log's GPUs could not reach each other (`Could not enable
    // P2P between dev ...`) and SHM carried them: a second fallback.
    assert_eq!(kinds(&c), ["transport fallback", "transport fallback"]);
    assert!(c[0].evidence.contains("NET/Socket"), "{}", c[0].evidence);
    assert!(
        c[0].evidence.contains("NCCL_IB_DISABLE"),
        "{}",
        c[0].evidence
    );
    assert!(
        c[1].evidence
            .contains("NCCL used SHM where P2P within hosts")
            && c[1].evidence.contains("Could not enable P2P"),
        "{}",
        c[1].evidence
    );
}

#[test]
fn a_row_at_or_above_the_cut_has_no_causes() {
    let p = corpus(SOCKET_IB_DISABLED);
    let env = BTreeMap::new();
    let t = ib_hosts(8);
    let f = facts(Bottleneck::Network, Some(&t), Some(&p), &env);
    assert!(why(LOW_FRACTION, &f).is_empty());
    assert!(why(0.9, &f).is_empty());
    assert!(why(f64::NAN, &f).is_empty());
    assert!(!why(LOW_FRACTION - 0.01, &f).is_empty());
}

#[test]
fn gdr_off_in_a_real_log_gives_nccls_distance_line() {
    let p = corpus(IB_NO_GDR);
    let env = BTreeMap::new();
    let t = ib_hosts(2);
    let c = why(0.2, &facts(Bottleneck::Network, Some(&t), Some(&p), &env));
    assert_eq!(kinds(&c), ["GPUDirect RDMA off"], "{c:?}");
    assert!(
        c[0].evidence
            .contains("GPU Direct RDMA Disabled for GPU 81000"),
        "{}",
        c[0].evidence
    );
    // The same log with GDRDMA on has no cause.
    let ok = corpus(IB_GDR);
    assert!(why(0.2, &facts(Bottleneck::Network, Some(&t), Some(&ok), &env)).is_empty());
}

#[test]
fn gdr_off_only_bears_on_network_rows() {
    let p = corpus(IB_NO_GDR);
    let env = BTreeMap::new();
    assert!(why(0.2, &facts(Bottleneck::Nvlink, None, Some(&p), &env)).is_empty());
}

#[test]
fn p2p_disabled_in_a_real_log_is_a_fallback_to_shm() {
    let p = corpus(P2P_DISABLED);
    let env = BTreeMap::new();
    let c = why(0.1, &facts(Bottleneck::Pcie, None, Some(&p), &env));
    assert_eq!(kinds(&c), ["transport fallback"], "{c:?}");
    assert!(matches!(
        &c[0].finding,
        Finding::TransportFallback { used, .. } if used == "SHM"
    ));
    assert!(c[0]
        .evidence
        .contains("NCCL_P2P_DISABLE set by environment to 1"));
}

#[test]
fn a_narrow_pcie_link_is_named_but_an_idle_generation_is_not() {
    let mut narrow = gpu(3);
    narrow.pcie_width = Some(8);
    narrow.pcie_generation = Some(4);
    let mut idle = gpu(1);
    idle.pcie_generation = Some(1);
    let t = with_gpus(ib_hosts(1), vec![gpu(0), idle, gpu(2), narrow]);
    let env = BTreeMap::new();
    let c = why(0.3, &facts(Bottleneck::Pcie, Some(&t), None, &env));
    assert_eq!(
        c[0].finding,
        Finding::PcieDowntrained {
            gpu: 3,
            gen: 4,
            max_gen: 5,
            width: 8,
            max_width: 16
        }
    );
    assert!(
        c[0].evidence.contains("GPU 3 x8 of x16"),
        "{}",
        c[0].evidence
    );
    assert!(!c[0].evidence.contains("GPU 1"), "{}", c[0].evidence);
    // An NVLink-bound row does not blame PCIe.
    assert!(why(0.3, &facts(Bottleneck::Nvlink, Some(&t), None, &env)).is_empty());
}

#[test]
fn nvlink_links_down_are_named_on_nvlink_rows() {
    let mut down = gpu(5);
    down.nvlink_active = Some(12);
    let t = with_gpus(ib_hosts(1), vec![gpu(0), down]);
    let env = BTreeMap::new();
    let c = why(0.3, &facts(Bottleneck::Nvlink, Some(&t), None, &env));
    assert_eq!(
        c[0].finding,
        Finding::NvlinkInactive {
            gpu: 5,
            active: 12,
            total: 18
        }
    );
    assert!(c[0].evidence.contains("GPU 5 12 of 18"));
    assert!(why(0.3, &facts(Bottleneck::Network, Some(&t), None, &env)).is_empty());
}

#[test]
fn a_gpu_without_a_nic_on_its_socket_is_named() {
    let mut far = gpu(6);
    far.numa_node = Some(1);
    let mut t = with_gpus(ib_hosts(2), vec![gpu(0), far]);
    t.nics[0].numa_node = Some(0);
    let env = BTreeMap::new();
    let c = why(0.3, &facts(Bottleneck::Network, Some(&t), None, &env));
    assert_eq!(
        c[0].finding,
        Finding::NicOtherSocket {
            gpu: 6,
            gpu_numa: 1,
            nic: "mlx5_0".into(),
            nic_numa: 0
        }
    );
    assert!(c[0].evidence.contains("mlx5_0 NUMA 0"), "{}", c[0].evidence);
    // A NIC on each socket: no cause; a NIC whose node is unknown: none.
    t.nics.push(NicGroup {
        names: vec!["mlx5_1".into()],
        numa_node: Some(1),
        ..t.nics[0].clone()
    });
    assert!(machine(&t).is_empty());
    t.nics.truncate(1);
    t.nics[0].numa_node = None;
    assert!(machine(&t).is_empty());
}

#[test]
fn a_channel_cap_in_nccls_lines_or_the_environment_is_named() {
    let mut p = NcclPath::from_text(
        "h:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 2.\n\
         h:1:1 [0] NCCL INFO 2 coll channels, 2 p2p channels, 2 p2p channels per peer\n",
    )
    .unwrap();
    assert_eq!(p.channels, Some(2));
    let env = BTreeMap::new();
    let c = why(0.3, &facts(Bottleneck::Nvlink, None, Some(&p), &env));
    assert_eq!(
        c[0].finding,
        Finding::FewChannels {
            used: 2,
            default: None
        }
    );
    assert!(c[0]
        .evidence
        .contains("NCCL_MAX_NCHANNELS set by environment to 2."));
    // The run's own variable, where NCCL's line is absent.
    p.causes.clear();
    let env = BTreeMap::from([("NCCL_MAX_CTAS".to_string(), "2".to_string())]);
    let c = why(0.3, &facts(Bottleneck::Nvlink, None, Some(&p), &env));
    assert!(
        c[0].evidence.ends_with("NCCL_MAX_CTAS=2"),
        "{}",
        c[0].evidence
    );
    // A cap above what ran is no cause.
    let env = BTreeMap::from([("NCCL_MAX_CTAS".to_string(), "1".to_string())]);
    assert!(why(0.3, &facts(Bottleneck::Nvlink, None, Some(&p), &env)).is_empty());
}

#[test]
fn fewer_channels_than_nics_on_a_network_row_is_named() {
    // A real 2-host log: 2 coll channels; the host described with 4 NICs
    // for its 4 ranks.
    let p = corpus(IB_GDR);
    assert_eq!(p.channels, Some(2));
    let mut t = ib_hosts(2);
    t.nics[0].count = 4;
    let env = BTreeMap::new();
    let c = why(0.3, &facts(Bottleneck::Network, Some(&t), Some(&p), &env));
    assert_eq!(
        c[0].finding,
        Finding::FewChannels {
            used: 2,
            default: Some(4)
        }
    );
}

#[test]
fn causes_come_most_costly_first() {
    let p = corpus(SOCKET_IB_DISABLED);
    let mut narrow = gpu(0);
    narrow.pcie_width = Some(8);
    let mut far = gpu(1);
    far.numa_node = Some(1);
    let mut t = with_gpus(ib_hosts(8), vec![narrow, far]);
    t.nics[0].numa_node = Some(0);
    let env = BTreeMap::new();
    let c = why(0.05, &facts(Bottleneck::Network, Some(&t), Some(&p), &env));
    assert_eq!(
        kinds(&c),
        [
            "transport fallback",
            "PCIe link below its maximum",
            "NIC on the other socket"
        ]
    );
}
