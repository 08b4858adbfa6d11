//! The refinement: what the budget has left after the process-wide phase
//! goes to more fresh process pairs for the setting the `--shell` lines
//! set, so that the gain those lines claim in each band is the one a
//! fresh process gets, as nearly as the budget allows.
//!
//! Why: where processes differ, a figure from 4 fresh process pairs is
//! known to about ±25% of its gain. On two emulated hosts the defaults'
//! busbw moved by up to ±27% from one process to the next; one 10-minute
//! search claimed +101.1% for all_reduce 512M and three reproductions of
//! 3 rounds each came back at 104-152% of it, while the same search's
//! all_gather claims came back at 75-89% (bench/results/tune.md). The
//! search had left 232 s of its 595 s unspent.

use super::fresh::{Figures, Kept};
use super::meter::Meter;
use super::{band_busbw, BandState, Halt, Phase, TuneConfig};
use crate::report::{BandReport, End, Outcome, ProcessWide, ProcessWideFigure};
use crate::setting::Setting;
use crate::stats::{across_processes, Interval, Verdict};

impl Figures {
    /// Adds fresh process pairs, one at a time, to `setting`'s figures
    /// (those measured over two process pairs or more, in the bands it won
    /// and in the process-wide phase), always to the one whose interval is
    /// widest, until each is within `refine_half_width`, has
    /// `refine_processes` pairs, or no longer fits the budget. A figure
    /// whose child processes fail, or whose pairs no longer fit, takes no
    /// more. Returns how the search ends if a stop or a failed
    /// measurement ended it here.
    pub(super) fn refine(&mut self, meter: &mut Meter, setting: &Setting) -> Option<End> {
        let mut closed = vec![false; self.kept.len()];
        let ours: Vec<usize> = (0..self.kept.len())
            .filter(|&i| &self.kept[i].setting == setting)
            .collect();
        while let Some(i) = self.widest(meter.cfg, &ours, &closed) {
            let Kept {
                band, calibration, ..
            } = self.kept[i];
            let position = ours.iter().position(|&k| k == i).unwrap_or(0);
            let budget_left = (meter.cfg.budget_us - meter.spent_us).max(0.0);
            let mut st = BandState::new(
                &band,
                (position, ours.len()),
                meter.spent_us,
                budget_left,
                calibration,
            );
            let measured = match meter.renew(&st, setting) {
                Ok(true) => {
                    let pairs = self.kept[i].processes.len() as u32;
                    meter.process_pair = Some((pairs + 1, meter.cfg.refine_processes));
                    let mut ap = None;
                    meter
                        .one_process_pair(&mut st, setting, Phase::Refine, budget_left, &mut ap)
                        .map(Some)
                }
                // No processes of its own after all: none to add.
                Ok(false) => Ok(None),
                Err(e) => Err(e),
            };
            meter.process_pair = None;
            match measured {
                Ok(Some(logs)) if !logs.is_empty() => self.kept[i].processes.push(logs),
                Ok(_) | Err(Halt::Budget | Halt::CandidateFailed(_) | Halt::Unsupported(_)) => {
                    closed[i] = true;
                }
                Err(Halt::Stop) => return Some(End::Interrupted),
                Err(Halt::Failed(e)) => return Some(End::Failed(e)),
            }
        }
        None
    }

    /// Of `ours`, the open figure with the widest interval (half its log
    /// width) still above the target and under the process-pair cap.
    fn widest(&self, cfg: &TuneConfig, ours: &[usize], closed: &[bool]) -> Option<usize> {
        let confidence = cfg.confirm.confidence;
        ours.iter()
            .copied()
            .filter(|&i| !closed[i])
            .filter(|&i| (self.kept[i].processes.len() as u32) < cfg.refine_processes)
            .filter_map(|i| {
                let r = across_processes(&self.kept[i].processes, confidence)?;
                let half = (r.hi / r.lo).ln() / 2.0;
                (half > cfg.refine_half_width).then_some((i, half))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Writes `setting`'s refined figures into the bands it won and into
    /// the process-wide phase's bands, each judged again by the gain rule:
    /// a band's gain that more process pairs no longer call sure becomes
    /// "no gain", naming the setting and its interval.
    pub(super) fn apply_refined(
        &self,
        cfg: &TuneConfig,
        setting: &Setting,
        bands: &mut [BandReport],
        pw: &mut ProcessWide,
    ) {
        let confidence = cfg.confirm.confidence;
        for k in self.kept.iter().filter(|k| &k.setting == setting) {
            let Some(ratio) = across_processes(&k.processes, confidence) else {
                continue;
            };
            let processes = k.processes.iter().filter(|s| !s.is_empty()).count() as u32;
            let verdict = cfg.gain.judge(&ratio);
            if let Some(b) = bands.iter_mut().find(|b| b.band == k.band) {
                if b.gain().is_some_and(|(s, _)| s == setting) {
                    regain(b, ratio, processes, verdict, cfg.world_size);
                }
            }
            if let Some(x) = pw.bands.iter_mut().find(|x| x.band == k.band) {
                if matches!(x.figure, ProcessWideFigure::Confirmed { .. }) {
                    x.figure = ProcessWideFigure::Confirmed {
                        ratio,
                        verdict,
                        processes,
                    };
                }
            }
        }
    }
}

/// A band's gain with its refined interval (or no gain, if the gain
/// rule no longer passes it).
fn regain(
    b: &mut BandReport,
    ratio: Interval,
    processes: u32,
    verdict: Verdict,
    world_size: usize,
) {
    let refined_busbw = band_busbw(b, ratio.estimate, world_size);
    let Outcome::Gain {
        setting,
        busbw_gbps: busbw,
        processes: count,
        ratio: old,
        ..
    } = &mut b.outcome
    else {
        return;
    };
    if verdict != Verdict::Gain {
        b.outcome = Outcome::NoGain {
            best: Some(setting.clone()),
            ratio: Some(ratio),
        };
        return;
    }
    *old = ratio;
    *count = processes;
    *busbw = refined_busbw;
}
