//! A low row's "why" (issue #50 item 6, docs/ceiling.md) in the reports:
//! a real nccl-tests log whose NCCL fell back to sockets
//! (`NCCL_IB_DISABLE=1` on hosts with InfiniBand), given the machine it ran
//! on, shows the fallback beside its low rows, in Markdown and HTML.

use collbench_core::{GpuTopology, NicGroup, NicKind, Topology};
use collbench_report::{report_main, ReportOptions};
use std::path::PathBuf;

fn socket_log() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "tests/corpus/nccl-info/nccl-tests__dexhunter-allreduce-experiments__allreduce-8node-32gpu-socket-ib-disabled-v2.6.4.txt",
    )
}

/// Hosts of 4 PCIe GPUs and one 100 Gbit/s InfiniBand NIC (the log's
/// layout, 8 hosts of 4 ranks, comes from the log itself).
fn ib_hosts() -> Topology {
    Topology {
        hosts: 1,
        gpu: Some(GpuTopology {
            count: 4,
            nvlink_links: Some(0),
            pcie_generation: Some(3),
            pcie_width: Some(16),
            ..GpuTopology::default()
        }),
        nics: vec![NicGroup {
            kind: NicKind::Infiniband,
            rate_gbit: 100.0,
            count: 1,
            ..NicGroup::default()
        }],
        ..Topology::default()
    }
}

fn options(output: Option<PathBuf>, topology: Option<Topology>) -> ReportOptions {
    ReportOptions {
        inputs: vec![socket_log()],
        output,
        format: None,
        matrix: Vec::new(),
        strict: false,
        topology,
    }
}

#[test]
fn a_socket_fallback_is_named_beside_the_low_rows() {
    let (_, md) = report_main(&options(None, Some(ib_hosts()))).unwrap();
    let md = md.unwrap();
    let header = md
        .lines()
        .find(|l| l.contains("% of ceiling"))
        .expect("a ceiling column");
    assert!(header.contains("| bottleneck | why |"), "{header}");
    // Rows from 64 MiB are judged; 256 MiB ran at 1.17 GB/s.
    let row = md
        .lines()
        .find(|l| l.starts_with("| 256 MiB"))
        .expect("the 256 MiB row");
    assert!(row.contains("NET/Socket, not NET/IB"), "{row}");
    let small = md.lines().find(|l| l.starts_with("| 1 MiB")).unwrap();
    assert!(
        small.ends_with("| - |"),
        "a 1 MiB row is not judged: {small}"
    );
    let note = md
        .lines()
        .find(|l| l.starts_with("- why ("))
        .expect("the evidence under the table");
    assert!(
        note.contains("why (64 MiB to 256 MiB): transport fallback: NCCL used NET/Socket where NET/IB was expected (InfiniBand NICs on the hosts); NCCL_IB_DISABLE set by environment to 1."),
        "{note}"
    );
}

#[test]
fn the_html_report_carries_the_same_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    report_main(&options(Some(out.clone()), Some(ib_hosts()))).unwrap();
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("NET/Socket, not NET/IB"), "no why cell");
    assert!(
        html.contains("transport fallback: NCCL used NET/Socket"),
        "no why note"
    );
}

#[test]
fn without_a_machine_there_is_no_ceiling_and_no_why() {
    let (_, md) = report_main(&options(None, None)).unwrap();
    let md = md.unwrap();
    assert!(!md.contains("% of ceiling"));
    assert!(!md.contains("why ("), "{md}");
}
