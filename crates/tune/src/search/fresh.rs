//! Fresh pairs for a verdict: an environment candidate's confirmation (and
//! the process-wide phase) spread over fresh process pairs, judged across
//! them ([`crate::stats::across_processes`]); any other setting on pairs in
//! the parent's process.

use super::meter::Meter;
use super::{BandState, Calibration, Halt, Phase};
use crate::setting::{AlgoProto, Setting};
use crate::space::Band;
use crate::stats::{across_processes, AdaptiveStop, Decision, Interval, LogSeries, StopRule};

/// What fresh pairs gave: the interval of the time ratio (None when no
/// pair fitted), the process pairs measured (1 in this process) and what
/// NCCL last ran.
pub(super) type Fresh = (Option<Interval>, u32, Option<AlgoProto>);

/// The figures a search measured over several fresh process pairs,
/// kept for the refinement (`refine.rs`), which adds pairs to them.
#[derive(Default)]
pub(super) struct Figures {
    pub(super) kept: Vec<Kept>,
}

/// A figure measured over several fresh process pairs, kept with its
/// pairs so that the refinement can add more ([`Figures::refine`]).
pub(super) struct Kept {
    pub(super) band: Band,
    pub(super) setting: Setting,
    /// Each process pair's log ratios (setting/default).
    pub(super) processes: Vec<LogSeries>,
    /// The band's repeats, for the pairs added later.
    pub(super) calibration: Calibration,
}

impl Figures {
    /// Fresh pairs of `setting` against the default, for a verdict. A
    /// setting measured in processes of its own is measured in
    /// `confirm_processes` fresh process pairs, one after another (each
    /// renewed first, never the screening's: a candidate whose screening
    /// process happened to be a fast one would otherwise be confirmed by
    /// the same luck), each with an equal share of the pairs and of the
    /// band's budget left, and judged by the interval across them; any
    /// other setting on pairs in this process ([`Meter::pairs_of`]).
    /// Returns the interval (None when no pair fitted), the process pairs
    /// measured (1 in this process) and what NCCL last ran.
    pub(super) fn fresh_pairs(
        &mut self,
        meter: &mut Meter,
        st: &mut BandState,
        setting: &Setting,
        mut ap: Option<AlgoProto>,
        phase: Phase,
    ) -> Result<Fresh, Halt> {
        let total = meter.cfg.confirm_processes.max(1);
        let mut processes: Vec<LogSeries> = Vec::new();
        let measured = meter.process_pairs(st, setting, phase, total, &mut processes, &mut ap);
        meter.process_pair = None;
        if let Some(in_process) = measured? {
            return Ok(in_process);
        }
        let confidence = meter.cfg.confirm.confidence;
        let measured: Vec<&LogSeries> = processes.iter().filter(|s| !s.is_empty()).collect();
        let interval = match measured[..] {
            [] => None,
            [one] => one.interval(confidence),
            _ => across_processes(&processes, confidence),
        };
        let count = measured.len() as u32;
        if count > 1 {
            // Kept for the refinement, which may add process pairs to it;
            // a later figure of the same setting in the same band (the
            // process-wide phase's, after the band's own confirmation said
            // no gain) takes the earlier one's place.
            self.kept
                .retain(|k| !(k.band == *st.band && &k.setting == setting));
            self.kept.push(Kept {
                band: *st.band,
                setting: setting.clone(),
                processes,
                calibration: st.calibration(),
            });
        }
        Ok((interval, count, ap))
    }
}

impl Meter<'_> {
    /// The loop of [`Figures::fresh_pairs`] over `total` process pairs,
    /// each one's log ratios pushed to `processes`. For a setting measured
    /// in this process: the answer of [`Meter::pairs_of`] instead.
    pub(super) fn process_pairs(
        &mut self,
        st: &mut BandState,
        setting: &Setting,
        phase: Phase,
        total: u32,
        processes: &mut Vec<LogSeries>,
        ap: &mut Option<AlgoProto>,
    ) -> Result<Option<Fresh>, Halt> {
        for g in 0..total {
            match self.renew(st, setting) {
                Ok(true) => {}
                Ok(false) => {
                    let (interval, ap) = self.pairs_of(st, setting, *ap, phase)?;
                    return Ok(Some((interval, u32::from(interval.is_some()), ap)));
                }
                Err(Halt::Budget) => break,
                Err(e) => return Err(e),
            }
            self.process_pair = Some((g + 1, total));
            let max_cost_us = (st.limit_us - self.spent_us).max(0.0) / f64::from(total - g);
            processes.push(self.one_process_pair(st, setting, phase, max_cost_us, ap)?);
        }
        Ok(None)
    }

    /// The pairs of one fresh process pair (already renewed): a
    /// confirmation's share of pairs (its stop rule's counts split over
    /// `confirm_processes`), at most `max_cost_us`; their log ratios
    /// (empty when none fitted).
    pub(super) fn one_process_pair(
        &mut self,
        st: &mut BandState,
        setting: &Setting,
        phase: Phase,
        max_cost_us: f64,
        ap: &mut Option<AlgoProto>,
    ) -> Result<LogSeries, Halt> {
        let total = self.cfg.confirm_processes.max(1);
        let rule = StopRule {
            min_samples: self.cfg.confirm.min_samples.div_ceil(total).max(2),
            max_samples: self.cfg.confirm.max_samples.div_ceil(total).max(2),
            max_cost_us,
            ..self.cfg.confirm
        };
        let mut stop = AdaptiveStop::new(rule);
        let mut logs = LogSeries::default();
        loop {
            match self.pair(st, setting, stop.len(), phase, st.limit_us) {
                Ok((d, c)) => {
                    *ap = c.algo_proto.or(*ap);
                    logs.push((c.time_us / d.time_us).ln());
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
        Ok(logs)
    }
}
