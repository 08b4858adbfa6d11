//! What a search found, as data (serde: this is the JSON output). The text,
//! Markdown, shell and CSV writers all read these types.

use crate::setting::{AlgoProto, Cost, Setting};
use crate::space::Band;
use crate::stats::{GainRule, Interval, Verdict};
use serde::{Deserialize, Serialize};

/// The whole search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// Ranks in the communicator (`nRanks` for the tuner CSV).
    pub world_size: usize,
    /// Nodes (`nNodes` for the tuner CSV).
    pub n_nodes: usize,
    /// The budget (us of wall time).
    pub budget_us: f64,
    /// What the measurements cost (us of wall time).
    pub spent_us: f64,
    /// The channel limit, if any.
    pub max_channels: Option<u32>,
    /// The rule every verdict used.
    pub gain_rule: GainRule,
    /// How the search ended.
    pub end: End,
    /// One entry per band measured (in order; an interrupted search has
    /// fewer than it planned, the last one possibly incomplete).
    pub bands: Vec<BandReport>,
    /// The one setting the `--shell` lines set for every band, measured
    /// again in the bands it did not win; absent when no setting an
    /// environment can set won a band, or the search did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_wide: Option<ProcessWide>,
}

/// The setting `--shell` sets for the whole process ([`process_wide_choice`])
/// and what it does in the bands another setting won (or none did): an
/// environment applies to every op and size, so each of its figures there
/// is measured on fresh interleaved pairs, as a winner's confirmation is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessWide {
    pub setting: Setting,
    /// One entry per band the setting did not win, in the report's order.
    pub bands: Vec<ProcessWideBand>,
    /// What these measurements cost (us).
    pub spent_us: f64,
    /// What the refinement cost (us): more fresh process pairs for this
    /// setting's figures, in the bands it won and in these, with the
    /// budget the search had left.
    #[serde(default)]
    pub refine_spent_us: f64,
}

/// The process-wide setting in one band it did not win.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessWideBand {
    pub band: Band,
    pub figure: ProcessWideFigure,
}

/// What the process-wide setting measured in a band it did not win.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ProcessWideFigure {
    /// Fresh interleaved pairs against the default: the interval of the
    /// time ratio setting/default and the gain rule's verdict on it.
    Confirmed {
        ratio: Interval,
        verdict: Verdict,
        /// Process pairs the pairs were spread over (see
        /// [`Outcome::Gain`]'s `processes`).
        #[serde(default = "one")]
        processes: u32,
    },
    /// No pair fitted what was left of the budget.
    NotMeasured,
    /// The measurer cannot run it in this band.
    Unsupported { reason: String },
    /// Its measurement failed there (its child processes).
    Failed { reason: String },
}

/// A setting that won bands: which, and its total gain (the sum over
/// those bands of -ln(time ratio), the larger the better).
#[derive(Debug, Clone, PartialEq)]
pub struct Win<'a> {
    pub setting: &'a Setting,
    pub bands: Vec<&'a BandReport>,
    pub log_gain: f64,
}

/// The settings that won bands, most bands first (ties: the larger total
/// gain first).
pub fn winners(bands: &[BandReport]) -> Vec<Win<'_>> {
    let mut wins: Vec<Win> = Vec::new();
    for b in bands {
        if let Some((s, ratio)) = b.gain() {
            match wins.iter_mut().find(|w| w.setting == s) {
                Some(w) => {
                    w.bands.push(b);
                    w.log_gain -= ratio.estimate.ln();
                }
                None => wins.push(Win {
                    setting: s,
                    bands: vec![b],
                    log_gain: -ratio.estimate.ln(),
                }),
            }
        }
    }
    wins.sort_by(|a, b| {
        b.bands
            .len()
            .cmp(&a.bands.len())
            .then(b.log_gain.total_cmp(&a.log_gain))
    });
    wins
}

/// The one setting the `--shell` lines set for a whole process: of the
/// winners an environment can set, the first of [`winners`].
pub fn process_wide_choice(bands: &[BandReport]) -> Option<&Setting> {
    winners(bands)
        .into_iter()
        .map(|w| w.setting)
        .find(|s| s.set_by_environment())
}

/// A report written before process pairs were counted measured in one.
fn one() -> u32 {
    1
}

/// How the search ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum End {
    /// Every band searched.
    Complete,
    /// Stopped by the user (Ctrl-C); the bands so far are kept.
    Interrupted,
    /// A measurement failed; the bands so far are kept.
    Failed(String),
}

/// One op and size band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandReport {
    pub band: Band,
    /// Iterations per repeat (from the calibration).
    pub iters: u32,
    /// Default time per iteration at the probe size (geometric mean of the
    /// band's default repeats, us).
    pub default_time_us: Option<f64>,
    /// Default busbw at the probe size (GB/s).
    pub default_busbw_gbps: Option<f64>,
    /// What NCCL ran by default, where the measurer could tell.
    pub default_algo_proto: Option<AlgoProto>,
    /// The verdict for the band.
    pub outcome: Outcome,
    /// Every candidate considered and what became of it.
    pub candidates: Vec<CandidateReport>,
    /// Candidates never measured because they need more channels than
    /// `--max-channels`.
    pub forbidden: Vec<Setting>,
    /// What the band's measurements cost (us).
    pub spent_us: f64,
    /// The band's own pick, when the process-wide setting replaced it as
    /// the band's winner (`outcome` is then that setting's figure from
    /// the process-wide phase): see [`Replaced`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Replaced>,
}

/// A band's own pick that gave way to the process-wide setting: measured
/// on fresh pairs in the band after the band was done, that setting was a
/// gain over its whole interval faster than the pick's estimate (or a
/// gain where the band had none). Both figures come from fresh pairs
/// measured after the picks, so neither carries the luck that made a
/// screening pick; the whole interval, so noise between two near-equal
/// settings swaps nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replaced {
    /// The band's confirmed pick (none when it screened no candidate).
    pub setting: Option<Setting>,
    /// Its confirmation's interval, if it got one.
    pub ratio: Option<Interval>,
    /// Whether the pick itself was a gain.
    pub was_gain: bool,
}

/// The band's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// The best candidate passed the gain rule on fresh pairs.
    Gain {
        setting: Setting,
        /// Interval of the time ratio candidate/default (confirmation pairs).
        ratio: Interval,
        /// busbw with the setting (default busbw / ratio, GB/s).
        busbw_gbps: Option<f64>,
        cost: Cost,
        /// What NCCL ran with the setting, where the measurer could tell.
        algo_proto: Option<AlgoProto>,
        /// How many process pairs (a fresh candidate process and a fresh
        /// default partner each) the confirmation's pairs were spread over:
        /// 1 for a setting measured in this process. With more than one,
        /// `ratio` is [`crate::stats::across_processes`]'s interval, which
        /// carries the spread from one process to the next.
        #[serde(default = "one")]
        processes: u32,
    },
    /// Nothing passed the gain rule. `best` is the candidate that came
    /// closest (and its confirmation interval, if it got one).
    NoGain {
        best: Option<Setting>,
        ratio: Option<Interval>,
    },
    /// The search stopped in this band before a verdict.
    Incomplete,
}

/// One candidate in one band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateReport {
    pub setting: Setting,
    pub status: CandidateStatus,
    /// What NCCL ran with the setting, where the measurer could tell.
    pub algo_proto: Option<AlgoProto>,
}

/// What became of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CandidateStatus {
    /// Screened to the end: interval of the time ratio candidate/default.
    Screened { ratio: Interval },
    /// Dropped early: its interval lay wholly above 1 (surely slower).
    Pruned { ratio: Interval },
    /// The measurer cannot run it here.
    Unsupported { reason: String },
    /// Its measurement failed where only it was at fault (its child
    /// processes died, hung or disagreed on some host); the search went on.
    Failed { reason: String },
    /// No budget (or time) was left to measure it.
    NotMeasured,
}

impl BandReport {
    /// The gain, if the band has one: (setting, ratio interval).
    pub fn gain(&self) -> Option<(&Setting, &Interval)> {
        match &self.outcome {
            Outcome::Gain { setting, ratio, .. } => Some((setting, ratio)),
            _ => None,
        }
    }
}
