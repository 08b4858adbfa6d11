//! The cells that set a case beside the hardware (docs/ceiling.md): its
//! ceiling, its share of it and the part that sets it, and why a low row
//! is low (`collbench_core::why`), with the evidence as notes under the
//! table.

use crate::units;
use collbench_core::why::Cause;
use collbench_core::{CaseResult, Placement};

/// The placement the ceiling columns show: the case's best busbw among
/// those with a ceiling.
fn best(c: &CaseResult) -> Option<&Placement> {
    c.placements()
        .map(|(_, p)| p)
        .filter(|p| p.ceiling.is_some())
        .max_by(|a, b| a.busbw_gbps.total_cmp(&b.busbw_gbps))
}

/// A case's ceiling, its best busbw as a percentage of it, and the part
/// that sets it; dashes where the topology was unknown.
pub(crate) fn ceiling_cells(c: &CaseResult) -> [String; 3] {
    match best(c).and_then(|p| p.ceiling.as_ref().map(|k| (p, k))) {
        Some((p, k)) => [
            units::gbps(k.busbw_gbps),
            format!("{:.0}%", k.percent_of(p.busbw_gbps)),
            k.bottleneck.label().to_string(),
        ],
        None => ["-".to_string(), "-".to_string(), "-".to_string()],
    }
}

/// The causes of the placement the ceiling cells show, in a few words
/// each (`NET/Socket, not NET/IB`); `-` where it is not low or none is
/// known.
pub(crate) fn why_cell(c: &CaseResult) -> String {
    match best(c).map(|p| p.why.as_slice()) {
        Some(causes) if !causes.is_empty() => causes
            .iter()
            .map(|c| c.finding.short())
            .collect::<Vec<_>>()
            .join("; "),
        _ => "-".to_string(),
    }
}

/// One note per distinct cause of the cases' low rows, with its evidence
/// (`why: transport fallback: NCCL used NET/Socket where ...`), the sizes
/// it was seen at.
pub(crate) fn why_notes(cases: &[&CaseResult]) -> Vec<String> {
    let mut seen: Vec<(&Cause, Vec<u64>)> = Vec::new();
    for c in cases {
        for cause in best(c).map_or(&[][..], |p| p.why.as_slice()) {
            match seen.iter_mut().find(|(k, _)| *k == cause) {
                Some((_, sizes)) => sizes.push(c.size_bytes),
                None => seen.push((cause, vec![c.size_bytes])),
            }
        }
    }
    seen.into_iter()
        .map(|(cause, sizes)| {
            let lo = sizes.iter().min().copied().unwrap_or(0);
            let hi = sizes.iter().max().copied().unwrap_or(0);
            let at = if lo == hi {
                units::bytes(lo)
            } else {
                format!("{} to {}", units::bytes(lo), units::bytes(hi))
            };
            format!("why ({at}): {}", cause.line())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::why::Finding;
    use collbench_core::{Algorithm, Bottleneck, Ceiling};

    fn case(bytes: u64, busbw: f64, why: Vec<Cause>) -> CaseResult {
        let mut c = CaseResult::float_sum("all_reduce", bytes);
        c.out_of_place = Some(Placement {
            busbw_gbps: busbw,
            ceiling: Some(Ceiling {
                busbw_gbps: 40.0,
                bottleneck: Bottleneck::Network,
                algorithm: Algorithm::Ring,
                why: "t".into(),
            }),
            why,
            ..Placement::default()
        });
        c
    }

    #[test]
    fn a_low_row_shows_its_causes_and_the_notes_their_evidence_once() {
        let socket = Cause {
            finding: Finding::TransportFallback {
                expected: "NET/IB".into(),
                used: "NET/Socket".into(),
                cause: None,
            },
            evidence: "NCCL used NET/Socket where NET/IB was expected".into(),
        };
        let gdr = Cause {
            finding: Finding::GdrOff,
            evidence: "no NET connection says GDRDMA".into(),
        };
        let a = case(64 << 20, 1.0, vec![socket.clone(), gdr]);
        let b = case(128 << 20, 1.1, vec![socket]);
        let fine = case(256 << 20, 30.0, Vec::new());
        assert_eq!(why_cell(&a), "NET/Socket, not NET/IB; no GPUDirect RDMA");
        assert_eq!(why_cell(&fine), "-");
        let notes = why_notes(&[&a, &b, &fine]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("why (64 MiB to 128 MiB): transport fallback: NCCL used NET/Socket"),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].starts_with("why (64 MiB): GPUDirect RDMA off"),
            "{}",
            notes[1]
        );
    }
}
