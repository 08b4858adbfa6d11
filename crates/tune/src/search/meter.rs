//! The measuring and its budget account: every repeat, pair and renewal
//! of a search goes through [`Meter`], which charges its cost, says each
//! one to the progress callback and answers a stop.

use super::{BandState, Halt, Phase, Progress, TuneConfig};
use crate::measure::{InPair, MeasureError, Measurer, Sample};
use crate::setting::{AlgoProto, Case, Setting};
use crate::stats::{AdaptiveStop, Decision, Interval, StopRule};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The measurer with what a search has spent: each repeat, pair and
/// renewal goes through it.
pub(super) struct Meter<'a> {
    pub(super) m: &'a mut dyn Measurer,
    pub(super) cfg: &'a TuneConfig,
    pub(super) stop: &'a AtomicBool,
    pub(super) progress: &'a mut dyn FnMut(&Progress),
    pub(super) spent_us: f64,
    /// The dearest renewal of a candidate's processes so far (us).
    pub(super) max_renew_us: f64,
    /// The fresh process pair being measured, for progress events (set
    /// and cleared by [`super::Figures::fresh_pairs`] and the refinement).
    pub(super) process_pair: Option<(u32, u32)>,
}

impl Meter<'_> {
    /// Fresh pairs of `setting` against the default under the
    /// confirmation's stop rule, up to the band's limit: the interval of
    /// the time ratio (None when no pair fitted) and what NCCL last ran
    /// with the setting (else `ap`).
    pub(super) fn pairs_of(
        &mut self,
        st: &mut BandState,
        setting: &Setting,
        mut ap: Option<AlgoProto>,
        phase: Phase,
    ) -> Result<(Option<Interval>, Option<AlgoProto>), Halt> {
        let rule = StopRule {
            max_cost_us: (st.limit_us - self.spent_us).max(0.0),
            ..self.cfg.confirm
        };
        let mut stop = AdaptiveStop::new(rule);
        loop {
            match self.pair(st, setting, stop.len(), phase, st.limit_us) {
                Ok((d, c)) => {
                    ap = c.algo_proto.or(ap);
                    if stop.push_pair(d.time_us, c.time_us, d.cost_us + c.cost_us)
                        != Decision::Continue
                    {
                        break;
                    }
                }
                Err(Halt::Budget) => break,
                Err(e) => return Err(e),
            }
        }
        Ok((stop.interval(), ap))
    }

    /// One interleaved pair (order alternating with `k`), if its predicted
    /// cost fits both `limit_us` and the whole budget.
    pub(super) fn pair(
        &mut self,
        st: &mut BandState,
        cand: &Setting,
        k: u32,
        phase: Phase,
        limit_us: f64,
    ) -> Result<(Sample, Sample), Halt> {
        let predicted = st.max_pair_us * 1.1;
        if self.spent_us + predicted > limit_us.min(self.cfg.budget_us) {
            return Err(Halt::Budget);
        }
        let default = Setting::default();
        let before = self.spent_us;
        let (d, c) = if k.is_multiple_of(2) {
            let d = self.one(st, &default, Some(cand), phase)?;
            (d, self.one(st, cand, Some(&default), phase)?)
        } else {
            let c = self.one(st, cand, Some(&default), phase)?;
            (self.one(st, &default, Some(cand), phase)?, c)
        };
        st.max_pair_us = st.max_pair_us.max(self.spent_us - before);
        Ok((d, c))
    }

    /// One repeat (a member of a pair with `partner`, or alone), with its
    /// progress event and stop check.
    pub(super) fn one(
        &mut self,
        st: &mut BandState,
        setting: &Setting,
        partner: Option<&Setting>,
        phase: Phase,
    ) -> Result<Sample, Halt> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(Halt::Stop);
        }
        (self.progress)(&Progress {
            band: st.band,
            band_index: st.index,
            bands_total: st.total,
            setting,
            phase,
            process_pair: self.process_pair,
            spent_us: self.spent_us,
            budget_left_us: (self.cfg.budget_us - self.spent_us).max(0.0),
        });
        let case = Case {
            op: st.band.op,
            bytes: st.band.probe_bytes,
        };
        let iters = if phase == Phase::Calibrate {
            1
        } else {
            st.iters
        };
        let measured = match partner {
            Some(partner) => self
                .m
                .measure_in_pair(InPair { setting, partner }, &case, iters),
            None => self.m.measure(setting, &case, iters),
        };
        let of_candidate = !setting.is_default() || partner.is_some_and(|p| !p.is_default());
        match measured {
            Ok(sample)
                if !(sample.time_us > 0.0
                    && sample.time_us.is_finite()
                    && sample.cost_us >= 0.0) =>
            {
                Err(Halt::Failed(format!(
                    "the measurer returned a time of {} us for {setting}",
                    sample.time_us
                )))
            }
            Ok(sample) => {
                self.spent_us += sample.cost_us;
                if setting.is_default() {
                    if phase != Phase::Calibrate {
                        st.default_logs.push(sample.time_us.ln());
                    }
                    st.default_ap = sample.algo_proto.or(st.default_ap);
                }
                Ok(sample)
            }
            Err(MeasureError::Unsupported(r)) if !setting.is_default() => Err(Halt::Unsupported(r)),
            Err(MeasureError::CandidateFailed { reason, cost_us }) if of_candidate => {
                // A hung child took its deadline: the budget must hold all
                // the same. The measurer's figure, not this process's own
                // clock: under a launcher every process gets the same
                // (agreed) one, so their searches decide alike.
                self.spent_us += cost_us;
                Err(Halt::CandidateFailed(reason))
            }
            Err(e) => Err(Halt::Failed(e.to_string())),
        }
    }

    /// Fresh processes for `setting`'s pairs ([`Measurer::renew`]), if its
    /// predicted cost (the dearest renewal so far plus 10%, and a pair
    /// after it) fits the band's limit: true when renewed, false when the
    /// setting is measured in this process.
    pub(super) fn renew(&mut self, st: &BandState, setting: &Setting) -> Result<bool, Halt> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(Halt::Stop);
        }
        // Only a setting of environment variables has processes of its
        // own: NCCL reads those once per process. Any other needs no
        // renewal, and no budget for one.
        if setting.env.is_empty() {
            return Ok(false);
        }
        let predicted = (self.max_renew_us + st.max_pair_us) * 1.1;
        if self.spent_us + predicted > st.limit_us.min(self.cfg.budget_us) {
            return Err(Halt::Budget);
        }
        let started = Instant::now();
        match self.m.renew(setting) {
            Ok(None) => Ok(false),
            Ok(Some(us)) => {
                self.spent_us += us;
                self.max_renew_us = self.max_renew_us.max(us);
                Ok(true)
            }
            // As a failed repeat: the measurer's (agreed) wall time.
            Err(MeasureError::CandidateFailed { reason, cost_us }) => {
                self.spent_us += cost_us;
                Err(Halt::CandidateFailed(reason))
            }
            // Charged nothing, as an unsupported repeat is: the processes
            // agree on the error, and each one's own clock would differ.
            Err(MeasureError::Unsupported(r)) => Err(Halt::Unsupported(r)),
            // The search ends here: its own clock is fine.
            Err(MeasureError::Failed(r)) => {
                self.spent_us += started.elapsed().as_secs_f64() * 1e6;
                Err(Halt::Failed(r))
            }
        }
    }
}
