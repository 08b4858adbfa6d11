//! The search against the noisy fake measurer: it must find the true
//! winner, never call noise a gain, respect the budget and the channel
//! limit, and stop when told.

use collbench_core::Collective;
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::{
    tune, Algorithm, CandidateStatus, End, Outcome, Phase, Protocol, Registration, Setting,
    TuneConfig, TuneReport,
};
use std::sync::atomic::{AtomicBool, Ordering};

mod common;

const MIB: u64 = 1 << 20;
/// Simulated seconds, in us.
const S: f64 = 1e6;

fn run(m: &mut FakeMeasurer, cfg: &TuneConfig) -> TuneReport {
    tune(m, cfg, &AtomicBool::new(false), &mut |_| {})
}

/// A machine like the issue's: at 512 MiB, 64 channels take 25% less time
/// than the default, 32 channels 8% less, ring/ll128 3% more; NVLS is not
/// there; everything else is 10-40% slower.
fn h200_like() -> Truth {
    Box::new(|s: &Setting, c| {
        let base = c.bytes as f64 / 250e3; // ~250 GB/s
        let factor = match (s.channels, s.algorithm, s.protocol, s.registration) {
            (None, None, None, Registration::None) => 1.0,
            (Some(64), ..) => 0.75,
            (Some(32), ..) => 0.92,
            (Some(16), ..) => 0.97,
            (
                _,
                Some(
                    Algorithm::Nvls
                    | Algorithm::NvlsTree
                    | Algorithm::CollnetDirect
                    | Algorithm::CollnetChain,
                ),
                ..,
            ) => return None,
            (_, Some(Algorithm::Ring), Some(Protocol::Ll128), _) => 1.03,
            (_, _, _, Registration::Local) => 0.99,
            _ => 1.1 + (s.to_string().len() % 4) as f64 * 0.1,
        };
        Some(base * factor)
    })
}

#[test]
fn picks_the_true_winner_through_the_noise() {
    for seed in 0..10 {
        let mut m = FakeMeasurer::new(seed, h200_like());
        let cfg = TuneConfig::new(vec![Collective::AllGather], vec![512 * MIB], 2, 1, 60.0 * S);
        let r = run(&mut m, &cfg);
        assert_eq!(r.end, End::Complete);
        let b = &r.bands[0];
        let Outcome::Gain {
            setting,
            ratio,
            busbw_gbps,
            ..
        } = &b.outcome
        else {
            panic!("seed {seed}: no gain: {:?}", b.outcome);
        };
        assert_eq!(setting.channels, Some(64), "seed {seed}");
        assert!(
            (ratio.estimate - 0.75).abs() < 0.02,
            "seed {seed}: {ratio:?}"
        );
        assert!(ratio.hi < 1.0 && ratio.lo > 0.0);
        let gain = busbw_gbps.unwrap() / b.default_busbw_gbps.unwrap();
        assert!((gain - 1.0 / ratio.estimate).abs() < 1e-9);
        // NVLS is not on this machine: recorded, not fatal.
        assert!(b
            .candidates
            .iter()
            .any(|c| matches!(c.status, CandidateStatus::Unsupported { .. })));
        // A surely slower candidate is dropped early.
        assert!(b
            .candidates
            .iter()
            .any(|c| matches!(c.status, CandidateStatus::Pruned { .. })));
    }
}

#[test]
fn noise_is_never_a_gain() {
    // Every candidate takes exactly the default's time: 50 seeds, 3 bands
    // each, under stronger noise and drift than the defaults.
    for seed in 0..50 {
        let mut m = FakeMeasurer::new(
            1000 + seed,
            Box::new(|_, c| Some(10.0 + c.bytes as f64 / 200e3)),
        )
        .noise(0.05)
        .drift(0.01);
        let cfg = TuneConfig::new(
            vec![Collective::AllReduce],
            vec![8, 64 * 1024, 64 * MIB],
            2,
            1,
            30.0 * S,
        );
        common::assert_no_gain(&run(&mut m, &cfg), &format!("seed {seed}"));
    }
}

#[test]
fn a_candidate_identical_to_the_default_is_no_gain() {
    // The fake's default runs 16 channels; `channels=16` spelled out is the
    // same configuration. Everything else is slower, so it is the best.
    for seed in 0..10 {
        let spelled_out = Setting {
            channels: Some(16),
            ..Setting::default()
        };
        let truth: Truth = Box::new(move |s: &Setting, _| {
            Some(if s.is_default() || *s == spelled_out {
                200.0
            } else {
                260.0
            })
        });
        let mut m = FakeMeasurer::new(seed, truth);
        let mut cfg = TuneConfig::new(vec![Collective::AllReduce], vec![MIB], 2, 1, 30.0 * S);
        cfg.space.channels = vec![16];
        let r = run(&mut m, &cfg);
        match &r.bands[0].outcome {
            Outcome::NoGain { best, ratio } => {
                assert_eq!(
                    best.as_ref().and_then(|s| s.channels),
                    Some(16),
                    "seed {seed}"
                );
                // Confirmed only when screening put it below 1 by chance.
                // Its 95% interval misses 1 in about one band of 20 (seed
                // 0 has it 4% above), but never by the 2% a gain needs.
                if let Some(ratio) = ratio {
                    assert!(ratio.hi > 0.98 && ratio.lo < 1.1, "seed {seed}: {ratio:?}");
                }
            }
            other => panic!("seed {seed}: {other:?}"),
        }
    }
}

#[test]
fn respects_the_budget() {
    for budget_s in [0.05, 0.5, 3.0] {
        let mut m = FakeMeasurer::new(3, h200_like());
        let sizes = vec![MIB, 4 * MIB, 16 * MIB, 64 * MIB];
        let cfg = TuneConfig::new(
            vec![Collective::AllGather, Collective::AllReduce],
            sizes,
            2,
            1,
            budget_s * S,
        );
        let r = run(&mut m, &cfg);
        assert!((r.spent_us - m.spent_us).abs() < 1e-6 * m.spent_us.max(1.0));
        // Every us is the bands' or the process-wide phase's.
        let band_sum: f64 = r.bands.iter().map(|b| b.spent_us).sum::<f64>()
            + r.process_wide.as_ref().map_or(0.0, |p| p.spent_us);
        assert!((band_sum - r.spent_us).abs() < 1e-6 * r.spent_us.max(1.0));
        // Overshoot at most by the misprediction of one pair: one
        // calibration repeat of the largest case plus a pair of repeats
        // (about 5 ms each) -- far below 3% of these budgets but 1 ms.
        assert!(
            r.spent_us <= r.budget_us + 20_000.0,
            "budget {budget_s} s: spent {} s",
            r.spent_us / S
        );
        assert_eq!(
            r.bands.len(),
            8,
            "every band gets its share, even a small one"
        );
    }
}

#[test]
fn respects_the_channel_limit() {
    let mut m = FakeMeasurer::new(5, h200_like());
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![512 * MIB], 2, 1, 60.0 * S);
    cfg.max_channels = Some(32);
    let r = run(&mut m, &cfg);
    assert!(
        m.calls
            .iter()
            .all(|(s, _, _)| s.channels.is_none_or(|n| n <= 32)),
        "a forbidden setting was measured"
    );
    let b = &r.bands[0];
    assert_eq!(
        b.forbidden.iter().map(|s| s.channels).collect::<Vec<_>>(),
        vec![Some(64)]
    );
    let (best, _) = b.gain().expect("32 channels still gain 8%");
    assert_eq!(best.channels, Some(32));
}

#[test]
fn stops_when_told_and_keeps_what_it_measured() {
    let mut m = FakeMeasurer::new(9, h200_like());
    let cfg = TuneConfig::new(
        vec![Collective::AllGather],
        vec![MIB, 512 * MIB],
        2,
        1,
        60.0 * S,
    );
    let stop = AtomicBool::new(false);
    let mut events = 0usize;
    let mut last_left = f64::INFINITY;
    let r = tune(&mut m, &cfg, &stop, &mut |p| {
        events += 1;
        assert!(p.budget_left_us <= last_left);
        last_left = p.budget_left_us;
        assert_eq!(p.bands_total, 2);
        // Stop during the second band's screening.
        if p.band_index == 1 && p.phase == Phase::Screen {
            stop.store(true, Ordering::Relaxed);
        }
    });
    assert_eq!(r.end, End::Interrupted);
    assert_eq!(r.bands.len(), 2);
    assert!(
        !matches!(r.bands[0].outcome, Outcome::Incomplete),
        "the first band is finished"
    );
    assert_eq!(r.bands[1].outcome, Outcome::Incomplete);
    // The flag is polled before each measurement's event: the measurement
    // announced when it was set still ran, and nothing after it.
    assert_eq!(m.calls.len(), events);
}

#[test]
fn a_failed_default_ends_the_search_with_the_bands_so_far() {
    let truth: Truth = Box::new(|_, c| (c.bytes < 100 * MIB).then_some(100.0));
    let mut m = FakeMeasurer::new(1, truth);
    let cfg = TuneConfig::new(
        vec![Collective::AllReduce],
        vec![MIB, 512 * MIB],
        2,
        1,
        20.0 * S,
    );
    let r = run(&mut m, &cfg);
    assert!(matches!(r.end, End::Failed(_)), "{:?}", r.end);
    assert_eq!(r.bands.len(), 2);
    assert_eq!(r.bands[1].outcome, Outcome::Incomplete);
}

#[test]
fn nccls_default_buffer_size_spelled_out_is_no_gain() {
    // The check: NCCL_BUFFSIZE=4194304 (NCCL's default) as the only
    // candidate, 5 runs of 5.
    let explicit = Setting {
        env: vec![("NCCL_BUFFSIZE".into(), "4194304".into())],
        ..Setting::default()
    };
    for seed in 0..5 {
        let mut m = FakeMeasurer::new(
            77 + seed,
            Box::new(|_, c| Some(20.0 + c.bytes as f64 / 250e3)),
        );
        let mut cfg = TuneConfig::new(
            vec![Collective::AllReduce],
            vec![8, 64 << 20],
            2,
            1,
            20.0 * S,
        );
        cfg.space = collbench_tune::CandidateSpace::only(vec![explicit.clone()]);
        let r = run(&mut m, &cfg);
        for b in &r.bands {
            assert_eq!(b.candidates.len(), 1);
            assert!(b.gain().is_none(), "seed {seed}: {:?}", b.outcome);
        }
        assert!(m.calls.iter().any(|(s, _, _)| *s == explicit));
    }
}

/// The fake, but `failing` fails as a candidate (as children that died
/// on one host do under a launcher) from its `after`-th repeat on, in the
/// candidate's own repeats and in its default partner's.
struct FailsFor {
    inner: FakeMeasurer,
    failing: Setting,
    after: usize,
    seen: usize,
}

impl collbench_tune::Measurer for FailsFor {
    fn measure(
        &mut self,
        s: &Setting,
        c: &collbench_tune::Case,
        iters: u32,
    ) -> collbench_tune::Measured {
        self.inner.measure(s, c, iters)
    }

    fn measure_in_pair(
        &mut self,
        pair: collbench_tune::InPair<'_>,
        c: &collbench_tune::Case,
        iters: u32,
    ) -> collbench_tune::Measured {
        let s = pair.setting;
        if *pair.candidate() == self.failing {
            self.seen += 1;
            if self.seen > self.after {
                return Err(collbench_tune::MeasureError::candidate_failed(
                    "rank 1: child process exited",
                ));
            }
        }
        self.inner.measure(s, c, iters)
    }
}

fn channels(n: u32) -> Setting {
    Setting {
        channels: Some(n),
        ..Setting::default()
    }
}

/// A failed candidate ends with its reason; the others are measured and
/// the next best wins, whether it failed in screening or confirmation.
#[test]
fn a_failed_candidate_ends_alone_and_the_next_best_wins() {
    // after 1: in its first pair (screening); after 40: in confirmation.
    for after in [1, 40] {
        let mut m = FailsFor {
            inner: FakeMeasurer::new(3, h200_like()),
            failing: channels(64),
            after,
            seen: 0,
        };
        let cfg = TuneConfig::new(vec![Collective::AllGather], vec![512 * MIB], 2, 1, 60.0 * S);
        let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
        assert_eq!(r.end, End::Complete, "after {after}");
        let b = &r.bands[0];
        let failed = b
            .candidates
            .iter()
            .find(|c| c.setting == channels(64))
            .unwrap();
        assert_eq!(
            failed.status,
            CandidateStatus::Failed {
                reason: "rank 1: child process exited".into()
            },
            "after {after}"
        );
        let Outcome::Gain { setting, .. } = &b.outcome else {
            panic!("after {after}: {:?}", b.outcome);
        };
        assert_eq!(*setting, channels(32), "after {after}");
    }
}

/// Bands are measured smallest probe first, whatever the ops' order, and
/// reported in the ops' order: the dear bands come last and share what
/// the cheap ones left.
#[test]
fn bands_are_measured_smallest_first_and_reported_in_op_order() {
    let mut m = FakeMeasurer::new(3, h200_like());
    let cfg = TuneConfig::new(
        vec![Collective::AllReduce, Collective::AllGather],
        vec![MIB, 512 * MIB],
        2,
        1,
        20.0 * S,
    );
    let mut seen: Vec<(usize, Collective, u64)> = Vec::new();
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |p| {
        let e = (p.band_index, p.band.op, p.band.probe_bytes);
        if seen.last() != Some(&e) {
            seen.push(e);
        }
    });
    let order: Vec<(Collective, u64)> = seen.iter().map(|e| (e.1, e.2)).collect();
    assert_eq!(
        order,
        [
            (Collective::AllReduce, MIB),
            (Collective::AllGather, MIB),
            (Collective::AllReduce, 512 * MIB),
            (Collective::AllGather, 512 * MIB),
        ]
    );
    assert_eq!(seen.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let reported: Vec<(Collective, u64)> = r
        .bands
        .iter()
        .map(|b| (b.band.op, b.band.probe_bytes))
        .collect();
    assert_eq!(
        reported,
        [
            (Collective::AllReduce, MIB),
            (Collective::AllReduce, 512 * MIB),
            (Collective::AllGather, MIB),
            (Collective::AllGather, 512 * MIB),
        ]
    );
}

/// A budget too small to give any candidate an interval is not "no gain":
/// the band is incomplete and the footer says to raise the budget (a 15 s
/// search at 64 MiB on two emulated hosts said "no gain", "complete", with
/// every candidate unmeasured).
#[test]
fn a_band_whose_budget_measured_nothing_is_incomplete_not_no_gain() {
    // 20 ms per call and a 50 ms budget: the default's first repeats fit,
    // no candidate's pairs do.
    let mut m = FakeMeasurer::new(5, Box::new(|_, _| Some(20_000.0)));
    let cfg = TuneConfig::new(vec![Collective::AllReduce], vec![64 << 20], 2, 1, 0.05 * S);
    let r = run(&mut m, &cfg);
    assert_eq!(r.end, End::Complete);
    let b = &r.bands[0];
    assert!(
        b.candidates.iter().all(|c| matches!(
            c.status,
            CandidateStatus::NotMeasured | CandidateStatus::Unsupported { .. }
        )),
        "{:?}",
        b.candidates
    );
    assert_eq!(b.outcome, Outcome::Incomplete);
    let text = collbench_tune::render::text(&r);
    assert!(text.contains("1 of 1 bands incomplete"), "{text}");
    assert!(text.contains("raise --budget"), "{text}");
}

/// Two environments, as on two emulated hosts: `a` wins the three small
/// bands, `b` the large one, where `a` gains nothing. The shell lines set
/// `a` for every band, so the search measures it again on fresh pairs in
/// the band it lost (only there, after every band, within the budget) and
/// says it gains nothing there, instead of leaving its screening figure.
#[test]
fn the_shell_setting_is_measured_again_in_the_bands_it_lost() {
    let env = |v: &str| Setting {
        env: vec![("NCCL_NSOCKS_PERTHREAD".into(), v.into())],
        ..Setting::default()
    };
    let (a, b) = (env("4"), env("2"));
    let truth = || -> collbench_tune::fake::Truth {
        let (ta, tb) = (a.clone(), b.clone());
        Box::new(move |s: &Setting, c| {
            let large = c.bytes >= 256 * MIB;
            let f = match (s == &ta, s == &tb, large) {
                (true, _, false) => 0.5,
                (true, _, true) => 1.0,
                (_, true, false) => 0.8,
                (_, true, true) => 0.5,
                _ => 1.0,
            };
            Some((20.0 + c.bytes as f64 / 1e3) * f)
        })
    };
    for seed in 0..5 {
        let mut m = FakeMeasurer::new(seed, truth());
        let mut cfg = TuneConfig::new(
            vec![Collective::AllReduce],
            vec![MIB, 8 * MIB, 64 * MIB, 512 * MIB],
            2,
            2,
            60.0 * S,
        );
        cfg.space = collbench_tune::CandidateSpace::only(vec![a.clone(), b.clone()]);
        let mut phases: Vec<(Phase, u64)> = Vec::new();
        let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |p| {
            phases.push((p.phase, p.band.probe_bytes))
        });
        assert_eq!(r.end, End::Complete, "seed {seed}");
        assert!(r.spent_us <= r.budget_us + 20_000.0, "seed {seed}");
        let pw = r.process_wide.as_ref().expect("a process-wide phase");
        assert_eq!(pw.setting, a, "seed {seed}");
        assert_eq!(pw.bands.len(), 1, "seed {seed}: {pw:?}");
        assert_eq!(pw.bands[0].band.probe_bytes, 512 * MIB);
        let collbench_tune::ProcessWideFigure::Confirmed { ratio, verdict, .. } =
            &pw.bands[0].figure
        else {
            panic!("seed {seed}: {pw:?}");
        };
        assert_eq!(
            *verdict,
            collbench_tune::Verdict::NoGain,
            "seed {seed}: {ratio:?}"
        );
        assert!(ratio.lo < 1.0 && ratio.hi > 0.98, "seed {seed}: {ratio:?}");
        // The phase comes after every band and measures only there.
        let first = phases
            .iter()
            .position(|p| p.0 == Phase::ProcessWide)
            .expect("process-wide repeats");
        assert!(phases[first..]
            .iter()
            .all(|p| p.0 == Phase::ProcessWide && p.1 == 512 * MIB));
        let shell = collbench_tune::render::shell(&r);
        assert!(shell.contains("all_reduce 512M +"), "{shell}");
        assert!(shell.contains("(no gain)"), "{shell}");
    }
}
