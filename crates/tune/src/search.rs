//! The search: for each op and size band, screen the candidates against
//! NCCL's default in interleaved pairs, drop the surely slower ones early,
//! then re-measure the best one on fresh pairs and let the gain rule decide
//! (an environment candidate's in fresh process pairs: `fresh`); after the
//! bands, the process-wide phase (`process_wide`).
//!
//! Each part owns its state: `Search` the bands' order and verdicts
//! (here and in `process_wide`), `meter::Meter` the measurer and the
//! budget account (every repeat, pair and renewal), `fresh::Figures` the
//! figures over fresh process pairs and their refinement (`refine`).
//!
//! Budget: what the measurer reports as each repeat's wall cost is charged
//! against `budget_us`. Bands are measured smallest probe first, and each
//! gets an equal share of what is left when it starts (so a cheap band
//! that finishes under its share leaves more for the dear ones after it);
//! within a band, `screen_fraction` of the share goes to
//! screening (split evenly across candidates) and the rest to the
//! confirmation. A pair is only started if its predicted cost (the
//! dearest pair seen in the band, plus 10%) fits the budget, so the budget
//! can be overshot by at most the misprediction of one pair.
//!
//! Order inside a pair alternates (default first, then candidate first:
//! A B B A ...), so a linear drift within a pair cancels over two pairs.

use crate::measure::Measurer;
use crate::report::{
    process_wide_choice, BandReport, CandidateReport, CandidateStatus, End, Outcome, TuneReport,
};
use crate::setting::{AlgoProto, Setting};
use crate::space::{bands, candidates, Band};
use crate::stats::{AdaptiveStop, Decision, StopRule, Verdict};
use collbench_core::Collective;
use std::sync::atomic::AtomicBool;

mod config;
mod fresh;
mod meter;
mod process_wide;
mod progress;
mod refine;

pub use config::{parse_budget, BudgetError, TuneConfig};
pub use progress::{Phase, Progress};

use fresh::Figures;
use meter::Meter;

/// Runs the search. `stop` is polled before every measurement (set it from
/// a Ctrl-C handler): the search then returns what it measured so far with
/// `End::Interrupted`. `progress` hears about every measurement.
pub fn tune(
    measurer: &mut dyn Measurer,
    cfg: &TuneConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> TuneReport {
    let all: Vec<Band> = cfg
        .ops
        .iter()
        .flat_map(|op| bands(*op, &cfg.sizes))
        .collect();
    let mut s = Search {
        cfg,
        meter: Meter {
            m: measurer,
            cfg,
            stop,
            progress,
            spent_us: 0.0,
            max_renew_us: 0.0,
            process_pair: None,
        },
        figures: Figures::default(),
        bands_total: all.len(),
    };
    // The process-wide phase's share, kept back from the bands: with one
    // band there is nothing for a setting to lose.
    let reserve = if all.len() > 1 {
        cfg.budget_us * cfg.process_wide_fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let order = measuring_order(&all);
    let mut done: Vec<Option<(BandReport, Calibration)>> = vec![None; all.len()];
    let mut end = End::Complete;
    for (k, &i) in order.iter().enumerate() {
        let share = (cfg.budget_us - reserve - s.meter.spent_us).max(0.0) / (all.len() - k) as f64;
        let (report, calibration, band_end) = s.band(&all[i], k, share);
        done[i] = Some((report, calibration));
        if let Some(e) = band_end {
            end = e;
            break;
        }
    }
    // Reported in the ops' order, each op's bands by size, whatever the
    // order they were measured in; bands a stop never reached are absent.
    let (mut bands, calibrations): (Vec<BandReport>, Vec<Calibration>) =
        done.into_iter().flatten().unzip();
    let mut process_wide = None;
    if end == End::Complete {
        if let Some(setting) = process_wide_choice(&bands).cloned() {
            let (mut pw, pw_end) = s.process_wide(setting.clone(), &bands, &calibrations, &order);
            if pw_end.is_none() {
                let started = s.meter.spent_us;
                end = s
                    .figures
                    .refine(&mut s.meter, &setting)
                    .unwrap_or(End::Complete);
                pw.refine_spent_us = s.meter.spent_us - started;
                s.figures.apply_refined(cfg, &setting, &mut bands, &mut pw);
            }
            process_wide::promote(&mut bands, &pw, cfg.world_size);
            process_wide = Some(pw);
            if let Some(e) = pw_end {
                end = e;
            }
        }
    }
    TuneReport {
        world_size: cfg.world_size,
        n_nodes: cfg.n_nodes,
        budget_us: cfg.budget_us,
        spent_us: s.meter.spent_us,
        max_channels: cfg.max_channels,
        gain_rule: cfg.gain,
        end,
        bands,
        process_wide,
    }
}

/// What a band's calibration and pairs left for the process-wide phase:
/// its iterations per repeat and its dearest pair (us).
#[derive(Debug, Clone, Copy)]
struct Calibration {
    iters: u32,
    max_pair_us: f64,
}

impl Calibration {
    /// Before a band's calibration repeat.
    const NONE: Calibration = Calibration {
        iters: 1,
        max_pair_us: 0.0,
    };
}

/// The order the bands are measured in: by probe size, smallest first
/// (ties in the ops' order). Each band gets an equal share of what is left
/// when it starts, so the cheap bands, which mostly finish under their
/// share, hand what they leave to the dear ones at the end. Measured in
/// the ops' order, a dear band in the middle (all_reduce 512M before
/// all_gather's bands) shared the budget with bands that then left half
/// of it unused, while it had screened 7 of its 21 candidates (two
/// emulated hosts, bench/results/tune.md).
fn measuring_order(bands: &[Band]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..bands.len()).collect();
    order.sort_by_key(|&i| bands[i].probe_bytes);
    order
}

/// Why a band stopped short.
enum Halt {
    Stop,
    Budget,
    /// The measurer cannot run a candidate here (the default always can).
    Unsupported(String),
    /// A candidate failed where only it is at fault
    /// ([`crate::measure::MeasureError::CandidateFailed`]): it ends, the search goes on.
    CandidateFailed(String),
    Failed(String),
}

/// One search: the measuring and its budget account ([`Meter`]), the
/// figures kept over fresh process pairs ([`Figures`]) and the number of
/// bands (for progress lines).
struct Search<'a> {
    cfg: &'a TuneConfig,
    meter: Meter<'a>,
    figures: Figures,
    bands_total: usize,
}

/// Per-band state: the budget line, the default's samples, the pair costs.
struct BandState<'b> {
    band: &'b Band,
    /// Position among `total` in its phase's order (for progress lines).
    index: usize,
    total: usize,
    iters: u32,
    start_us: f64,
    limit_us: f64,
    max_pair_us: f64,
    default_logs: Vec<f64>,
    default_ap: Option<AlgoProto>,
}

impl<'b> BandState<'b> {
    /// A band's state from `start_us`, with `share` of the budget, the
    /// `index`-th of `total`, repeats as `cal` says (a band not yet
    /// calibrated: [`Calibration::NONE`]).
    fn new(
        band: &'b Band,
        (index, total): (usize, usize),
        start_us: f64,
        share: f64,
        cal: Calibration,
    ) -> BandState<'b> {
        BandState {
            band,
            index,
            total,
            iters: cal.iters,
            start_us,
            limit_us: start_us + share,
            max_pair_us: cal.max_pair_us,
            default_logs: Vec::new(),
            default_ap: None,
        }
    }

    /// What the band's calibration and pairs found.
    fn calibration(&self) -> Calibration {
        Calibration {
            iters: self.iters,
            max_pair_us: self.max_pair_us,
        }
    }
}

impl Search<'_> {
    fn band(
        &mut self,
        band: &Band,
        index: usize,
        share: f64,
    ) -> (BandReport, Calibration, Option<End>) {
        let (allowed, forbidden) = candidates(&self.cfg.space, band.op, self.cfg.max_channels);
        let mut st = BandState::new(
            band,
            (index, self.bands_total),
            self.meter.spent_us,
            share,
            Calibration::NONE,
        );
        let mut reports: Vec<CandidateReport> = allowed
            .iter()
            .map(|s| CandidateReport {
                setting: s.clone(),
                status: CandidateStatus::NotMeasured,
                algo_proto: None,
            })
            .collect();
        let result = self.run_band(&mut st, &mut reports, share);
        let (outcome, end) = match result {
            Ok(outcome) => (outcome, None),
            Err(Halt::Budget) => (self.no_gain_from_screening(&reports), None),
            Err(Halt::Stop) => (Outcome::Incomplete, Some(End::Interrupted)),
            Err(Halt::Failed(e) | Halt::Unsupported(e) | Halt::CandidateFailed(e)) => {
                (Outcome::Incomplete, Some(End::Failed(e)))
            }
        };
        let default_time_us = geo_mean(&st.default_logs);
        let busbw = |t_us: f64| busbw_gbps(band.op, band.probe_bytes, self.cfg.world_size, t_us);
        let outcome = match outcome {
            Outcome::Gain {
                setting,
                ratio,
                cost,
                algo_proto,
                processes,
                ..
            } => Outcome::Gain {
                busbw_gbps: default_time_us.map(|t| busbw(t * ratio.estimate)),
                setting,
                ratio,
                cost,
                algo_proto,
                processes,
            },
            other => other,
        };
        let report = BandReport {
            band: *band,
            iters: st.iters,
            default_time_us,
            default_busbw_gbps: default_time_us.map(busbw),
            default_algo_proto: st.default_ap,
            outcome,
            candidates: reports,
            forbidden,
            spent_us: self.meter.spent_us - st.start_us,
            replaced: None,
        };
        (report, st.calibration(), end)
    }

    fn run_band(
        &mut self,
        st: &mut BandState,
        reports: &mut [CandidateReport],
        share: f64,
    ) -> Result<Outcome, Halt> {
        let default = Setting::default();
        // Calibration: one repeat of one iteration sets the iteration count.
        let cal = self.meter.one(st, &default, None, Phase::Calibrate)?;
        st.iters =
            ((self.cfg.target_repeat_us / cal.time_us).ceil() as u32).clamp(1, self.cfg.max_iters);
        let overhead = (cal.cost_us - cal.time_us).max(0.0);
        st.max_pair_us = 2.0 * (cal.time_us * f64::from(st.iters) + overhead);

        // Screening.
        let screen_end = st.start_us + share * self.cfg.screen_fraction;
        for k in 0..reports.len() {
            let left = (screen_end - self.meter.spent_us).max(0.0);
            let rule = StopRule {
                max_cost_us: left / (reports.len() - k) as f64,
                ..self.cfg.screen
            };
            let setting = reports[k].setting.clone();
            let mut stop = AdaptiveStop::new(rule);
            let status = self.screen_one(
                st,
                &setting,
                &mut stop,
                &mut reports[k].algo_proto,
                screen_end,
            )?;
            reports[k].status = status;
        }

        // Confirm the best screened candidate; one that fails there (its
        // child processes, under a launcher) gives way to the next best.
        while let Some(k) = best_screened(reports) {
            let best = reports[k].clone();
            match self.confirm(st, best) {
                Err(Halt::CandidateFailed(reason)) => {
                    reports[k].status = CandidateStatus::Failed { reason };
                }
                other => return other,
            }
        }
        Ok(self.no_gain_from_screening(reports))
    }

    /// The winner's confirmation on fresh pairs: only these decide.
    fn confirm(&mut self, st: &mut BandState, best: CandidateReport) -> Result<Outcome, Halt> {
        let (interval, processes, ap) = self.figures.fresh_pairs(
            &mut self.meter,
            st,
            &best.setting,
            best.algo_proto,
            Phase::Confirm,
        )?;
        let Some(ratio) = interval else {
            return Ok(Outcome::NoGain {
                best: Some(best.setting),
                ratio: None,
            });
        };
        Ok(match self.cfg.gain.judge(&ratio) {
            Verdict::Gain => Outcome::Gain {
                cost: best.setting.cost(),
                setting: best.setting,
                ratio,
                busbw_gbps: None,
                algo_proto: ap,
                processes,
            },
            Verdict::NoGain | Verdict::Slower => Outcome::NoGain {
                best: Some(best.setting),
                ratio: Some(ratio),
            },
        })
    }

    /// Screens one candidate until its stop rule, the pruning test, the
    /// screening budget or an unsupported answer ends it.
    fn screen_one(
        &mut self,
        st: &mut BandState,
        setting: &Setting,
        stop: &mut AdaptiveStop,
        ap: &mut Option<AlgoProto>,
        screen_end: f64,
    ) -> Result<CandidateStatus, Halt> {
        loop {
            let (d, c) = match self
                .meter
                .pair(st, setting, stop.len(), Phase::Screen, screen_end)
            {
                Ok(pair) => pair,
                Err(Halt::Budget) => break,
                Err(Halt::Unsupported(reason)) => {
                    return Ok(CandidateStatus::Unsupported { reason })
                }
                Err(Halt::CandidateFailed(reason)) => {
                    return Ok(CandidateStatus::Failed { reason })
                }
                Err(e) => return Err(e),
            };
            *ap = c.algo_proto;
            let decision = stop.push_pair(d.time_us, c.time_us, d.cost_us + c.cost_us);
            if let Some(ratio) = stop.interval() {
                if stop.len() >= self.cfg.prune_after && ratio.lo > 1.0 {
                    return Ok(CandidateStatus::Pruned { ratio });
                }
            }
            if decision != Decision::Continue {
                break;
            }
        }
        Ok(match stop.interval() {
            Some(ratio) => CandidateStatus::Screened { ratio },
            None => CandidateStatus::NotMeasured,
        })
    }

    /// The verdict of a band its budget share ended in screening: no gain,
    /// naming the best screened candidate; or incomplete when no candidate
    /// got an interval at all (a "no gain" there would claim what was never
    /// measured: a 15 s search at 64 MiB on two emulated hosts ended so,
    /// every candidate unmeasured).
    fn no_gain_from_screening(&self, reports: &[CandidateReport]) -> Outcome {
        let measured = reports.iter().any(|r| {
            matches!(
                r.status,
                CandidateStatus::Screened { .. } | CandidateStatus::Pruned { .. }
            )
        });
        if !measured {
            return Outcome::Incomplete;
        }
        let best = reports
            .iter()
            .filter_map(|r| match &r.status {
                CandidateStatus::Screened { ratio } => Some((r, ratio.estimate)),
                _ => None,
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(r, _)| r.setting.clone());
        Outcome::NoGain { best, ratio: None }
    }
}

/// The screened candidate with the lowest estimated ratio below 1.
fn best_screened(reports: &[CandidateReport]) -> Option<usize> {
    reports
        .iter()
        .enumerate()
        .filter_map(|(k, r)| match &r.status {
            CandidateStatus::Screened { ratio } if ratio.estimate < 1.0 => {
                Some((k, ratio.estimate))
            }
            _ => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k)
}

fn geo_mean(logs: &[f64]) -> Option<f64> {
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// busbw (GB/s) in band `b` of a setting taking `ratio` times the
/// default's time there (None when the default got no time).
fn band_busbw(b: &BandReport, ratio: f64, world_size: usize) -> Option<f64> {
    b.default_time_us
        .map(|t| busbw_gbps(b.band.op, b.band.probe_bytes, world_size, t * ratio))
}

/// busbw (GB/s) of `op` at `bytes` (nccl-tests' size, 4-byte elements)
/// taking `time_us` per iteration, as nccl-tests computes it.
pub fn busbw_gbps(op: Collective, bytes: u64, world_size: usize, time_us: f64) -> f64 {
    let counts = op.counts(bytes, 4, world_size);
    op.algbw_gbps(&counts, 4, world_size, time_us * 1e-6) * op.busbw_factor(world_size)
}
