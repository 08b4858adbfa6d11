//! Confirmation over fresh process pairs: an environment candidate's
//! speed can differ from one process to the next (a socket setting on two
//! emulated hosts ran 0.45x to 0.9x the default's time, by process), so
//! its confirmation renews its processes and its claim is the mean over
//! the fresh ones, not the luck of the process its screening ran in.

use collbench_core::Collective;
use collbench_tune::space::CandidateSpace;
use collbench_tune::{
    tune, Case, MeasureError, Measured, Measurer, Outcome, Sample, Setting, TuneConfig,
};
use std::sync::atomic::AtomicBool;

const MIB: u64 = 1 << 20;
/// What a renewal costs here (us).
const RENEW_US: f64 = 200_000.0;

/// A measurer whose environment candidate runs at `ratios[g]` of the
/// default's time in its `g`-th process pair (the screening's is 0), an
/// in-process candidate at `in_process` of it, with ±0.5% noise.
struct ByProcess {
    ratios: Vec<f64>,
    in_process: f64,
    generation: usize,
    renewals: u32,
    calls: u64,
}

impl ByProcess {
    fn new(ratios: &[f64], in_process: f64) -> ByProcess {
        ByProcess {
            ratios: ratios.to_vec(),
            in_process,
            generation: 0,
            renewals: 0,
            calls: 0,
        }
    }
}

impl Measurer for ByProcess {
    fn measure(&mut self, setting: &Setting, _case: &Case, iters: u32) -> Measured {
        self.calls += 1;
        let jitter = 1.0 + 0.005 * ((self.calls * 7919 % 13) as f64 / 6.0 - 1.0);
        let factor = if setting.is_default() {
            1.0
        } else if setting.env.is_empty() {
            self.in_process
        } else {
            self.ratios[self.generation.min(self.ratios.len() - 1)]
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
        self.generation += 1;
        self.renewals += 1;
        Ok(Some(RENEW_US))
    }
}

fn socks() -> Setting {
    Setting {
        env: vec![
            ("NCCL_NSOCKS_PERTHREAD".into(), "2".into()),
            ("NCCL_SOCKET_NTHREADS".into(), "2".into()),
        ],
        ..Setting::default()
    }
}

fn config(space: CandidateSpace) -> TuneConfig {
    let mut cfg = TuneConfig::new(vec![Collective::AllGather], vec![64 * MIB], 2, 2, 600e6);
    cfg.space = space;
    cfg
}

#[test]
fn the_claim_is_the_fresh_processes_mean_not_the_screenings_luck() {
    // Screened in a fast process (0.5x); its next four run 0.55x-0.8x.
    let mut m = ByProcess::new(&[0.5, 0.55, 0.8, 0.6, 0.7], 1.3);
    let cfg = config(CandidateSpace::only(vec![socks()]));
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
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
    let mut m = ByProcess::new(&[0.45, 0.45, 1.0, 0.5, 0.95], 1.3);
    let cfg = config(CandidateSpace::only(vec![socks()]));
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    match &r.bands[0].outcome {
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
    let mut m = ByProcess::new(&[1.2], 0.8);
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
    let mut m = ByProcess::new(&[0.5, 0.55, 0.8, 0.6, 0.7], 1.3);
    let mut cfg = config(CandidateSpace::only(vec![socks()]));
    cfg.budget_us = 0.6e6;
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    assert!(
        r.spent_us <= cfg.budget_us,
        "{} of {}",
        r.spent_us,
        cfg.budget_us
    );
    assert!((1..4).contains(&m.renewals), "{}", m.renewals);
}
