//! The search's configuration ([`TuneConfig`]) and the `--budget` syntax
//! users write it in.

use crate::space::CandidateSpace;
use crate::stats::{GainRule, StopRule};
use collbench_core::Collective;

/// Everything the search needs besides the measurer.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneConfig {
    /// Ops to tune, in order.
    pub ops: Vec<Collective>,
    /// Probe sizes (the `-b/-e/-f` sweep); bands are built around them.
    pub sizes: Vec<u64>,
    /// Ranks in the communicator.
    pub world_size: usize,
    /// Nodes.
    pub n_nodes: usize,
    /// Wall time the measurements may cost (us).
    pub budget_us: f64,
    /// Forbid candidates that fix more channels than this.
    pub max_channels: Option<u32>,
    /// Which candidates to try.
    pub space: CandidateSpace,
    /// Stop rule of a candidate's screening pairs.
    pub screen: StopRule,
    /// Stop rule of the winner's confirmation pairs.
    pub confirm: StopRule,
    /// Fresh process pairs a confirmation of a setting measured in
    /// processes of its own (an environment candidate) is spread over,
    /// each with an equal share of its pairs ([`crate::Measurer::renew`]); its
    /// interval is then [`crate::stats::across_processes`]'s.
    pub confirm_processes: u32,
    /// The gain rule.
    pub gain: GainRule,
    /// Prune a candidate once this many pairs put it surely slower.
    pub prune_after: u32,
    /// Share of a band's budget for screening (the rest confirms).
    pub screen_fraction: f64,
    /// Share of the whole budget kept, when there are several bands, for
    /// measuring the process-wide setting in the bands it did not win
    /// ([`crate::report::ProcessWide`]); what that phase leaves goes to the
    /// refinement.
    pub process_wide_fraction: f64,
    /// The refinement: with budget left after the process-wide phase, the
    /// process-wide setting's figures measured over fresh process pairs
    /// get more such pairs, the widest interval first, up to this many
    /// pairs each (at most `confirm_processes`: none added).
    pub refine_processes: u32,
    /// ... until each interval's half width (of the log time ratio) is at
    /// most this.
    pub refine_half_width: f64,
    /// Aim each repeat at about this long (us): iterations per repeat come
    /// from one calibration repeat of the default.
    pub target_repeat_us: f64,
    /// Iterations per repeat at most.
    pub max_iters: u32,
}

impl TuneConfig {
    /// Defaults: screening to ±3% (3 to 10 pairs), confirmation to ±1%
    /// (5 to 40 pairs; an environment candidate's over 4 fresh process
    /// pairs: with 3, Student's quantile at 2 degrees of freedom, 4.3,
    /// left a setting whose processes ran 0.45x to 0.85x the default's
    /// time short of a sure gain), 2% gain rule, repeats of about 5 ms;
    /// the refinement up to 16 process pairs or ±2.5% (with 16, Student's
    /// quantile is 2.13 against 3.18 with 4, and the standard error half:
    /// a third of the interval; ±2.5% of the time ratio is ±5% of a
    /// doubled busbw).
    pub fn new(
        ops: Vec<Collective>,
        sizes: Vec<u64>,
        world_size: usize,
        n_nodes: usize,
        budget_us: f64,
    ) -> TuneConfig {
        TuneConfig {
            ops,
            sizes,
            world_size,
            n_nodes,
            budget_us,
            max_channels: None,
            space: CandidateSpace::default(),
            screen: StopRule {
                rel_half_width: 0.03,
                min_samples: 3,
                max_samples: 10,
                ..StopRule::default()
            },
            confirm: StopRule::default(),
            confirm_processes: 4,
            gain: GainRule::default(),
            prune_after: 3,
            screen_fraction: 0.6,
            process_wide_fraction: 0.2,
            refine_processes: 16,
            refine_half_width: 0.025,
            target_repeat_us: 5_000.0,
            max_iters: 1000,
        }
    }
}

/// A `--budget` value the user typed is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--budget '{0}' is not a duration from 1 microsecond to 7 days: write a number with s, m or h (e.g. 90s, 10m, 1h)")]
pub struct BudgetError(pub String);

/// The longest `--budget`: a week. Longer is a typo (a budget of
/// 2^64 seconds once panicked turning it into a `Duration`).
pub(crate) const MAX_BUDGET_S: f64 = 7.0 * 24.0 * 3600.0;

/// Parses `--budget`: a positive number with `s`, `m` or `h` (a bare
/// number is seconds) up to 7 days, into microseconds.
pub fn parse_budget(s: &str) -> Result<f64, BudgetError> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        _ => return Err(BudgetError(s.to_string())),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= MAX_BUDGET_S => Ok(v * scale * 1e6),
        _ => Err(BudgetError(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_as_users_write_them() {
        assert_eq!(parse_budget("10m"), Ok(600e6));
        assert_eq!(parse_budget("90s"), Ok(90e6));
        assert_eq!(parse_budget("1.5h"), Ok(5400e6));
        assert_eq!(parse_budget("45"), Ok(45e6));
        for bad in [
            "",
            "m",
            "0m",
            "-1s",
            "10x",
            "ten",
            "169h",
            "18446744073709551615",
            "inf",
            "NaN",
        ] {
            let e = parse_budget(bad).unwrap_err().to_string();
            assert!(e.starts_with("--budget") && e.contains("e.g. 90s"), "{e}");
        }
    }
}
