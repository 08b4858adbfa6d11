use super::*;
use collbench_core::{CaseResult, Explanation, TimeStats};

/// An all_reduce float sum case measured out-of-place only.
pub(crate) fn all_reduce(size: u64, out_of_place: Placement) -> CaseResult {
    CaseResult {
        out_of_place: Some(out_of_place),
        ..CaseResult::float_sum("all_reduce", size)
    }
}

/// Per-iteration statistics of 100 iterations around `time_us` with a
/// coefficient of variation of 1%: tight enough that a 10% change is sure.
pub(crate) fn tight(time_us: f64) -> Option<TimeStats> {
    Some(TimeStats {
        mean_us: time_us,
        min_us: time_us * 0.98,
        p50_us: time_us,
        p99_us: time_us * 1.02,
        max_us: time_us * 1.03,
        stdev_us: time_us * 0.01,
        samples: 100,
    })
}

/// [`all_reduce`] taking `time_us` at `busbw` (with [`tight`] statistics),
/// with what NCCL ran.
pub(crate) fn case(
    size: u64,
    time_us: f64,
    busbw: f64,
    explain: Option<Explanation>,
) -> CaseResult {
    let p = Placement {
        time_us,
        busbw_gbps: busbw,
        explain: explain.map(Box::new),
        stats: tight(time_us),
        ..Placement::default()
    };
    all_reduce(size, p)
}

/// A record of all_reduce cases `(size, time, busbw)`.
pub(crate) fn rec(cases: &[(u64, f64, f64)]) -> Record {
    let mut r = Record::new("test");
    for &(size, time, busbw) in cases {
        r.results.push(case(size, time, busbw, None));
    }
    r
}

/// Sizes 1 GiB and 2 GiB: each at `(time, busbw)` pairs given.
fn two_large(a: (f64, f64), b: (f64, f64)) -> Record {
    rec(&[(1 << 30, a.0, a.1), (2 << 30, b.0, b.1)])
}

#[test]
fn two_adjacent_sizes_slower_beyond_the_threshold_regress() {
    let base = two_large((3000.0, 330.0), (6000.0, 330.0));
    let c = compare(
        std::slice::from_ref(&base),
        &[two_large((3333.0, 297.0), (6667.0, 297.0))],
        5.0,
    );
    assert_eq!(c.rows[0].verdict, Verdict::Regression, "{}", c.table());
    assert_eq!(c.overall(), Overall::Regression);
    assert!(
        c.verdict_line().contains("1073741824"),
        "{}",
        c.verdict_line()
    );
    assert!(c.regression_table().contains("| 1073741824 |"));
    assert!(
        c.overall_line()
            .contains("all_reduce busbw x0.900 (2 cases >= 64 MiB)"),
        "{}",
        c.overall_line()
    );
    let within = compare(
        std::slice::from_ref(&base),
        &[two_large((3090.0, 320.0), (6180.0, 320.0))],
        5.0,
    );
    assert_eq!(within.rows[0].verdict, Verdict::Same);
    let faster = compare(&[base], &[two_large((2750.0, 360.0), (5500.0, 360.0))], 5.0);
    assert_eq!(faster.rows[0].verdict, Verdict::Improved);
}

#[test]
fn one_slower_size_alone_cannot_tell() {
    let base = two_large((3000.0, 330.0), (6000.0, 330.0));
    let c = compare(&[base], &[two_large((3333.0, 297.0), (6000.0, 330.0))], 5.0);
    assert_eq!(c.rows[0].verdict, Verdict::CannotTell(Unsure::OneCase));
    assert_eq!(c.overall(), Overall::NoRegression);
    assert!(c.verdict_line().contains("1 case(s) cannot tell"));
}

#[test]
fn small_sizes_need_relative_and_absolute_slowdown() {
    let base = rec(&[(8, 12.0, 0.0), (16, 12.0, 0.0)]);
    // +50% but only +6 us: over 10% and over 5 us, a regression.
    let c = compare(
        std::slice::from_ref(&base),
        &[rec(&[(8, 18.0, 0.0), (16, 18.0, 0.0)])],
        5.0,
    );
    assert_eq!(c.rows[0].verdict, Verdict::Regression);
    // +33% but only 4 us: noise.
    let c = compare(&[base], &[rec(&[(8, 16.0, 0.0), (16, 16.0, 0.0)])], 5.0);
    assert_eq!(c.rows[0].verdict, Verdict::Same);
}

#[test]
fn the_table_gives_news_share_of_its_ceiling_where_it_has_one() {
    let base = two_large((3000.0, 330.0), (6000.0, 330.0));
    let plain = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&base),
        5.0,
    )
    .table();
    assert!(!plain.contains("% of ceiling"));
    let mut new = base.clone();
    new.results[0].out_of_place.as_mut().unwrap().ceiling = Some(collbench_core::Ceiling {
        busbw_gbps: 440.0,
        bottleneck: collbench_core::Bottleneck::Nvlink,
        algorithm: collbench_core::Algorithm::Ring,
        why: "test".into(),
    });
    let table = compare(&[base], &[new], 5.0).table();
    assert!(table.contains("new % of ceiling"), "{table}");
    // 330 of 440 GB/s; the 2 GiB row has no ceiling.
    assert!(table.contains("| 75%"), "{table}");
}

#[test]
fn only_common_cases_are_compared() {
    let c = compare(
        &[rec(&[(8, 1.0, 0.0), (16, 1.0, 0.0)])],
        &[rec(&[(16, 1.0, 0.0)])],
        5.0,
    );
    assert_eq!(c.rows.len(), 1);
    assert!(c.verdict_line().starts_with("OK"));
}

#[test]
fn a_case_without_any_noise_source_cannot_tell() {
    let bare = |t: f64| {
        let mut r = Record::new("test");
        r.results.push(all_reduce(
            1 << 30,
            Placement {
                time_us: t,
                busbw_gbps: 1e6 / t,
                ..Placement::default()
            },
        ));
        r
    };
    let c = compare(&[bare(3000.0)], &[bare(4000.0)], 5.0);
    assert_eq!(c.rows[0].verdict, Verdict::CannotTell(Unsure::NoNoise));
    assert_eq!(c.rows[0].interval(), None);
}

#[test]
fn several_runs_a_side_use_their_spread() {
    let runs = |scale: f64, jitter: &[f64]| -> Vec<Record> {
        jitter
            .iter()
            .map(|j| {
                let t = 3000.0 * scale * j;
                let mut r = two_large((t, 1e6 / t), (2.0 * t, 2e6 / (2.0 * t)));
                for c in &mut r.results {
                    c.out_of_place.as_mut().unwrap().stats = None;
                }
                r
            })
            .collect()
    };
    let base = runs(1.0, &[1.0, 1.01, 0.99]);
    let new = runs(1.2, &[1.0, 1.01, 0.99]);
    let (b, n): (Vec<&[Record]>, Vec<&[Record]>) = (
        base.iter().map(std::slice::from_ref).collect(),
        new.iter().map(std::slice::from_ref).collect(),
    );
    let c = compare_runs(&b, &n, 5.0);
    assert_eq!(c.runs, (3, 3));
    assert_eq!(
        c.rows[0].estimate.source,
        Some(NoiseSource::Runs { base: 3, new: 3 })
    );
    assert_eq!(c.rows[0].verdict, Verdict::Regression, "{}", c.table());
}

/// A tiny deterministic generator (xorshift64*), for noise by seed.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

const OPS: [&str; 4] = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"];

/// A run of 4 ops, 8 B to 64 MiB by 2x, both placements, 20 iterations
/// each with coefficient of variation `cv`: each placement's median
/// strays from the truth by its own standard error. `slow_op` runs
/// `1/0.9` slower from 1 MiB up.
fn synthetic_run(rng: &mut Rng, cv: f64, slow_op: Option<&str>) -> Record {
    let mut r = Record::new("collbench");
    for op in OPS {
        for k in 3..=26 {
            let size = 1u64 << k;
            let truth = 5.0 + size as f64 / 2000.0;
            let slow = if slow_op == Some(op) && size >= 1 << 20 {
                1.0 / 0.9
            } else {
                1.0
            };
            let mut place = || {
                let se = 1.2533 * cv / 20f64.sqrt();
                let p50 = truth * slow * (se * rng.normal()).exp();
                Placement {
                    time_us: p50,
                    algbw_gbps: size as f64 / p50 / 1e3,
                    busbw_gbps: size as f64 / p50 / 1e3,
                    stats: Some(TimeStats {
                        mean_us: p50,
                        min_us: p50 * (1.0 - cv),
                        p50_us: p50,
                        p99_us: p50 * (1.0 + 2.0 * cv),
                        max_us: p50 * (1.0 + 3.0 * cv),
                        stdev_us: p50 * cv,
                        samples: 20,
                    }),
                    ..Placement::default()
                }
            };
            r.results.push(CaseResult {
                out_of_place: Some(place()),
                in_place: Some(place()),
                ..CaseResult::float_sum(op, size)
            });
        }
    }
    r
}

fn synthetic_cmp(seed: u64, cv: f64, slow_op: Option<&str>) -> Comparison {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let base = synthetic_run(&mut rng, cv, None);
    let new = synthetic_run(&mut rng, cv, slow_op);
    compare(&[base], &[new], 5.0)
}

fn synthetic(seed: u64, cv: f64, slow_op: Option<&str>) -> Overall {
    synthetic_cmp(seed, cv, slow_op).overall()
}

#[test]
fn a_ten_percent_drop_in_quiet_runs_is_found_in_20_seeds_of_20() {
    for seed in 1..=20 {
        assert_eq!(
            synthetic(seed, 0.02, Some("all_gather")),
            Overall::Regression,
            "seed {seed}"
        );
    }
}

#[test]
fn the_same_drop_in_20_percent_noise_cannot_tell() {
    for seed in 1..=20 {
        let c = synthetic_cmp(seed, 0.20, Some("all_gather"));
        assert_ne!(c.overall(), Overall::Regression, "seed {seed}");
        // The slowed cases are beyond the threshold but inside twice their
        // 20% spread: most say "cannot tell", and so does the verdict line.
        let slowed: Vec<&Row> = c
            .rows
            .iter()
            .filter(|r| r.op == "all_gather" && r.size_bytes >= 1 << 20)
            .collect();
        let unsure = slowed
            .iter()
            .filter(|r| r.verdict == Verdict::CannotTell(Unsure::Noise))
            .count();
        assert!(
            2 * unsure >= slowed.len(),
            "seed {seed}: {unsure} of {}",
            slowed.len()
        );
        assert!(c.verdict_line().contains("cannot tell"), "seed {seed}");
    }
}

#[test]
fn a_against_a_says_no_regression_in_19_seeds_of_20() {
    let ok = (1..=20)
        .filter(|&s| synthetic(s, 0.02, None) == Overall::NoRegression)
        .count();
    assert!(ok >= 19, "no regression in {ok} of 20");
    let ok = (1..=20)
        .filter(|&s| synthetic(s, 0.20, None) == Overall::NoRegression)
        .count();
    assert!(ok >= 19, "20% noise: no regression in {ok} of 20");
}

/// All_reduce from 8 B to 32 KiB taking `time_us` at every size.
fn small_sizes(time_us: f64) -> Record {
    let cases: Vec<(u64, f64, f64)> = (3..16)
        .map(|k| (1u64 << k, time_us, (1u64 << k) as f64 / time_us / 1e3))
        .collect();
    rec(&cases)
}

#[test]
fn an_eightfold_small_message_latency_under_the_floor_regresses() {
    // 0.5 µs to 4 µs: every step under the +5 µs floor (a real pair was
    // once judged "no regression" this way).
    let base = small_sizes(0.5);
    let c = compare(std::slice::from_ref(&base), &[small_sizes(4.0)], 5.0);
    assert_eq!(c.overall(), Overall::Regression, "{}", c.table());
    assert!(c.regressions().count() == c.rows.len(), "{}", c.table());
    // Under twice as slow, the floor still holds.
    let c = compare(std::slice::from_ref(&base), &[small_sizes(0.9)], 5.0);
    assert_eq!(c.overall(), Overall::NoRegression, "{}", c.table());
    assert_eq!(c.regressions().count(), 0);
}
