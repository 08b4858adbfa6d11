//! The process-wide phase: after every band, the one setting the shell
//! lines set for a whole process, measured again on fresh pairs in each
//! band it did not win ([`crate::report::ProcessWide`]).

use super::fresh::Fresh;
use super::{band_busbw, BandState, Calibration, Halt, Phase, Search};
use crate::report::{
    BandReport, CandidateStatus, End, Outcome, ProcessWide, ProcessWideBand, ProcessWideFigure,
    Replaced,
};
use crate::setting::Setting;
use crate::stats::Verdict;

/// Makes the process-wide setting the winner of each band where its
/// fresh figure beat the band's own pick ([`Replaced`]): a gain whose
/// whole interval lies below the pick's estimate of the time ratio, or a
/// gain where the band had none. The band's pick came from one screening
/// process per candidate, and one that was lucky there can be confirmed at
/// far less: on two emulated hosts, all_gather 64M's pick (1x4) was
/// confirmed at +46.2% [+11.1, +92.5] while 2x2, the shell lines' setting,
/// measured +130.3% [+90.7, +178.3] in the same band, and the table named
/// the pick (bench/results/tune.md).
pub(super) fn promote(bands: &mut [BandReport], pw: &ProcessWide, world_size: usize) {
    for x in &pw.bands {
        let ProcessWideFigure::Confirmed {
            ratio,
            verdict: Verdict::Gain,
            processes,
        } = &x.figure
        else {
            continue;
        };
        let Some(b) = bands.iter_mut().find(|b| b.band == x.band) else {
            continue;
        };
        let replaced = match &b.outcome {
            Outcome::Gain {
                setting,
                ratio: pick,
                ..
            } if ratio.hi < pick.estimate => Replaced {
                setting: Some(setting.clone()),
                ratio: Some(*pick),
                was_gain: true,
            },
            Outcome::Gain { .. } => continue,
            // Its own confirmation there said no gain: a second one that
            // says gain is no reason to believe the better of the two.
            Outcome::NoGain {
                best: Some(best),
                ratio: Some(_),
            } if best == &pw.setting => continue,
            Outcome::NoGain { best, ratio: pick } => Replaced {
                setting: best.clone(),
                ratio: *pick,
                was_gain: false,
            },
            Outcome::Incomplete => Replaced {
                setting: None,
                ratio: None,
                was_gain: false,
            },
        };
        b.outcome = Outcome::Gain {
            setting: pw.setting.clone(),
            ratio: *ratio,
            busbw_gbps: band_busbw(b, ratio.estimate, world_size),
            cost: pw.setting.cost(),
            algo_proto: None,
            processes: *processes,
        };
        b.replaced = Some(replaced);
    }
}

impl Search<'_> {
    /// Measures `setting`, the one the shell lines set for every band, in
    /// each band it did not win, on fresh pairs with the confirmation's
    /// stop rule (over fresh process pairs, as a confirmation), bands
    /// smallest probe first, each an equal share of the budget left. Its screening figure there came from fewer pairs, and
    /// on two emulated hosts such figures came back at 66-104% of what
    /// they said (bench/results/tune.md): a line that claims a gain for a
    /// whole process must rest on a confirmation in every band.
    pub(super) fn process_wide(
        &mut self,
        setting: Setting,
        bands: &[BandReport],
        calibrations: &[Calibration],
        order: &[usize],
    ) -> (ProcessWide, Option<End>) {
        let started = self.meter.spent_us;
        let lost: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| bands[i].gain().map(|g| g.0) != Some(&setting))
            .collect();
        let mut figures: Vec<Option<ProcessWideFigure>> = vec![None; bands.len()];
        let mut end = None;
        for (k, &i) in lost.iter().enumerate() {
            let b = &bands[i];
            let prior = b.candidates.iter().find(|c| c.setting == setting);
            let figure = match prior.map(|c| &c.status) {
                Some(CandidateStatus::Unsupported { reason }) => ProcessWideFigure::Unsupported {
                    reason: reason.clone(),
                },
                Some(CandidateStatus::Failed { reason }) => ProcessWideFigure::Failed {
                    reason: reason.clone(),
                },
                _ => {
                    let share = (self.cfg.budget_us - self.meter.spent_us).max(0.0)
                        / (lost.len() - k) as f64;
                    let mut st = BandState::new(
                        &b.band,
                        (k, lost.len()),
                        self.meter.spent_us,
                        share,
                        calibrations[i],
                    );
                    match self.fresh_wide(&mut st, &setting) {
                        Ok((Some(ratio), processes, _)) => ProcessWideFigure::Confirmed {
                            verdict: self.cfg.gain.judge(&ratio),
                            ratio,
                            processes,
                        },
                        Ok((None, ..)) => ProcessWideFigure::NotMeasured,
                        Err(Halt::Unsupported(reason)) => ProcessWideFigure::Unsupported { reason },
                        Err(Halt::CandidateFailed(reason)) => ProcessWideFigure::Failed { reason },
                        Err(Halt::Budget) => ProcessWideFigure::NotMeasured,
                        Err(Halt::Stop) => {
                            end = Some(End::Interrupted);
                            break;
                        }
                        Err(Halt::Failed(e)) => {
                            end = Some(End::Failed(e));
                            break;
                        }
                    }
                }
            };
            figures[i] = Some(figure);
        }
        let out = bands
            .iter()
            .zip(figures)
            .filter_map(|(b, f)| {
                f.map(|figure| ProcessWideBand {
                    band: b.band,
                    figure,
                })
            })
            .collect();
        let pw = ProcessWide {
            setting,
            bands: out,
            spent_us: self.meter.spent_us - started,
            refine_spent_us: 0.0,
        };
        (pw, end)
    }

    /// The process-wide setting's fresh pairs in one band it did not win.
    fn fresh_wide(&mut self, st: &mut BandState, setting: &Setting) -> Result<Fresh, Halt> {
        let phase = Phase::ProcessWide;
        self.figures
            .fresh_pairs(&mut self.meter, st, setting, None, phase)
    }
}
