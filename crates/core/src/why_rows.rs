//! A record's low rows and their causes ([`crate::why`]): [`annotate`]
//! fills each low placement's `why`, [`footer`] writes the lines a text
//! run prints after its ceiling lines. Apart from `why.rs` so that the
//! record can name the cause type without a circle of imports.

use crate::record::Record;
use crate::why::{why, Cause, Facts, LOW_FRACTION, LOW_FROM_BYTES};

/// Gives every placement of a row from [`LOW_FROM_BYTES`] its causes
/// where it is under [`LOW_FRACTION`] of its ceiling (placements without
/// a ceiling are not judged); others get none.
pub fn annotate(record: &mut Record) {
    let Record {
        results,
        topology,
        nccl_path,
        env,
        ..
    } = record;
    let (topology, nccl_path, env) = (&*topology, &*nccl_path, &*env);
    for row in results.iter_mut() {
        for p in [&mut row.out_of_place, &mut row.in_place]
            .into_iter()
            .flatten()
        {
            p.why.clear();
            let Some(c) = p
                .ceiling
                .as_ref()
                .filter(|_| row.size_bytes >= LOW_FROM_BYTES)
            else {
                continue;
            };
            let fraction = c.percent_of(p.busbw_gbps) / 100.0;
            let ran = p.explain.as_ref().and_then(|e| {
                e.kernels
                    .iter()
                    .filter(|k| !k.is_p2p())
                    .map(|k| k.channels)
                    .max()
            });
            let facts = Facts {
                bottleneck: Some(c.bottleneck),
                topology: topology.as_ref(),
                path: nccl_path.as_ref(),
                env,
                channels: ran.or(nccl_path.as_ref().and_then(|n| n.channels)),
            };
            p.why = why(fraction, &facts);
        }
    }
}

/// The lines after a run's ceiling lines: the low rows, grouped by their
/// causes, then each cause with its evidence. Empty when no row is low.
pub fn footer(record: &Record) -> String {
    let mut groups: Vec<(Vec<String>, &[Cause])> = Vec::new();
    for r in &record.results {
        for (name, p) in r.placements() {
            let Some(c) = p.ceiling.as_ref() else {
                continue;
            };
            let low =
                r.size_bytes >= LOW_FROM_BYTES && c.percent_of(p.busbw_gbps) < 100.0 * LOW_FRACTION;
            if !low {
                continue;
            }
            let row = format!(
                "{} {} {name} {:.0}%",
                r.op,
                crate::size::format_size(r.size_bytes),
                c.percent_of(p.busbw_gbps)
            );
            match groups
                .iter_mut()
                .find(|(_, causes)| *causes == p.why.as_slice())
            {
                Some((rows, _)) => rows.push(row),
                None => groups.push((vec![row], p.why.as_slice())),
            }
        }
    }
    let mut out = String::new();
    for (rows, causes) in groups {
        out += &format!(
            "# why: {} under {:.0}% of its ceiling\n",
            rows_text(&rows),
            100.0 * LOW_FRACTION
        );
        if causes.is_empty() {
            out += "#  no cause collbench can show (see docs/ceiling.md, \"Why a row is low\")\n";
        }
        for c in causes {
            out += &format!("#  {}\n", c.line());
        }
    }
    out
}

/// `a, b, c and 4 more rows`.
fn rows_text(rows: &[String]) -> String {
    const SHOWN: usize = 3;
    let head = rows[..rows.len().min(SHOWN)].join(", ");
    match rows.len().saturating_sub(SHOWN) {
        0 => head,
        more => format!("{head} and {more} more rows"),
    }
}

#[cfg(test)]
#[path = "why_rows_tests.rs"]
mod tests;
