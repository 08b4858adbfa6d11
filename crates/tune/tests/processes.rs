//! Confirmation over fresh process pairs: an environment candidate's
//! speed can differ from one process to the next (a socket setting on two
//! emulated hosts ran 0.45x to 0.9x the default's time, by process), so
//! its confirmation renews its processes and its claim is the mean over
//! the fresh ones, not the luck of the process its screening ran in.

use collbench_core::Collective;
use collbench_tune::space::CandidateSpace;
use collbench_tune::{
    tune, Case, MeasureError, Measured, Measurer, Outcome, Phase, Sample, Setting, TuneConfig,
};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

const MIB: u64 = 1 << 20;
/// What a renewal costs here (us).
const RENEW_US: f64 = 200_000.0;

/// The time ratio to the default of a setting in its `g`-th process
/// pair (0: the screening's) at a size.
type Ratio = Box<dyn Fn(&Setting, u32, u64) -> f64>;

/// A measurer of scripted ratios, each environment's process pairs
/// counted on its own (a renewal starts the next), ±0.5% noise.
struct Scripted {
    ratio: Ratio,
    generations: HashMap<Vec<(String, String)>, u32>,
    renewals: u32,
    calls: u64,
}

impl Scripted {
    fn new(ratio: Ratio) -> Scripted {
        Scripted {
            ratio,
            generations: HashMap::new(),
            renewals: 0,
            calls: 0,
        }
    }

    /// The environment candidate at `ratios[g]` in its `g`-th process
    /// pair (the last from then on), an in-process one at `in_process`.
    fn by_process(ratios: &'static [f64], in_process: f64) -> Scripted {
        Scripted::new(Box::new(move |s, g, _| {
            if s.env.is_empty() {
                in_process
            } else {
                ratios[(g as usize).min(ratios.len() - 1)]
            }
        }))
    }
}

impl Measurer for Scripted {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        self.calls += 1;
        let jitter = 1.0 + 0.005 * ((self.calls * 7919 % 13) as f64 / 6.0 - 1.0);
        let factor = if setting.is_default() {
            1.0
        } else {
            let g = self.generations.get(&setting.env).copied().unwrap_or(0);
            (self.ratio)(setting, g, case.bytes)
        };
        let time_us = 100.0 * factor * jitter;
        Ok(Sample {
            time_us,
            cost_us: time_us * f64::from(iters) + 50.0,
            algo_proto: None,
        })
    }

    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        if candidate.env.is_empty() {
            return Ok(None);
        }
        *self.generations.entry(candidate.env.clone()).or_insert(0) += 1;
        self.renewals += 1;
        Ok(Some(RENEW_US))
    }
}

/// The socket knobs, `NCCL_NSOCKS_PERTHREAD` x `NCCL_SOCKET_NTHREADS`.
fn sockets(nsocks: u32, nthreads: u32) -> Setting {
    Setting {
        env: vec![
            ("NCCL_NSOCKS_PERTHREAD".into(), nsocks.to_string()),
            ("NCCL_SOCKET_NTHREADS".into(), nthreads.to_string()),
        ],
        ..Setting::default()
    }
}

fn socks() -> Setting {
    sockets(2, 2)
}

/// One all_gather band of `space`, without the refinement (these tests
/// are about the confirmation; the refinement's own set theirs).
fn config(space: CandidateSpace) -> TuneConfig {
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![64 * MIB], 2, 2, 600e6);
    cfg.space = space;
    cfg.refine_processes = 0;
    cfg
}

#[test]
fn the_claim_is_the_fresh_processes_mean_not_the_screenings_luck() {
    // Screened in a fast process (0.5x); its next four run 0.55x-0.8x.
    let mut m = Scripted::by_process(&[0.5, 0.55, 0.8, 0.6, 0.7], 1.3);
    let cfg = config(CandidateSpace::only(vec![socks()]));
    let mut pairs_heard = Vec::new();
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |p| {
        if p.phase == Phase::Confirm && !pairs_heard.contains(&p.process_pair) {
            pairs_heard.push(p.process_pair);
        }
    });
    // Progress names each fresh process pair of the confirmation.
    assert_eq!(
        pairs_heard,
        (1..=4).map(|k| Some((k, 4))).collect::<Vec<_>>()
    );
    let Outcome::Gain {
        setting,
        ratio,
        processes,
        ..
    } = &r.bands[0].outcome
    else {
        panic!("{:?}", r.bands[0].outcome)
    };
    assert_eq!(setting, &socks());
    assert_eq!(*processes, 4);
    assert_eq!(
        m.renewals, 4,
        "every confirmation pair in a fresh process pair"
    );
    // The geometric mean of the fresh processes' ratios.
    let mean = [0.55f64, 0.8, 0.6, 0.7].iter().map(|r| r.ln()).sum::<f64>() / 4.0;
    assert!(
        (ratio.estimate / mean.exp() - 1.0).abs() < 0.01,
        "{ratio:?}"
    );
    // The interval carries the spread between processes: it reaches from
    // the fast ones to the slow ones, yet is a sure gain.
    assert!(ratio.lo < 0.56 && ratio.hi > 0.8, "{ratio:?}");
    assert!(ratio.hi < 0.98, "{ratio:?}");
    // The renewals are wall time of the budget.
    assert!(r.spent_us >= 4.0 * RENEW_US, "{}", r.spent_us);
}

#[test]
fn processes_that_disagree_too_much_are_no_sure_gain() {
    // Fresh processes from 0.45x to 1.0x: the mean is faster, but four
    // such processes cannot say by how much at 95%.
    let mut m = Scripted::by_process(&[0.45, 0.45, 1.0, 0.5, 0.95], 1.3);
    let cfg = config(CandidateSpace::only(vec![socks()]));
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    assert_no_sure_gain_of_socks(&r.bands[0].outcome);
}

/// `outcome` is no gain, naming 2x2 and an interval that reaches past
/// the gain rule's 0.98.
fn assert_no_sure_gain_of_socks(outcome: &Outcome) {
    match outcome {
        Outcome::NoGain {
            best: Some(s),
            ratio: Some(ratio),
        } => {
            assert_eq!(s, &socks());
            assert!(ratio.hi > 0.98, "{ratio:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_setting_measured_in_process_is_confirmed_there() {
    // channels=8 wins; it has no processes of its own to renew.
    let mut m = Scripted::by_process(&[1.2], 0.8);
    let space = CandidateSpace {
        channels: vec![8],
        ..CandidateSpace::only(vec![socks()])
    };
    let r = tune(&mut m, &config(space), &AtomicBool::new(false), &mut |_| {});
    let Outcome::Gain {
        setting, processes, ..
    } = &r.bands[0].outcome
    else {
        panic!("{:?}", r.bands[0].outcome)
    };
    assert_eq!(setting.channels, Some(8));
    assert_eq!(*processes, 1);
    assert_eq!(m.renewals, 0);
}

#[test]
fn renewals_keep_to_the_budget() {
    // Renewals of 0.2 s in a 0.6 s budget: the confirmation stops renewing
    // when the next one no longer fits, and the search ends within it.
    let mut m = Scripted::by_process(&[0.5, 0.55, 0.8, 0.6, 0.7], 1.3);
    let mut cfg = config(CandidateSpace::only(vec![socks()]));
    cfg.budget_us = 0.6e6;
    tune_within_budget(&mut m, &cfg);
    assert!((1..4).contains(&m.renewals), "{}", m.renewals);
}

/// The search of `cfg` with `m`, after checking it ended within its budget.
fn tune_within_budget(m: &mut Scripted, cfg: &TuneConfig) -> collbench_tune::TuneReport {
    let r = tune(m, cfg, &AtomicBool::new(false), &mut |_| {});
    assert!(
        r.spent_us <= cfg.budget_us,
        "{} of {}",
        r.spent_us,
        cfg.budget_us
    );
    r
}

fn four_by_one() -> Setting {
    sockets(4, 1)
}

#[test]
fn a_band_pick_beaten_by_the_shell_setting_on_fresh_pairs_gives_way_to_it() {
    // 2x2 runs at 0.5x everywhere. 4x1 runs at 0.9x at 1 MiB; at 8 MiB its
    // first process (the screening's) happens to run at 0.3x, its fresh
    // ones at 0.8x: it is picked there and confirmed at +25%, while 2x2,
    // the shell lines' setting, measures +100% in that band afterwards.
    let mut m = Scripted::new(Box::new(|s, g, bytes| {
        match (s == &socks(), bytes == 8 * MIB, g) {
            (true, ..) => 0.5,
            (false, true, 0) => 0.3,
            (false, true, _) => 0.8,
            (false, false, _) => 0.9,
        }
    }));
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![MIB, 8 * MIB], 2, 2, 600e6);
    cfg.space = CandidateSpace::only(vec![socks(), four_by_one()]);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    let [small, large] = &r.bands[..] else {
        panic!("{:?}", r.bands)
    };
    assert_eq!(small.gain().unwrap().0, &socks());
    assert!(small.replaced.is_none());
    let (winner, ratio) = large.gain().unwrap();
    assert_eq!(winner, &socks(), "{:?}", large.outcome);
    assert!((ratio.estimate - 0.5).abs() < 0.01, "{ratio:?}");
    let x = large.replaced.as_ref().expect("the pick is on record");
    assert_eq!(x.setting.as_ref(), Some(&four_by_one()));
    assert!(x.was_gain);
    assert!((x.ratio.unwrap().estimate - 0.8).abs() < 0.01, "{x:?}");
    let text = collbench_tune::render::text(&r);
    assert!(
        text.contains("replaced: all_gather 8M: its own pick NCCL_NSOCKS_PERTHREAD=4, NCCL_SOCKET_NTHREADS=1 (+25.0%"),
        "{text}"
    );
    // The shell lines now claim both bands for 2x2.
    let shell = collbench_tune::render::shell(&r);
    assert!(shell.contains("in 2 of 2 bands"), "{shell}");
}

#[test]
fn a_band_pick_within_the_shell_settings_noise_stays() {
    // 4x1 at 0.55x in the 8 MiB band, 2x2 at 0.56x there: 2x2 is not
    // faster over its whole interval than the band's pick, which stays.
    let mut m = Scripted::new(Box::new(|s, _, bytes| {
        match (s == &socks(), bytes == 8 * MIB) {
            (true, true) => 0.56,
            (true, false) => 0.5,
            (false, true) => 0.55,
            (false, false) => 0.9,
        }
    }));
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![MIB, 8 * MIB], 2, 2, 600e6);
    cfg.space = CandidateSpace::only(vec![socks(), four_by_one()]);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    assert_eq!(r.bands[1].gain().unwrap().0, &four_by_one());
    assert!(r.bands[1].replaced.is_none());
}

/// One all_gather band of 2x2 alone, refinement as by default.
fn refined(budget_us: f64) -> TuneConfig {
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![64 * MIB], 2, 2, budget_us);
    cfg.space = CandidateSpace::only(vec![socks()]);
    cfg
}

/// 2x2's ratio in process pair `g`: the screening's and the next four
/// lucky (0.5x-0.55x), those after them from a cycle around 0.65x.
fn lucky_first(g: u32) -> f64 {
    const LATER: [f64; 4] = [0.7, 0.6, 0.75, 0.55];
    match g {
        0..=4 => [0.5, 0.5, 0.55, 0.5, 0.52][g as usize],
        _ => LATER[(g as usize - 5) % LATER.len()],
    }
}

#[test]
fn the_budget_left_buys_the_shell_settings_claim_more_process_pairs() {
    let mut m = Scripted::new(Box::new(|_, g, _| lucky_first(g)));
    let cfg = refined(600e6);
    let mut refine_pairs = Vec::new();
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |p| {
        if p.phase == Phase::Refine && !refine_pairs.contains(&p.process_pair) {
            refine_pairs.push(p.process_pair);
        }
    });
    let Outcome::Gain {
        ratio, processes, ..
    } = &r.bands[0].outcome
    else {
        panic!("{:?}", r.bands[0].outcome)
    };
    // 4 confirmation pairs, then 12 more up to the cap, each heard.
    assert_eq!(*processes, 16);
    assert_eq!(m.renewals, 16);
    assert_eq!(
        refine_pairs,
        (5..=16).map(|k| Some((k, 16))).collect::<Vec<_>>()
    );
    // The claim is the mean over all 16 fresh pairs: nearer the later
    // processes' 0.65x than the four lucky ones' 0.52x.
    let mean = (1..=16).map(|g| lucky_first(g).ln()).sum::<f64>() / 16.0;
    assert!(
        (ratio.estimate / mean.exp() - 1.0).abs() < 0.01,
        "{ratio:?} against {}",
        mean.exp()
    );
    let pw = r.process_wide.as_ref().expect("the shell lines' setting");
    assert!(pw.refine_spent_us >= 12.0 * RENEW_US, "{pw:?}");
    assert!(r.spent_us <= cfg.budget_us);
    // The footer says where that time went, and how many pairs.
    let text = collbench_tune::render::text(&r);
    assert!(
        text.contains("s on more fresh process pairs for the shell lines' setting's figures")
            && text.contains("confirmed over 16 fresh pairs"),
        "{text}"
    );
    // Without the refinement: the four lucky pairs' claim, further off.
    let mut m = Scripted::new(Box::new(|_, g, _| lucky_first(g)));
    let mut cfg = refined(600e6);
    cfg.refine_processes = 0;
    let r4 = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    let (_, four) = r4.bands[0].gain().unwrap();
    assert!(four.estimate < 0.53, "{four:?}");
    assert_eq!(r4.process_wide.unwrap().refine_spent_us, 0.0);
}

#[test]
fn processes_that_agree_within_the_target_get_no_more() {
    // Every process at 0.6x (the measurer's ±0.5% noise only): 4 pairs
    // already put the interval within ±2.5%.
    let mut m = Scripted::new(Box::new(|_, _, _| 0.6));
    let r = tune(
        &mut m,
        &refined(600e6),
        &AtomicBool::new(false),
        &mut |_| {},
    );
    let Outcome::Gain { processes, .. } = &r.bands[0].outcome else {
        panic!("{:?}", r.bands[0].outcome)
    };
    assert_eq!(*processes, 4);
    assert_eq!(m.renewals, 4);
    assert_eq!(r.process_wide.unwrap().refine_spent_us, 0.0);
}

#[test]
fn the_refinement_keeps_to_the_budget() {
    // Renewals of 0.2 s: a 2 s budget has room for a few more pairs
    // after the confirmation's four, not for twelve.
    let mut m = Scripted::new(Box::new(|_, g, _| lucky_first(g)));
    let r = tune_within_budget(&mut m, &refined(2e6));
    let Outcome::Gain { processes, .. } = &r.bands[0].outcome else {
        panic!("{:?}", r.bands[0].outcome)
    };
    assert!((5..16).contains(processes), "{processes}");
}

#[test]
fn a_gain_that_more_process_pairs_no_longer_call_sure_is_no_gain() {
    // Four fresh pairs at 0.85x-0.9x confirm a gain; the processes after
    // them run at the default's pace or slower.
    let ratio = |g: u32| match g {
        0..=4 => [0.8, 0.9, 0.85, 0.88, 0.86][g as usize],
        _ => [1.05, 1.0, 1.1, 0.98][(g as usize - 5) % 4],
    };
    let mut m = Scripted::new(Box::new(move |_, g, _| ratio(g)));
    let r = tune(
        &mut m,
        &refined(600e6),
        &AtomicBool::new(false),
        &mut |_| {},
    );
    assert_no_sure_gain_of_socks(&r.bands[0].outcome);
    // And the shell lines set nothing.
    assert!(!collbench_tune::render::shell(&r).contains("export "));
}

#[test]
fn the_shell_settings_figures_where_it_did_not_win_are_refined_too() {
    // 2x2 wins the 1 and 64 MiB bands (0.5x), the shell lines' setting;
    // 4x1 wins at 8 MiB (0.3x), where 2x2 runs at 0.5x-0.8x by process:
    // its figure there gets more pairs.
    let mut m = Scripted::new(Box::new(|s, g, bytes| {
        match (s == &socks(), bytes == 8 * MIB) {
            (true, false) => 0.5,
            (true, true) => [0.5, 0.8, 0.6, 0.75][g as usize % 4],
            (false, true) => 0.3,
            (false, false) => 0.9,
        }
    }));
    let sizes = vec![MIB, 8 * MIB, 64 * MIB];
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], sizes, 2, 2, 600e6);
    cfg.space = CandidateSpace::only(vec![socks(), four_by_one()]);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    assert_eq!(r.bands[1].gain().unwrap().0, &four_by_one());
    let pw = r.process_wide.expect("the shell lines' setting");
    assert_eq!(pw.setting, socks());
    match &pw.bands[0].figure {
        collbench_tune::ProcessWideFigure::Confirmed { processes, .. } => {
            assert_eq!(*processes, 16)
        }
        other => panic!("{other:?}"),
    }
    // The 1 MiB band's own figure agreed within the target: four pairs.
    let Outcome::Gain { processes, .. } = &r.bands[0].outcome else {
        panic!("{:?}", r.bands[0].outcome)
    };
    assert_eq!(*processes, 4);
}
