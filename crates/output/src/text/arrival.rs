//! `--arrival` in the text layout: one comment line per placement under
//! its row, saying who entered last and by how much, the time inside the
//! collective over ranks, the device-time busbw beside the table's, and
//! the straggler named, if any. Without the flag nothing is printed, so
//! the nccl-tests table stays as it was, byte for byte.

use crate::units::{gbps, us};
use collbench_core::arrival::Arrival;
use collbench_core::CaseResult;

/// The arrival lines of `r`'s placements that carry figures.
pub fn lines(r: &CaseResult) -> String {
    r.placements()
        .filter_map(|(name, p)| p.arrival.as_ref().map(|a| line(r.size_bytes, name, a)))
        .collect()
}

/// One placement's line.
pub fn line(size_bytes: u64, placement: &str, a: &Arrival) -> String {
    let verdict = match &a.straggler {
        Some(s) => format!(
            "straggler rank {} ({}): {}, +{} us in {}/{} iterations ({} us before, {} us inside)",
            s.rank,
            s.host,
            s.kind.words(),
            us(s.lateness_us),
            s.late_iterations,
            s.iterations,
            us(s.before_us),
            us(s.inside_us),
        ),
        None => format!("no straggler (noise {} us)", us(a.noise_us)),
    };
    format!(
        "#   {size_bytes:>12} {placement:<12} arrival: skew {} us (max {}), last rank {} in {}/{}, inside {}/{}/{} us (min/median/max), device busbw {} GB/s, clock error {} us; {verdict}\n",
        us(a.skew_us),
        us(a.skew_max_us),
        a.last_rank,
        a.last_rank_iterations,
        a.iterations,
        us(a.inside_min_us),
        us(a.inside_median_us),
        us(a.inside_max_us),
        gbps(a.device_busbw_gbps),
        us(a.clock_error_us),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::arrival::{Straggler, StragglerKind};
    use collbench_core::Placement;

    #[test]
    fn a_line_per_placement_with_figures_naming_the_straggler() {
        let a = Arrival {
            iterations: 20,
            skew_us: 1001.5,
            skew_max_us: 1200.0,
            last_rank: 2,
            last_rank_iterations: 20,
            inside_min_us: 300.0,
            inside_median_us: 1300.0,
            inside_max_us: 1310.0,
            device_busbw_gbps: 5.24,
            noise_us: 5.0,
            straggler: Some(Straggler {
                rank: 2,
                host: "n2".into(),
                kind: StragglerKind::LateRank,
                late_iterations: 20,
                iterations: 20,
                lateness_us: 1000.25,
                before_us: 1000.0,
                inside_us: 0.25,
            }),
            ..Arrival::default()
        };
        let row = CaseResult {
            size_bytes: 1 << 20,
            out_of_place: Some(Placement {
                arrival: Some(Box::new(a.clone())),
                ..Placement::default()
            }),
            in_place: Some(Placement::default()),
            ..CaseResult::default()
        };
        assert_eq!(
            lines(&row),
            "#        1048576 out_of_place arrival: skew 1001.50 us (max 1200.00), last rank 2 in 20/20, inside 300.00/1300.00/1310.00 us (min/median/max), device busbw 5.24 GB/s, clock error 0.00 us; straggler rank 2 (n2): late rank (time lost before the collective), +1000.25 us in 20/20 iterations (1000.00 us before, 0.25 us inside)\n"
        );
        let quiet = Arrival {
            straggler: None,
            ..a
        };
        assert!(line(8, "in-place", &quiet).ends_with("; no straggler (noise 5.00 us)\n"));
    }
}
