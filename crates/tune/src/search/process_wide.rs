//! The process-wide phase: after every band, the one setting the shell
//! lines set for a whole process, measured again on fresh pairs in each
//! band it did not win ([`crate::report::ProcessWide`]).

use super::{BandState, Calibration, Halt, Phase, Search};
use crate::report::{
    BandReport, CandidateStatus, End, ProcessWide, ProcessWideBand, ProcessWideFigure,
};
use crate::setting::Setting;

impl Search<'_> {
    /// Measures `setting`, the one the shell lines set for every band, in
    /// each band it did not win, on fresh pairs with the confirmation's
    /// stop rule (over fresh process pairs, as a confirmation), bands smallest probe first, each an equal share of the
    /// budget left. Its screening figure there came from fewer pairs, and
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
        let started = self.spent_us;
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
                    let share =
                        (self.cfg.budget_us - self.spent_us).max(0.0) / (lost.len() - k) as f64;
                    let mut st = BandState::new(
                        &b.band,
                        (k, lost.len()),
                        self.spent_us,
                        share,
                        calibrations[i],
                    );
                    match self.fresh_pairs(&mut st, &setting, None, Phase::ProcessWide) {
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
            spent_us: self.spent_us - started,
        };
        (pw, end)
    }
}
