//! A run's topology and its rows' ceilings (issue #40): what hardware the
//! run had, found once on rank 0 after the rows are measured, so probes
//! never disturb a timed loop. CPU runs get a memory copy probe; GPU runs
//! the GPUs and NICs `doctor` finds, and hosts emulated on one machine
//! (NCCL_HOSTID) a loopback TCP probe for their socket network.

use collbench_core::{CpuTopology, NicGroup, NicKind, Record, Topology};
use std::collections::BTreeSet;

/// Whether this run's record should carry ceilings: when it is written
/// as JSON, CSV or Markdown, or `--ceiling` asks for the text lines.
pub fn wanted(asked: bool, record_formats: impl IntoIterator<Item = bool>) -> bool {
    asked || record_formats.into_iter().any(|f| f)
}

/// Fills `record.topology` and every placement's ceiling. The probes run
/// with the CPUs the process had before the NCCL backend pinned its
/// launching thread to one: their threads inherit the caller's mask.
pub fn annotate(record: &mut Record) {
    let topo = collbench_nccl::unpinned(|| run_topology(record));
    // A CPU run's small sizes live in cache: their bound is a cache's copy
    // rate, not host memory's.
    let levels = match &topo.cpu {
        Some(_) if record.backend.as_deref() == Some("cpu") => {
            collbench_ceiling::probe::cache_copy_levels()
        }
        _ => Vec::new(),
    };
    collbench_ceiling::annotate_with(record, topo, &levels);
}

/// The topology of the run that made `record`, from rank 0's host.
fn run_topology(record: &Record) -> Topology {
    let world = record.settings.world_size.max(1);
    let emulated = std::env::var_os("NCCL_HOSTID").is_some();
    let hosts = if emulated {
        // Each process claims its own host: count processes.
        record.settings.processes.max(1)
    } else {
        let names: BTreeSet<&str> = record.devices.iter().map(|d| d.host.as_str()).collect();
        names.len().max(1) as u64
    };
    let mut topo = Topology {
        hosts,
        ranks_per_host: Some((world / hosts).max(1)),
        ..Topology::default()
    };
    if record.backend.as_deref() == Some("cpu") {
        topo.cpu = Some(CpuTopology {
            cores: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u64),
            mem_copy_gbps: collbench_ceiling::probe::mem_copy_gbps(record.settings.max_bytes),
            mem_copy_solo_gbps: collbench_ceiling::probe::mem_copy_solo_gbps(
                record.settings.max_bytes,
            ),
        });
        return topo;
    }
    let local = collbench_doctor::topology::local_topology();
    topo.gpu = local.gpu;
    if let Some(g) = topo.gpu.as_mut() {
        // NVLS switched off for the run is no NVLS for its ceiling.
        if record.env.get("NCCL_NVLS_ENABLE").map(String::as_str) == Some("0") {
            g.nvls = Some(false);
        }
    }
    topo.nics = if emulated && hosts > 1 {
        loopback_nics()
    } else {
        local.nics
    };
    topo
}

/// The topology `check` judges its lines against: GPU backends only (a
/// shared host's memory is no part to repair, so CPU lines are not
/// judged). Ranks fill hosts one per GPU; emulated hosts are processes.
pub fn check_topology(backend: &dyn collbench_runner::Backend) -> Option<Topology> {
    let info = backend.info();
    if info.name != "nccl" {
        return None;
    }
    collbench_nccl::unpinned(|| gpu_check_topology(backend))
}

/// [`check_topology`] for an NCCL backend, its probes on every CPU.
fn gpu_check_topology(backend: &dyn collbench_runner::Backend) -> Option<Topology> {
    let local = collbench_doctor::topology::local_topology();
    let gpus = local.gpu.as_ref().map_or(1, |g| g.count.max(1));
    let world = backend.world_size().max(1) as u64;
    let emulated = std::env::var_os("NCCL_HOSTID").is_some();
    let per_host = if emulated {
        backend.local_ranks().max(1) as u64
    } else {
        world.min(gpus)
    };
    let hosts = world.div_ceil(per_host);
    let mut topo = Topology {
        hosts,
        ranks_per_host: Some(per_host),
        gpu: local.gpu,
        nics: if emulated && hosts > 1 {
            loopback_nics()
        } else {
            local.nics
        },
        ..Topology::default()
    };
    if let Some(g) = topo.gpu.as_mut() {
        if std::env::var("NCCL_NVLS_ENABLE").as_deref() == Ok("0") {
            g.nvls = Some(false);
        }
    }
    Some(topo)
}

/// Emulated hosts talk through NCCL's socket transport over loopback:
/// its rate is what a probe of it measures.
fn loopback_nics() -> Vec<NicGroup> {
    collbench_ceiling::probe::loopback_tcp_gbps()
        .map(|gbps| NicGroup {
            kind: NicKind::Loopback,
            rate_gbit: gbps * 8.0,
            count: 1,
            names: vec!["lo".into()],
            probe: Some("loopback TCP probe, parallel streams".into()),
            ..NicGroup::default()
        })
        .into_iter()
        .collect()
}

/// `--ceiling`'s lines after the rows: one per row and placement, then
/// why the low rows are low (`collbench_core::why_rows::footer`).
pub fn text_lines(record: &Record) -> String {
    let mut out = String::from(
        "# ceiling (see docs/ceiling.md)\n#  op              size  placement      busbw  ceiling  %ceiling  bottleneck\n",
    );
    for r in &record.results {
        for (name, p) in r.placements() {
            let (ceil, pct, by) = match &p.ceiling {
                Some(c) => (
                    format!("{:.2}", c.busbw_gbps),
                    format!("{:.0}%", c.percent_of(p.busbw_gbps)),
                    c.bottleneck.label(),
                ),
                None => ("unknown".into(), "-".into(), "unknown"),
            };
            out += &format!(
                "#  {:<14} {:>7}  {:<12} {:>7.2} {:>8} {:>9}  {}\n",
                r.op,
                collbench_core::size::format_size(r.size_bytes),
                name,
                p.busbw_gbps,
                ceil,
                pct,
                by
            );
        }
    }
    out + &collbench_core::why_rows::footer(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Algorithm, Bottleneck, CaseResult, Ceiling, Placement};

    #[test]
    fn a_low_row_gets_its_why_after_the_ceiling_lines() {
        let mut r = Record::new("collbench");
        r.nccl_path = collbench_core::nccl_path::NcclPath::from_text(
            "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n\
             h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
        );
        let mut c = CaseResult::float_sum("all_reduce", 1 << 30);
        c.out_of_place = Some(Placement {
            busbw_gbps: 1.2,
            ceiling: Some(Ceiling {
                busbw_gbps: 50.0,
                bottleneck: Bottleneck::Network,
                algorithm: Algorithm::Ring,
                why: "t".into(),
            }),
            ..Placement::default()
        });
        r.results.push(c);
        collbench_core::why_rows::annotate(&mut r);
        let text = text_lines(&r);
        let (ceiling, why) = text.split_once("# why:").expect(&text);
        assert!(ceiling.contains("all_reduce"), "{text}");
        assert!(
            why.contains("transport fallback: NCCL used NET/Socket"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
    }
}
