//! Gives every placement of a record its ceiling, from the record's
//! topology and, where NCCL reported it, the algorithm each row ran.

use crate::{ceiling_with, CopyLevel, Query};
use collbench_core::{Algorithm, Collective, Record, Topology};

/// Sets `record.topology` to `topo` and each placement's `ceiling`; rows
/// the model cannot bound (unknown op, unknown link) keep none.
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
            let algorithm = Algorithm::reported(p.explain.as_ref());
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
}
