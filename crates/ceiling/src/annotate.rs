//! Gives every placement of a record its ceiling, from the record's
//! topology and, where NCCL reported it, the algorithm each row ran.

use crate::{ceiling, Query};
use collbench_core::{Algorithm, Collective, Record, Topology};

/// Sets `record.topology` to `topo` and each placement's `ceiling`; rows
/// the model cannot bound (unknown op, unknown link) keep none.
pub fn annotate(record: &mut Record, topo: Topology) {
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
            p.ceiling = ceiling(&topo, &q).ok();
        }
    }
    record.topology = Some(topo);
}
