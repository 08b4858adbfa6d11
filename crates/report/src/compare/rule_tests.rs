//! The rule's unit tests (in a file of their own: `rule.rs` holds the rule).

use super::*;

fn shape(size: u64, in_place: bool) -> CaseShape {
    CaseShape {
        group: 0,
        size_bytes: size,
        in_place,
        by_time: size < LATENCY_REGIME_BELOW_BYTES,
        base_time_us: 1000.0,
    }
}

fn est(d: f64, se: f64) -> Estimate {
    Estimate {
        log_ratio: d,
        se: Some(se),
        z95: 1.96,
        source: Some(NoiseSource::Iterations {
            samples: 20,
            median: true,
        }),
        noise_cut: 0.0,
        log_only: false,
    }
}

const RULE: Rule = Rule { threshold_pct: 5.0 };

#[test]
fn two_adjacent_sizes_beyond_the_threshold_regress_one_alone_cannot_tell() {
    let shapes: Vec<_> = [1u64 << 20, 2 << 20, 4 << 20, 8 << 20]
        .map(|s| shape(s, false))
        .to_vec();
    let drop = -(0.9f64.ln());
    let v = judge(
        &RULE,
        &Layout::new(&shapes),
        &shapes,
        &[
            est(0.0, 0.01),
            est(drop, 0.01),
            est(drop, 0.01),
            est(0.0, 0.01),
        ],
    );
    assert_eq!(
        v,
        [
            Verdict::Same,
            Verdict::Regression,
            Verdict::Regression,
            Verdict::Same
        ]
    );
    let v = judge(
        &RULE,
        &Layout::new(&shapes),
        &shapes,
        &[
            est(0.0, 0.01),
            est(drop, 0.01),
            est(0.0, 0.01),
            est(0.0, 0.01),
        ],
    );
    assert_eq!(v[1], Verdict::CannotTell(Unsure::OneCase));
}

#[test]
fn both_placements_of_one_size_are_one_piece_of_evidence() {
    // 512 KiB slower in both placements, its sizes around unchanged:
    // timed for 20 x 52 µs, one burst may explain both (one case only).
    let sizes = [128u64 << 10, 512 << 10, 2 << 20];
    let shapes: Vec<_> = sizes
        .iter()
        .flat_map(|&s| [shape(s, false), shape(s, true)])
        .collect();
    let slow = 4.0f64.ln();
    let e: Vec<_> = [0.0, 0.0, slow, slow, 0.0, 0.0]
        .iter()
        .map(|&d| est(d, 0.01))
        .collect();
    let timed = |base_time_us: f64| -> Vec<CaseShape> {
        shapes
            .iter()
            .map(|&s| CaseShape { base_time_us, ..s })
            .collect()
    };
    let short = timed(52.0);
    let v = judge(&RULE, &Layout::new(&short), &short, &e);
    assert_eq!(v[2], Verdict::CannotTell(Unsure::OneCase), "{v:?}");
    assert_eq!(v[3], Verdict::CannotTell(Unsure::OneCase), "{v:?}");
    // Timed for 20 x 5 ms each: the other placement is separate
    // evidence.
    let long = timed(5000.0);
    let v = judge(&RULE, &Layout::new(&long), &long, &e);
    assert_eq!(&v[2..4], [Verdict::Regression; 2], "{v:?}");
    // The next size slower too: a regression in every slowed case.
    let e: Vec<_> = [0.0, 0.0, slow, slow, slow, slow]
        .iter()
        .map(|&d| est(d, 0.01))
        .collect();
    let v = judge(&RULE, &Layout::new(&shapes), &shapes, &e);
    assert_eq!(&v[2..], [Verdict::Regression; 4], "{v:?}");
}

#[test]
fn an_interval_reaching_inside_the_threshold_cannot_tell() {
    let shapes = [shape(1 << 20, false), shape(1 << 20, true)];
    let drop = -(0.9f64.ln());
    let v = judge(
        &RULE,
        &Layout::new(&shapes),
        &shapes,
        &[est(drop, 0.1), est(drop, 0.1)],
    );
    assert_eq!(v, [Verdict::CannotTell(Unsure::Noise); 2]);
    let p = pool(&RULE, &shapes, &[est(drop, 0.1), est(drop, 0.1)]);
    assert!(p[0].beyond && !p[0].sure, "{p:?}");
}

#[test]
fn a_few_microseconds_never_regress() {
    let mut s = shape(8, false);
    s.base_time_us = 2.0;
    let v = judge(
        &RULE,
        &Layout::new(&[s, s]),
        &[s, s],
        &[est(1.0, 0.01), est(1.0, 0.01)],
    );
    assert_eq!(v[0], Verdict::Same);
}

#[test]
fn the_log_scatter_floors_a_too_narrow_iteration_interval() {
    let shapes: Vec<_> = (20..28).map(|k| shape(1 << k, false)).collect();
    let noisy = [0.0, 0.1, -0.1, 0.05, -0.05, 0.1, -0.1, 0.0];
    let e: Vec<_> = noisy.iter().map(|&d| est(d, 0.001)).collect();
    let out = with_log_scatter(&Layout::new(&shapes), &shapes, &e);
    assert!(out.iter().all(|e| e.se.unwrap() > 0.05), "{out:?}");
    assert!(out.iter().all(|e| e.source == Some(NoiseSource::Log)));
}
