//! Without a baseline, a large-size busbw far below the hardware's ceiling
//! is a WARN that names the part (issue #40, docs/ceiling.md). The fraction
//! is set so that no published healthy figure warns: the lowest of them,
//! a sendrecv through one NIC, sits at 0.46 of its ceiling
//! (bench/results/ceiling.md), so a line warns under 0.4; a test holds
//! every figure of topologies/published/figures.toml to it.

use crate::verdict::{Line, Metric, Status};
use collbench_ceiling::{ceiling, Query};
use collbench_core::{Algorithm, Bottleneck, Collective, NicKind, Topology};

/// Under this fraction of its ceiling a large-size line warns: the cut
/// under which a row is low and gets its causes (`collbench_core::why`).
pub const FAR_BELOW: f64 = collbench_core::why::LOW_FRACTION;

/// Sizes from which a line is judged: below, latency and NCCL's LL
/// protocols set the pace, not the links.
pub const LARGE_BYTES: u64 = collbench_core::why::LOW_FROM_BYTES;

/// `line` as judged against its ceiling on `topo`: a measured busbw line
/// with no baseline figure (INFO) becomes WARN when far below it.
pub fn judge(line: Line, topo: Option<&Topology>) -> Line {
    let Some(topo) = topo else { return line };
    if line.status != Status::Info
        || line.metric != Metric::BusbwGbps
        || line.size_bytes < LARGE_BYTES
    {
        return line;
    }
    let (Some(busbw), Ok(op)) = (line.measured, Collective::parse(&line.op)) else {
        return line;
    };
    let algorithm = Algorithm::reported(line.explain.as_ref());
    let q = Query {
        op,
        bytes: line.size_bytes,
        in_place: false,
        algorithm,
    };
    let Ok(c) = ceiling(topo, &q) else {
        return line;
    };
    if busbw >= FAR_BELOW * c.busbw_gbps || emulated_network(topo, c.bottleneck) {
        return line;
    }
    Line {
        status: Status::Warn,
        note: Some(format!(
            "busbw {busbw:.1} GB/s is {:.0}% of the {:.0} GB/s ceiling set by {} ({}; docs/ceiling.md)",
            c.percent_of(busbw),
            c.busbw_gbps,
            c.bottleneck.label(),
            c.algorithm.label()
        )),
        ..line
    }
}

/// Hosts emulated over loopback (NCCL_HOSTID): their network is no part
/// to repair, and NCCL's socket transport moves a tenth of what loopback
/// can (about 3 GB/s of all_reduce against a 30 GB/s probe on the H100
/// machine, bench/results/ceiling.md), so a line it bounds is not judged.
pub(crate) fn emulated_network(topo: &Topology, by: Bottleneck) -> bool {
    by == Bottleneck::Network
        && !topo.nics.is_empty()
        && topo.nics.iter().all(|n| n.kind == NicKind::Loopback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::GpuTopology;

    fn line(busbw: f64) -> Line {
        Line {
            op: "all_gather".into(),
            dtype: "float".into(),
            size_bytes: 1 << 30,
            metric: Metric::BusbwGbps,
            measured: Some(busbw),
            expected: None,
            ratio: None,
            wrong: 0,
            status: Status::Info,
            note: None,
            explain: None,
        }
    }

    fn h100x8() -> Topology {
        Topology {
            hosts: 1,
            gpu: Some(GpuTopology {
                count: 8,
                nvlink_links: Some(18),
                nvlink_link_gbps: Some(25.0),
                ..GpuTopology::default()
            }),
            ..Topology::default()
        }
    }

    #[test]
    fn far_below_the_nvlink_ceiling_warns_and_names_it() {
        let l = judge(line(100.0), Some(&h100x8()));
        assert_eq!(l.status, Status::Warn);
        assert!(l.note.unwrap().contains("NVLink"));
    }

    #[test]
    fn emulated_hosts_over_loopback_are_not_judged() {
        let mut two = h100x8();
        two.hosts = 2;
        two.ranks_per_host = Some(1);
        two.nics = vec![collbench_core::NicGroup {
            kind: NicKind::Loopback,
            rate_gbit: 240.0,
            count: 1,
            ..Default::default()
        }];
        // 3 GB/s against a 30 GB/s loopback: the socket transport's pace.
        assert_eq!(judge(line(3.0), Some(&two)).status, Status::Info);
        // The same figure through a real 200G NIC warns.
        two.nics[0].kind = NicKind::Ethernet;
        assert_eq!(judge(line(3.0), Some(&two)).status, Status::Warn);
    }

    /// Every published figure, as a line of its size on its machine (the
    /// topology `collbench expect` builds, split jobs included), stays
    /// INFO: the threshold never fires on a healthy figure.
    #[test]
    fn no_published_figure_warns() {
        use collbench_ceiling::expect::{expectation, ExpectFormat, ExpectOptions};
        use collbench_ceiling::published::{figures, topologies_dir};
        let dir = topologies_dir(env!("CARGO_MANIFEST_DIR"));
        let all = figures(&dir).unwrap();
        assert!(all.len() > 80, "{}", all.len());
        for f in all {
            let opts = ExpectOptions {
                topology: dir.join(format!("{}.toml", f.topology)),
                ops: vec![Collective::parse(&f.op).unwrap()],
                sizes: vec![1 << 30],
                hosts: Some(f.hosts),
                split_mask: f.split_mask,
                format: ExpectFormat::Json,
            };
            let topo = expectation(&opts).unwrap().topology;
            let l = Line {
                op: f.op.clone(),
                ..line(f.busbw_gbps)
            };
            let judged = judge(l, Some(&topo));
            assert_eq!(
                judged.status,
                Status::Info,
                "{} x{} {} {}: {:?}",
                f.topology,
                f.hosts,
                f.op,
                f.busbw_gbps,
                judged.note
            );
        }
    }

    #[test]
    fn healthy_figures_and_unknown_topologies_stay_info() {
        assert_eq!(judge(line(360.0), Some(&h100x8())).status, Status::Info);
        assert_eq!(judge(line(1.0), None).status, Status::Info);
    }
}
