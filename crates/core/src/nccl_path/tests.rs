use super::gate::{implied, require, Required};
use super::*;
use crate::topology::{GpuTopology, NicGroup, NicKind, Topology};
use std::collections::BTreeMap;

const IB_2NODE: &str = "\
node1:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.4<0>
node1:12345:12345 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
NCCL version 2.18.5+cuda12.2
#                                                              out-of-place
node1:12345:12400 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.4<0>
node1:12345:12400 [0] NCCL INFO Using network IB
node1:12345:12400 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
node1:12345:12400 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA
node1:12345:12400 [0] NCCL INFO Channel 01/0 : 15[7] -> 0[0] [receive] via NET/IB/1/GDRDMA
node1:12345:12400 [0] NCCL INFO Channel 02/0 : 0[0] -> 8[0] [send] via NET/IB/0(1)/GDRDMA
";

#[test]
fn an_infiniband_job_is_read_to_its_paths() {
    let p = NcclPath::from_text(IB_2NODE).unwrap();
    assert_eq!(p.version.as_deref(), Some("2.18.5"));
    assert_eq!(p.net.as_deref(), Some("IB"));
    assert_eq!(p.nics, ["mlx5_0:1", "mlx5_1:1"]);
    assert!(p.link_layers.contains("IB"));
    assert_eq!(p.gdr, Some(true));
    assert!(p.pxn);
    assert_eq!(
        p.transports.iter().copied().collect::<Vec<_>>(),
        [Transport::P2p, Transport::Net]
    );
    assert_eq!(p.p2p_kinds.iter().collect::<Vec<_>>(), ["IPC"]);
    assert_eq!(p.pairs.len(), 4);
    assert_eq!(p.pairs[0].from, 0);
    assert_eq!(p.pairs[0].to, 1);
    // The plugin line of a healthy IB job is kept as evidence, but the
    // gate does not blame it while IB is in use.
    assert!(require(
        &p,
        &[Required::Ib, Required::P2p, Required::Gdr],
        &BTreeMap::new()
    )
    .is_empty());
    assert_eq!(p.summary(), "NET/IB (IB, GDRDMA, PXN); P2P/IPC");
}

const SOCKET_FALLBACK: &str = "\
[1,0]<stdout>:host-a:101:101 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
[1,0]<stdout>:host-a:101:101 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
[1,0]<stdout>:host-a:101:101 [0] NCCL INFO Using network Socket
[1,0]<stdout>:host-a:101:130 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
[1,0]<stdout>:host-a:101:130 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
";

#[test]
fn a_socket_fallback_names_its_cause_and_fails_an_ib_gate() {
    let p = NcclPath::from_text(SOCKET_FALLBACK).unwrap();
    assert_eq!(p.net.as_deref(), Some("Socket"));
    assert_eq!(p.gdr, Some(false));
    assert_eq!(p.nics, ["eth0"]);
    let f = require(&p, &[Required::Ib], &BTreeMap::new());
    assert_eq!(f.len(), 1);
    let line = f[0].to_string();
    assert_eq!(
        line,
        "transport: expected NET/IB (required), NCCL used NET/Socket; cause: NCCL_IB_DISABLE set by environment to 1"
    );
    assert!(require(&p, &[Required::Socket], &BTreeMap::new()).is_empty());
}

#[test]
fn rdma_nics_imply_that_socket_is_a_fault() {
    let p = NcclPath::from_text(SOCKET_FALLBACK).unwrap();
    let topo = Topology {
        hosts: 2,
        nics: vec![NicGroup {
            kind: NicKind::Infiniband,
            rate_gbit: 400.0,
            ..Default::default()
        }],
        ..Default::default()
    };
    let f = implied(&p, &topo, &BTreeMap::new());
    assert_eq!(f.len(), 1);
    assert!(
        f[0].to_string().contains("InfiniBand NICs on the hosts"),
        "{}",
        f[0]
    );
    // Loopback-only hosts (emulated): Socket is what they have.
    let lo = Topology {
        hosts: 2,
        nics: vec![NicGroup {
            kind: NicKind::Loopback,
            rate_gbit: 100.0,
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(implied(&p, &lo, &BTreeMap::new()).is_empty());
}

#[test]
fn efa_through_aws_ofi_nccl_is_ofi() {
    let text = "\
ip-10-0-0-1:20:20 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
ip-10-0-0-1:20:20 [0] NCCL INFO Using network AWS Libfabric
ip-10-0-0-1:20:50 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA
";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.net.as_deref(), Some("OFI"));
    assert!(p.link_layers.contains("efa"));
    assert_eq!(p.gdr, Some(true));
    assert!(require(&p, &[Required::parse("efa").unwrap()], &BTreeMap::new()).is_empty());
}

#[test]
fn p2p_off_with_nvlink_up_is_a_fault_named_by_the_environment() {
    let text = "\
h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
h:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
";
    let p = NcclPath::from_text(text).unwrap();
    let topo = Topology {
        hosts: 1,
        gpu: Some(GpuTopology {
            count: 8,
            nvlink_links: Some(18),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut env = BTreeMap::new();
    env.insert("NCCL_P2P_DISABLE".to_string(), "1".to_string());
    let f = implied(&p, &topo, &env);
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].to_string(),
        "transport: expected P2P within hosts (NVLink is up), NCCL used SHM; cause: NCCL_P2P_DISABLE=1"
    );
}

#[test]
fn old_and_new_channel_shapes_and_nvls() {
    let text = "\
h:1:1 [0] NCCL INFO Ring 00 : 0 -> 1 via P2P/direct pointer
h:1:1 [0] NCCL INFO Channel 00/0 : 0[1b000] -> 1[3d000] via P2P/CUMEM/read
h:1:1 [0] NCCL INFO NVLS multicast support is available on dev 0
h:1:1 [0] NCCL INFO Connected NVLS
";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.p2p_kinds.iter().collect::<Vec<_>>(), ["CUMEM", "direct"]);
    assert_eq!(p.nvls, Some(true));
    // Only `via` lines name connections; `Connected NVLS` sets `nvls`.
    assert!(!p.transports.contains(&Transport::Nvls));
    assert!(p.net.is_none());
    assert_eq!(p.gdr, None);
}

#[test]
fn text_without_nccl_lines_has_no_path_and_pairs_are_bounded() {
    assert!(NcclPath::from_text("# nThread 1 nGpus 1\n  8  2 float sum -1 1 2 3 0\n").is_none());
    let many: String = (0..(MAX_PAIRS as u64 + 10))
        .map(|i| {
            format!(
                "h:1:1 [0] NCCL INFO Channel 00/0 : {i}[0] -> {}[0] via P2P/IPC\n",
                i + 1
            )
        })
        .collect();
    let p = NcclPath::from_text(&many).unwrap();
    assert_eq!(p.pairs.len(), MAX_PAIRS);
    assert!(p.pairs_truncated);
}

#[test]
fn differences_put_the_network_first() {
    let a = NcclPath::from_text(IB_2NODE).unwrap();
    let b = NcclPath::from_text(SOCKET_FALLBACK).unwrap();
    let d = differences(&a, &b);
    assert_eq!(d[0], "network IB -> Socket");
    assert!(d.contains(&"GPUDirect RDMA on -> off".to_string()), "{d:?}");
    assert!(differences(&a, &a).is_empty());
}

#[test]
fn unknown_requirements_list_the_valid_ones() {
    let e = Required::parse("nvlink").unwrap_err().to_string();
    assert!(e.contains("unknown transport 'nvlink'"), "{e}");
    assert!(e.contains("ib, roce, socket, ofi"), "{e}");
}

#[test]
fn plugin_builds_meet_their_family() {
    let p = |net: &str| NcclPath {
        net: Some(net.into()),
        ..Default::default()
    };
    let none = BTreeMap::new();
    assert!(require(&p("IBext_v8"), &[Required::Ib], &none).is_empty());
    assert!(require(&p("GPUDirectTCPX_v7"), &[Required::Tcpx], &none).is_empty());
    assert!(!require(&p("GPUDirectTCPXO"), &[Required::Tcpx], &none).is_empty());
    assert!(require(&p("FasTrak"), &[Required::Tcpxo], &none).is_empty());
    assert!(!require(&p("Socket"), &[Required::Ib], &none).is_empty());
}

#[test]
fn paths_of_two_processes_merge_into_one() {
    let mut a =
        NcclPath::from_text("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n")
            .unwrap();
    let b = NcclPath::from_text(SOCKET_FALLBACK).unwrap();
    a.merge(b.clone());
    assert_eq!(a.net.as_deref(), Some("Socket"));
    assert_eq!(a.gdr, Some(false));
    assert_eq!(a.pairs.len(), 1 + b.pairs.len());
    assert!(a.transports.contains(&Transport::P2p) && a.transports.contains(&Transport::Net));
    assert_eq!(a.nccl_lines, 1 + b.nccl_lines);
}

#[test]
fn channels_come_from_the_coll_line_else_the_ring_lines_never_the_connections() {
    // NCCL 2.12 and later: the coll line (the largest of the log's
    // communicators), whatever ring lines say.
    let p = NcclPath::from_text(
        "n:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n\
         n:1:2 [0] NCCL INFO 2 coll channels, 2 p2p channels, 2 p2p channels per peer\n\
         n:1:2 [0] NCCL INFO 24 coll channels, 0 nvls channels, 32 p2p channels, 2 p2p channels per peer\n\
         n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n",
    )
    .unwrap();
    assert_eq!(p.channels, Some(24));
    // Older logs: the ring lines' count; connection lines (`00/0`) and the
    // graph search's `nChannels 1` are not counts of channels run.
    let p = NcclPath::from_text(
        "n:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 1, bw 12.000000/12.000000, type PHB/PIX, sameChannels 1\n\
         n:1:2 [0] NCCL INFO Channel 00/04 :    0   1   2   3\n\
         n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n",
    )
    .unwrap();
    assert_eq!(p.channels, Some(4));
    let p =
        NcclPath::from_text("n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM\n").unwrap();
    assert_eq!(p.channels, None);
    // Processes merge to the largest.
    let mut a = NcclPath::from_text("n:1:2 [0] NCCL INFO Channel 00/02 : 0 1\n").unwrap();
    a.merge(NcclPath::from_text("n:1:2 [1] NCCL INFO Channel 00/04 : 0 1\n").unwrap());
    assert_eq!(a.channels, Some(4));
}

#[test]
fn a_channel_cap_is_a_cause() {
    let p =
        NcclPath::from_text("n:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 2.\n")
            .unwrap();
    assert_eq!(p.causes_of(CauseKind::ChannelsCapped).count(), 1);
}

// Shapes from the held-out logs of issue #50 (tests/corpus/heldout-paths).

#[test]
fn rccl_comm_tails_and_a_viewer_frame_leave_kind_and_gdr_intact() {
    // ROCm/rccl#1026: RCCL ends each line with its communicator.
    let rccl = "\
g1072:1263988:1264006 [3] NCCL INFO Channel 00/0 : 7[ce000] -> 5[c6000] via P2P/IPC comm 0xfb16e30 nRanks 08
g1064:11144:11196 [1] NCCL INFO Channel 02/0 : 1[c6000] -> 4[c1000] [send] via NET/IB/1/GDRDMA comm 0x9e4d8d0 nRanks 08
";
    let p = NcclPath::from_text(rccl).unwrap();
    assert_eq!(p.p2p_kinds.iter().collect::<Vec<_>>(), ["IPC"]);
    assert_eq!(p.gdr, Some(true));
    assert_eq!(p.net.as_deref(), Some("IB"));
    assert_eq!(p.pairs[0].via, "NET/IB/1/GDRDMA");
    // NVIDIA/nccl#719: a terminal log viewer's frame after the text.
    let framed = "\
│ task-420-bzbzn:28:53 [0] NCCL INFO Channel 00 : 3[51000] -> 0[cb000] [receive] via NET/IB/0/GDRDMA      │
│ task-420-bzbzn:28:53 [0] NCCL INFO Channel 00 : 0[cb000] -> 1[d0000] via P2P/IPC/read      │
";
    let p = NcclPath::from_text(framed).unwrap();
    assert_eq!(p.gdr, Some(true));
    assert_eq!(p.p2p_kinds.iter().collect::<Vec<_>>(), ["IPC"]);
}

#[test]
fn a_log_pasted_through_html_keeps_its_arrows() {
    // pytorch/pytorch#76288.
    let text =
        "gpu1:46569:52651 [0] NCCL INFO Channel 11 : 0[51000] -&gt; 1[a1000] via P2P/IPC/read\n";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.transports.iter().collect::<Vec<_>>(), [&Transport::P2p]);
    assert_eq!((p.pairs[0].from, p.pairs[0].to), (0, 1));
}

#[test]
fn rccl_banner_version_and_a_missing_libibverbs_are_read() {
    // ROCm/rccl-tests#163: RCCL's banner and its INFO line; NVIDIA/nccl#340:
    // NCCL 2.5's WARN with a source path before it.
    let text = "\
RCCL version : 2.21.5-HEAD:9a0e6a1
HIP version  : 6.3.42134-a9a80e791
z292:58192:58200 [2] NCCL INFO Failed to open libibverbs.so[.1]
z292:58192:58200 [2] NCCL INFO Using network Socket
";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.version.as_deref(), Some("2.21.5"));
    assert_eq!(p.net.as_deref(), Some("Socket"));
    let no_ib: Vec<&str> = p
        .causes_of(CauseKind::NoIbDevice)
        .map(|c| c.evidence.as_str())
        .collect();
    assert_eq!(no_ib, ["Failed to open libibverbs.so[.1]"]);
    let warn = "wangying-system:7436:7497 [0] external/nccl_archive/src/misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n";
    let p = NcclPath::from_text(warn).unwrap();
    assert_eq!(p.causes_of(CauseKind::NoIbDevice).count(), 1);
}

#[test]
fn a_plugin_that_fails_before_a_fallback_is_the_cause() {
    // devopsrustem/slurmv4: aws-ofi-nccl fails, NCCL's IB takes over.
    let text = "\
tpgds-aihub0008:207008:207008 [1] NCCL INFO NET/OFI Selected Provider is verbs;ofi_rxm (found 58 nics)
tpgds-aihub0008:207008:207008 [1] NCCL INFO Initialized NET plugin AWS Libfabric
tpgds-aihub0008:207008:207008 [1] NCCL INFO NET/OFI Invalid type of PCI bus returned 0
tpgds-aihub0008:207008:207008 [1] NCCL INFO plugin/net.cc:118 -> 2
tpgds-aihub0008:207008:207008 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB enp25s0np0:10.99.91.63<0>
tpgds-aihub0008:207008:207008 [1] NCCL INFO Using network IB
";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.net.as_deref(), Some("IB"));
    let why: Vec<&str> = p
        .causes_of(CauseKind::PluginMissing)
        .map(|c| c.evidence.as_str())
        .collect();
    assert_eq!(why, ["NET/OFI Invalid type of PCI bus returned 0"]);
    // aws/aws-ofi-nccl#24: an error traced from the plugin that stays in
    // use is no fallback; a trace after a non-plugin line names nothing.
    let text = "\
[1,7]<stdout>:ip-172-32-38-1:21471:22316 [7] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0
[1,31]<stdout>:ip-172-32-36-209:8800:9549 [7] NCCL INFO NET/OFI No NIC info for dev 0
[1,31]<stdout>:ip-172-32-36-209:8800:9549 [7] NCCL INFO include/net.h:24 -> 2
axa:3048391:3048566 [0] NCCL INFO NCCL_IBEXT_DISABLE set by environment to 1.
axa:3048391:3048566 [0] NCCL INFO net.cc:79 -> 3
";
    let p = NcclPath::from_text(text).unwrap();
    assert_eq!(p.net.as_deref(), Some("OFI"));
    assert_eq!(p.causes_of(CauseKind::PluginMissing).count(), 0);
}

#[test]
fn prefix_cut_lines_stand_only_beside_a_version_line_and_no_tagged_line() {
    // NVIDIA/nccl#1584: the poster cut `host:pid:tid [dev] NCCL INFO `.
    let cut = "\
NCCL version 2.24.3+cuda12.2
P2P plugin IBext_v8
NET/IB : Using [0]ibp0:1/IB/SHARP [1]ibp1:1/IB/SHARP [RO]; OOB eth0:10.7.147.73<0>
Using network IBext_v8
NVLS multicast support is available on dev 0
";
    let p = NcclPath::from_text(cut).unwrap();
    assert_eq!(p.version.as_deref(), Some("2.24.3"));
    assert_eq!(p.net.as_deref(), Some("IBext_v8"));
    assert_eq!(p.nics, ["ibp0:1", "ibp1:1"]);
    assert_eq!(p.nvls, Some(true));
    // Without NCCL's version line the same text is anybody's prose.
    let no_version = cut.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(NcclPath::from_text(&no_version), None);
    // Beside tagged lines, an untagged one is not NCCL's.
    let tagged = format!("{cut}node1:1:1 [0] NCCL INFO Using network Socket\n");
    let p = NcclPath::from_text(&tagged).unwrap();
    assert_eq!(p.net.as_deref(), Some("Socket"));
    assert!(p.nics.is_empty());
}

/// Two GPUs the driver will not join: SHM carries the ring, and the
/// driver's refusal, not the environment, is why. The lines are a real
/// log's (pytorch/pytorch#54232, tests/corpus/heldout-paths), its ranks
/// renumbered to a two-GPU job.
const P2P_REFUSED: &str = "\
ibis:13594:13679 [2] NCCL INFO Could not enable P2P between dev 2(=1c000) and dev 3(=1d000)
ibis:13594:13679 [2] NCCL INFO Channel 00 : 0[1c000] -> 1[1d000] via direct shared memory
ibis:13595:13676 [3] NCCL INFO Could not enable P2P between dev 3(=1d000) and dev 2(=1c000)
ibis:13595:13676 [3] NCCL INFO Channel 00 : 1[1d000] -> 0[1c000] via direct shared memory
";

#[test]
fn a_driver_that_refuses_p2p_is_the_cause_of_shm() {
    let p = NcclPath::from_text(P2P_REFUSED).unwrap();
    assert!(p.transports.contains(&Transport::Shm), "{p:?}");
    let refused: Vec<_> = p.causes_of(CauseKind::P2pUnavailable).collect();
    assert!(!refused.is_empty(), "{:?}", p.causes);
    assert!(refused[0]
        .evidence
        .contains("Could not enable P2P between dev 2"));
    assert_eq!(p.causes_of(CauseKind::P2pDisabled).count(), 0);
    // On a host whose GPUs have NVLink, the implied gate fails P2P and
    // names the driver's refusal.
    let topo = Topology {
        hosts: 1,
        gpu: Some(GpuTopology {
            count: 2,
            nvlink_links: Some(4),
            ..GpuTopology::default()
        }),
        ..Topology::default()
    };
    let failures = implied(&p, &topo, &BTreeMap::new());
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0]
            .causes
            .iter()
            .any(|c| c.contains("Could not enable P2P")),
        "{failures:?}"
    );
}

#[test]
fn the_short_set_to_form_of_an_environment_line_is_a_cause() {
    // NVIDIA/nccl-tests#228 and a PyTorch job: `NCCL_IB_HCA set to
    // mlx5_5`, `NCCL_SOCKET_IFNAME set to lo` (no "by environment").
    let text = "\
MOC:574629:574651 [0] NCCL INFO NCCL_IB_HCA set to mlx5_5
axa:3048391:3048566 [0] NCCL INFO NCCL_SOCKET_IFNAME set to lo
";
    let p = NcclPath::from_text(text).unwrap();
    let nic: Vec<_> = p.causes_of(CauseKind::NicChoice).collect();
    assert_eq!(nic.len(), 2, "{:?}", p.causes);
    // NCCL 2.28 on one H100 (bench/results/gpu-transport-50.md) prints
    // both forms of one setting: one cause, the first line's.
    let twice = "\
h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo
h:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set to lo
";
    let p = NcclPath::from_text(twice).unwrap();
    let nic: Vec<_> = p.causes_of(CauseKind::NicChoice).collect();
    assert_eq!(nic.len(), 1, "{:?}", p.causes);
    assert!(nic[0].evidence.contains("by environment"), "{:?}", nic[0]);
}
