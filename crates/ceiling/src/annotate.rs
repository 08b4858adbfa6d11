//! Gives every placement of a record its ceiling, from the record's
//! topology and, where NCCL reported it, the algorithm each row ran; and
//! a row far below it the causes collbench can show
//! ([`collbench_core::why`]).

use crate::{ceiling_with, CopyLevel, Query};
use collbench_core::{Algorithm, Collective, Record, Topology};

/// Sets `record.topology` to `topo`, each placement's `ceiling` and the
/// `why` of a low one; rows the model cannot bound (unknown op, unknown
/// link) keep none.
pub fn annotate(record: &mut Record, topo: Topology) {
    annotate_with(record, topo, &[]);
}

/// [`annotate`] with a CPU run's cache levels: rows whose buffers fit one
/// are bounded by its copy rate ([`crate::ceiling_with`]).
pub fn annotate_with(record: &mut Record, topo: Topology, levels: &[CopyLevel]) {
    for row in &mut record.results {
        let Ok(op) = Collective::parse(&row.op) else {
            continue;
        };
        let bytes = row.size_bytes;
        for (in_place, p) in [(false, &mut row.out_of_place), (true, &mut row.in_place)] {
            let Some(p) = p.as_mut() else { continue };
            let algorithm = Algorithm::reported(p.explain.as_deref());
            let q = Query {
                op,
                bytes,
                in_place,
                algorithm,
            };
            p.ceiling = ceiling_with(&topo, &q, levels).ok();
        }
    }
    record.topology = Some(topo);
    collbench_core::why_rows::annotate(record);
}

/// Gives a record read from a log (nccl-tests, another tool) the ceilings
/// of a described machine: the job's hosts and ranks per host come from
/// the record (its ranks' host names, its rank count) where it has them,
/// else from the description. A record that carries its own topology (a
/// collbench run that probed its hardware) keeps it.
pub fn annotate_described(record: &mut Record, machine: &Topology) {
    if record.topology.is_some() {
        return;
    }
    let mut topo = machine.clone();
    let hosts: std::collections::BTreeSet<&str> =
        record.devices.iter().map(|d| d.host.as_str()).collect();
    let world = match record.settings.world_size {
        0 => record.devices.len() as u64,
        n => n,
    };
    if !hosts.is_empty() {
        topo.hosts = hosts.len() as u64;
    }
    if world > 0 {
        topo.ranks_per_host = Some(world.div_ceil(topo.hosts.max(1)));
    }
    annotate(record, topo);
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{CaseResult, DeviceInfo, GpuTopology, Placement};

    fn h200x2() -> Topology {
        crate::builtin::load(std::path::Path::new("h200x2")).unwrap()
    }

    fn record(hosts: &[&str]) -> Record {
        let mut r = Record::new("nccl-tests");
        r.devices = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| DeviceInfo {
                rank: i as u64,
                host: h.to_string(),
                ..DeviceInfo::default()
            })
            .collect();
        r.results.push(CaseResult {
            op: "all_gather".into(),
            size_bytes: 1 << 30,
            out_of_place: Some(Placement {
                busbw_gbps: 300.0,
                ..Placement::default()
            }),
            ..CaseResult::default()
        });
        r
    }

    #[test]
    fn a_log_gets_the_described_machine_with_its_own_layout() {
        let mut r = record(&["a", "a"]);
        annotate_described(&mut r, &h200x2());
        let c = r.results[0].out_of_place.as_ref().unwrap().ceiling.clone();
        assert!((c.unwrap().busbw_gbps - 400.0).abs() < 1e-9);
        let t = r.topology.unwrap();
        assert_eq!((t.hosts, t.ranks_per_host), (1, Some(2)));
    }

    #[test]
    fn a_record_with_its_own_topology_keeps_it() {
        let mut r = record(&["a", "b"]);
        let own = Topology {
            hosts: 2,
            gpu: Some(GpuTopology {
                count: 1,
                ..GpuTopology::default()
            }),
            ..Topology::default()
        };
        r.topology = Some(own.clone());
        annotate_described(&mut r, &h200x2());
        assert_eq!(r.topology, Some(own));
        assert!(r.results[0]
            .out_of_place
            .as_ref()
            .unwrap()
            .ceiling
            .is_none());
    }

    #[test]
    fn a_low_row_gets_its_causes_a_normal_one_none() {
        let mut r = record(&["a", "a"]);
        let mut low = r.results[0].clone();
        low.out_of_place.as_mut().unwrap().busbw_gbps = 40.0;
        r.results.push(low);
        r.nccl_path = collbench_core::nccl_path::NcclPath::from_text(
            "a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n\
             a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n",
        );
        annotate_described(&mut r, &h200x2());
        let why = |i: usize| r.results[i].out_of_place.as_ref().unwrap().why.clone();
        assert!(why(0).is_empty(), "300 of 400 GB/s is not low");
        let low = why(1);
        assert_eq!(low.len(), 1, "{low:?}");
        assert!(
            low[0].line().contains("NCCL used SHM where P2P"),
            "{}",
            low[0].line()
        );
    }
}
