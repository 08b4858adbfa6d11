//! A process that falls silent while the job sets up (NCCL creating its
//! communicators, before any collective): no progress word covers that
//! time, so the stuck-collective rule ([`crate::stuck`]) never looks, and
//! only the control plane's `--timeout-s` (60 s by default) used to name
//! it. Heartbeats flow from their own thread however long a setup takes,
//! so a rank unheard for the watchdog's deadline is stopped, hung whole or
//! cut off, not slow.

use crate::progress::{Heard, RankProgress};
use crate::stuck::who;
use std::time::Duration;

/// The line for the ranks of `table` silent for `deadline` or longer, e.g.
/// `rank 1 (host n2) silent for 6 s while the job was setting up (stopped,
/// hung or cut off)`; `None` while every one is heard.
pub fn silent_during_setup(table: &[RankProgress], deadline: Duration) -> Option<String> {
    let silent: Vec<(&RankProgress, Duration)> = table
        .iter()
        .filter_map(|r| match r.heard {
            Heard::Silent(d) if d >= deadline => Some((r, d)),
            _ => None,
        })
        .collect();
    let longest = silent.iter().map(|(_, d)| *d).max()?;
    let ranks: Vec<(usize, &str)> = silent
        .iter()
        .map(|(r, _)| (r.rank, r.host.as_str()))
        .collect();
    Some(format!(
        "{} silent for {:.0} s while the job was setting up (stopped, hung or cut off)",
        who(&ranks),
        longest.as_secs_f64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: usize, heard: Heard) -> RankProgress {
        RankProgress {
            rank,
            host: format!("n{}", rank / 2),
            progress: None,
            unchanged_for: Duration::from_secs(30),
            heard,
        }
    }

    #[test]
    fn a_rank_silent_for_the_deadline_is_named_with_its_host() {
        let table = [
            rank(0, Heard::InTime),
            rank(1, Heard::Silent(Duration::from_secs(6))),
            rank(2, Heard::Late),
        ];
        assert_eq!(
            silent_during_setup(&table, Duration::from_secs(5)).as_deref(),
            Some("rank 1 (host n0) silent for 6 s while the job was setting up (stopped, hung or cut off)")
        );
    }

    #[test]
    fn slow_or_late_ranks_and_short_silences_name_no_one() {
        let table = [
            rank(0, Heard::InTime),
            rank(1, Heard::Late),
            rank(2, Heard::Silent(Duration::from_secs(3))),
        ];
        assert_eq!(silent_during_setup(&table, Duration::from_secs(5)), None);
    }
}
