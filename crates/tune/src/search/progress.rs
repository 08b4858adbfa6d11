//! What the search tells its caller before each measurement.

use crate::setting::Setting;
use crate::space::Band;

/// The search's phase, for progress lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Calibrate,
    Screen,
    Confirm,
    /// The process-wide setting's fresh pairs in a band it did not win.
    ProcessWide,
    /// More fresh process pairs for the process-wide setting's figures.
    Refine,
}

/// One progress event, sent before each measurement.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    pub band: &'a Band,
    /// 0-based position of the band in the order the bands are measured
    /// (smallest probe first), among all bands of all ops; in
    /// [`Phase::ProcessWide`], among the bands that phase measures.
    pub band_index: usize,
    pub bands_total: usize,
    pub setting: &'a Setting,
    pub phase: Phase,
    /// In a confirmation spread over fresh process pairs: which one
    /// (1-based) of how many.
    pub process_pair: Option<(u32, u32)>,
    /// Budget spent and left (us).
    pub spent_us: f64,
    pub budget_left_us: f64,
}
