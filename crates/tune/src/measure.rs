//! The measurement seam: the search asks a [`Measurer`] for one timed
//! repeat of one setting at a time and never learns how it was taken. The
//! NCCL measurer (communicators built with `ncclConfig_t`, the embedded
//! tuner plugin switched per candidate) lives with the NCCL backend; tests
//! use [`crate::fake::FakeMeasurer`].

use crate::setting::{AlgoProto, Case, Setting};
use serde::{Deserialize, Serialize};

/// One timed repeat of one setting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Time per iteration (us), averaged over the repeat's iterations.
    pub time_us: f64,
    /// Wall time the repeat took, warm-up and setup included (us): what
    /// the search charges against `--budget`.
    pub cost_us: f64,
    /// The algorithm and protocol NCCL ran, where the measurer can tell
    /// (the tuner CSV needs them to name a channel-count-only setting).
    pub algo_proto: Option<AlgoProto>,
}

/// Why a measurement gave no sample.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum MeasureError {
    /// The setting cannot run on this machine or for this op (e.g. NVLS
    /// without NVLink SHARP): the search skips the candidate and says why.
    #[error("not supported here: {0}")]
    Unsupported(String),
    /// The measurement failed: the search stops and reports what it has.
    #[error("measurement failed: {0}")]
    Failed(String),
    /// The candidate failed where only it is at fault (under a launcher,
    /// the child processes of an environment candidate died, hung or
    /// disagreed on some host): the search ends that candidate with the
    /// reason and goes on. A candidate's own trouble must not cost the
    /// other candidates their measurements.
    #[error("candidate failed: {reason}")]
    CandidateFailed {
        /// Why, for people.
        reason: String,
        /// Wall time the failed repeat or renewal took (us): a hung
        /// child's deadline is budget spent. Under a launcher it is the
        /// dearest process's, agreed like a sample's cost, so every
        /// process charges the same and their searches stay in step.
        cost_us: f64,
    },
}

impl MeasureError {
    /// A candidate's failure charged at least `us` of wall time; any
    /// other error as it is.
    fn charged(self, us: f64) -> MeasureError {
        match self {
            MeasureError::CandidateFailed { reason, cost_us } => MeasureError::CandidateFailed {
                reason,
                cost_us: cost_us.max(us),
            },
            e => e,
        }
    }

    /// A candidate's failure whose wall time the measurer does not know
    /// (0 us: [`WallClock`] charges the time since its previous answer).
    pub fn candidate_failed(reason: impl Into<String>) -> MeasureError {
        MeasureError::CandidateFailed {
            reason: reason.into(),
            cost_us: 0.0,
        }
    }
}

/// One member of an interleaved pair, as the search asks for it: the
/// setting measured now and its partner (the default beside a candidate,
/// or the candidate beside the default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InPair<'a> {
    pub setting: &'a Setting,
    pub partner: &'a Setting,
}

impl<'a> InPair<'a> {
    /// The pair's candidate: whichever member is not the default.
    pub fn candidate(&self) -> &'a Setting {
        if self.setting.is_default() {
            self.partner
        } else {
            self.setting
        }
    }
}

/// What one repeat gave: its sample, or why there is none.
pub type Measured = Result<Sample, MeasureError>;

/// Takes timed repeats. Every call measures `iters` back-to-back
/// iterations of `case` under `setting` (after the measurer's own warm-up)
/// and returns their mean time. The search interleaves calls (default,
/// candidate, default, ...), so a measurer must not cache results across
/// calls (it may and should keep communicators and buffers).
///
/// What the search relies on (the NCCL measurer must keep to it):
/// - `Setting::default()` is NCCL untouched: no override in the tuner
///   plugin, a communicator without minCTAs/maxCTAs/CTAPolicy, buffers
///   not registered.
/// - A candidate NCCL silently does not follow is `Unsupported`, never a
///   sample: e.g. a forced algorithm/protocol NCCL marks as not offered
///   (the embedded plugin counts those as "rejected"), or a channel count
///   above what the communicator was built with. Otherwise the default
///   would be measured under the candidate's name.
/// - `cost_us` is real wall time, setup included, so `--budget` holds.
pub trait Measurer {
    /// One repeat of `iters` iterations.
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured;

    /// One repeat of `pair.setting` as one member of an interleaved pair
    /// whose other member is `pair.partner`. A measurer that runs some
    /// candidates elsewhere (in a child process,
    /// [`crate::child::EnvFallback`]) measures the default partner there
    /// too; the others ignore the partner.
    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        self.measure(pair.setting, case, iters)
    }

    /// Every process agreed that `candidate` failed
    /// ([`MeasureError::CandidateFailed`]) with `reason`: a measurer that
    /// holds something for it (child processes) lets it go and answers
    /// every later request for it at once with that same error, so every
    /// process says the same from then on. Default: nothing held.
    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        let _ = (candidate, reason);
    }

    /// Fresh processes for `candidate`'s pairs from now on: a measurer
    /// that measures it in processes of its own (an environment
    /// candidate's child and its default partner,
    /// [`crate::child::EnvFallback`]) ends them and starts new ones, ready
    /// to measure. The search confirms such a candidate over several
    /// process pairs ([`crate::TuneConfig::confirm_processes`]): on two
    /// emulated hosts a socket setting's speed differed 2x from one
    /// process to the next (bench/results/tune.md), so pairs from one
    /// process pair say nothing about the next.
    ///
    /// `Ok(None)`: nothing to renew (measured in this process; the
    /// default). `Ok(Some(us))`: renewed, taking `us` of wall time.
    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        let _ = candidate;
        Ok(None)
    }
}

/// A [`Measurer`] whose every cost is at least the wall time since its
/// previous answer: `--budget` is the command's wall time, and between
/// two repeats there is more than the repeats (under a launcher the
/// processes' agreement after each one and the ports agreed for a
/// renewal, the search's own work, progress lines). Charged only with
/// the repeats' costs, a 10-minute search on two emulated hosts ended 21 s
/// past its budget. Under a launcher it wraps the measurer inside the
/// agreement ([`crate::lockstep::Lockstep`]), whose dearest cost then
/// holds every process's wall time and keeps the searches' budgets alike.
/// Errors carry no cost and pass as they are.
pub struct WallClock<'a> {
    inner: &'a mut dyn Measurer,
    /// When the previous answer was given (or the clock made).
    since: std::time::Instant,
}

impl<'a> WallClock<'a> {
    /// Starts the clock now: the first repeat is charged from here.
    pub fn new(inner: &'a mut dyn Measurer) -> WallClock<'a> {
        WallClock {
            inner,
            since: std::time::Instant::now(),
        }
    }

    /// The wall time since the previous answer (us); restarts the clock.
    fn lap_us(&mut self) -> f64 {
        let now = std::time::Instant::now();
        let us = now.duration_since(self.since).as_secs_f64() * 1e6;
        self.since = now;
        us
    }

    /// A sample, or a candidate's failure (a hung child's deadline),
    /// charged with the lap. Other errors restart the clock too: an
    /// unsupported candidate costs next to nothing, and a failed
    /// measurement ends the search.
    fn charged(&mut self, measured: Measured) -> Measured {
        let lap_us = self.lap_us();
        match measured {
            Ok(s) => Ok(Sample {
                cost_us: s.cost_us.max(lap_us),
                ..s
            }),
            Err(e) => Err(e.charged(lap_us)),
        }
    }
}

impl Measurer for WallClock<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        let m = self.inner.measure(setting, case, iters);
        self.charged(m)
    }

    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        let m = self.inner.measure_in_pair(pair, case, iters);
        self.charged(m)
    }

    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        self.inner.candidate_ended(candidate, reason);
    }

    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        // Nothing renewed: the clock runs on. A failure is charged as a
        // failed repeat is.
        match self.inner.renew(candidate) {
            Ok(None) => Ok(None),
            Ok(Some(us)) => Ok(Some(us.max(self.lap_us()))),
            Err(e) => Err(e.charged(self.lap_us())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::{Case, Setting};
    use std::time::Duration;

    /// Answers at once with a cost of 1 us; its first answer is a failure
    /// when `fail_first`.
    struct Instant1us {
        fail_first: bool,
        calls: u32,
    }

    impl Instant1us {
        fn new(fail_first: bool) -> Instant1us {
            Instant1us {
                fail_first,
                calls: 0,
            }
        }
    }

    impl Measurer for Instant1us {
        fn measure(&mut self, _: &Setting, _: &Case, _: u32) -> Measured {
            self.calls += 1;
            if self.fail_first && self.calls == 1 {
                return Err(MeasureError::Failed("told to".into()));
            }
            Ok(Sample {
                time_us: 1.0,
                cost_us: 1.0,
                algo_proto: None,
            })
        }
    }

    fn case() -> Case {
        Case {
            op: collbench_core::Collective::AllReduce,
            bytes: 1 << 20,
        }
    }

    const MS: f64 = 1000.0;

    #[test]
    fn a_repeat_costs_at_least_the_wall_time_since_the_previous_answer() {
        let mut inner = Instant1us::new(false);
        let mut clock = WallClock::new(&mut inner);
        let s = Setting::default();
        std::thread::sleep(Duration::from_millis(30));
        let first = clock.measure(&s, &case(), 1).unwrap();
        assert!(first.cost_us >= 30.0 * MS, "{first:?}");
        // Nothing in between: about the repeat's own cost, not the lap again.
        let second = clock.measure(&s, &case(), 1).unwrap();
        assert!(second.cost_us < 30.0 * MS, "{second:?}");
    }

    #[test]
    fn a_renewal_of_nothing_leaves_its_time_to_the_next_answer_a_failure_does_not() {
        let s = Setting::default();
        let mut ok = Instant1us::new(false);
        let mut clock = WallClock::new(&mut ok);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.renew(&s), Ok(None));
        std::thread::sleep(Duration::from_millis(20));
        let next = clock.measure(&s, &case(), 1).unwrap();
        assert!(next.cost_us >= 40.0 * MS, "{next:?}");

        // A failure takes its lap with it: not charged twice.
        let mut failing = Instant1us::new(true);
        let mut clock = WallClock::new(&mut failing);
        std::thread::sleep(Duration::from_millis(40));
        assert!(clock.measure(&s, &case(), 1).is_err());
        let next = clock.measure(&s, &case(), 1).unwrap();
        assert!(next.cost_us < 40.0 * MS, "{next:?}");
    }

    /// Fails every candidate, at once, as a candidate's fault.
    struct CandidateFails;

    impl Measurer for CandidateFails {
        fn measure(&mut self, _: &Setting, _: &Case, _: u32) -> Measured {
            Err(MeasureError::candidate_failed("its child hung"))
        }
    }

    #[test]
    fn a_candidates_failure_is_charged_its_wall_time() {
        let mut inner = CandidateFails;
        let mut clock = WallClock::new(&mut inner);
        std::thread::sleep(Duration::from_millis(30));
        match clock.measure(&Setting::default(), &case(), 1) {
            Err(MeasureError::CandidateFailed { cost_us, .. }) => {
                assert!(cost_us >= 30.0 * MS, "{cost_us}")
            }
            other => panic!("{other:?}"),
        }
    }
}
