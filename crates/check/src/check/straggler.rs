//! The straggler `check` names from its battery alone (issue #53): every
//! battery case takes arrival figures, and a rank the runner named as a
//! straggler in most measured cases is the suspect, said before any pair
//! round. The pair tests then confirm it (their slow host holds its rank,
//! or their culprit is the rank) or clear it (they ran and named someone
//! else, or nobody).

use super::pairs::PairTests;
use crate::host_tests::HostReport;
use crate::hosts::Finding;
use crate::localize::Localization;
use collbench_core::arrival::{Straggler, StragglerKind};
use serde::Serialize;

/// What the pair tests said of the battery's suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairWord {
    /// They named its host (or itself).
    Confirmed,
    /// They spread too much to name any host, but its host scored lowest
    /// of all (the host-pair matrix agrees; the verdict cannot say).
    SlowestUnjudged,
    /// They ran and did not name it.
    Cleared,
    /// They did not run.
    NotTested,
}

/// The battery's straggler and the pair tests' word on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryStraggler {
    pub rank: u64,
    pub host: String,
    pub kind: StragglerKind,
    /// Battery cases that named it, of those measured with arrival figures.
    pub cases_named: usize,
    pub cases: usize,
    /// The largest median lateness over the cases that named it.
    pub lateness_us: f64,
    pub pairs: PairWord,
}

/// The rank named in more than half of the battery's cases measured with
/// arrival figures (`seen`: each one's straggler, or none), if one is.
pub(super) fn suspect(seen: &[Option<Straggler>]) -> Option<BatteryStraggler> {
    let named: Vec<&Straggler> = seen.iter().flatten().collect();
    let count = |rank: u64| named.iter().filter(|s| s.rank == rank).count();
    let rank = named.iter().map(|s| s.rank).max_by_key(|&r| count(r))?;
    let of_rank: Vec<&&Straggler> = named.iter().filter(|s| s.rank == rank).collect();
    if 2 * of_rank.len() <= seen.len() {
        return None;
    }
    let slow_link = of_rank
        .iter()
        .filter(|s| s.kind == StragglerKind::SlowLink)
        .count();
    Some(BatteryStraggler {
        rank,
        host: of_rank[0].host.clone(),
        kind: if 2 * slow_link > of_rank.len() {
            StragglerKind::SlowLink
        } else {
            StragglerKind::LateRank
        },
        cases_named: of_rank.len(),
        cases: seen.len(),
        lateness_us: of_rank.iter().map(|s| s.lateness_us).fold(0.0, f64::max),
        pairs: PairWord::NotTested,
    })
}

/// The pair tests' word on `suspect`: host pairs name a slow (or suspect)
/// host holding its rank; rank pairs name it as a culprit.
pub(super) fn pair_word(
    suspect: &BatteryStraggler,
    hosts: Option<&HostReport>,
    ranks: Option<&Localization>,
) -> PairWord {
    let rank = suspect.rank as usize;
    if let Some(h) = hosts {
        let holds = |i: usize| {
            h.hosts
                .get(i)
                .is_some_and(|host| host.ranks.contains(&rank))
        };
        if h.verdict
            .findings
            .iter()
            .filter_map(|f| f.host())
            .any(holds)
        {
            return PairWord::Confirmed;
        }
        let unjudged = h
            .verdict
            .findings
            .iter()
            .any(|f| matches!(f, Finding::Unjudgeable { .. }));
        let lowest = h
            .verdict
            .matrix
            .hosts
            .iter()
            .filter_map(|s| s.score.map(|v| (s.host, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(host, _)| host);
        return match (unjudged, lowest) {
            (true, Some(host)) if holds(host) => PairWord::SlowestUnjudged,
            _ => PairWord::Cleared,
        };
    }
    match ranks {
        Some(l) if l.culprits.iter().any(|c| c.rank == rank) => PairWord::Confirmed,
        Some(l) if l.bisection_rank == Some(rank) => PairWord::Confirmed,
        Some(_) => PairWord::Cleared,
        None => PairWord::NotTested,
    }
}

/// The battery's suspect, said on rank 0 right away: from the battery
/// alone, before any pair round.
pub(super) fn said(suspect: Option<BatteryStraggler>, root: bool) -> Option<BatteryStraggler> {
    if let (Some(s), true) = (&suspect, root) {
        collbench_core::diag::line(&battery_line(s));
    }
    suspect
}

/// The suspect with the pair tests' word on it, and its note.
pub(super) fn judged(
    suspect: Option<BatteryStraggler>,
    pairs: &PairTests,
    notes: &mut Vec<String>,
) -> Option<BatteryStraggler> {
    let mut s = suspect?;
    s.pairs = pair_word(&s, pairs.hosts.as_ref(), pairs.localization.as_ref());
    notes.push(note(&s));
    Some(s)
}

/// The line said right after the battery, before the pair rounds.
pub(super) fn battery_line(s: &BatteryStraggler) -> String {
    format!(
        "collbench check: straggler from the battery's arrival skew: rank {} (host {}), {}, last by {:.1} us in {} of {} cases",
        s.rank,
        s.host,
        s.kind.words(),
        s.lateness_us,
        s.cases_named,
        s.cases
    )
}

/// The note under the table: the suspect and the pair tests' word.
pub(super) fn note(s: &BatteryStraggler) -> String {
    let word = match s.pairs {
        PairWord::Confirmed => "the pair tests confirm it",
        PairWord::SlowestUnjudged => {
            "the pair tests agree: its host scores lowest (too noisy to name a host)"
        }
        PairWord::Cleared => "the pair tests clear it (they name nobody there)",
        PairWord::NotTested => "no pair test ran to confirm it",
    };
    format!(
        "straggler rank {} (host {}): {}, last by {:.1} us in {} of {} battery cases; {word}",
        s.rank,
        s.host,
        s.kind.words(),
        s.lateness_us,
        s.cases_named,
        s.cases
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(rank: u64, kind: StragglerKind) -> Straggler {
        Straggler {
            rank,
            host: format!("n{}", rank / 2),
            kind,
            late_iterations: 9,
            iterations: 10,
            lateness_us: 100.0 * rank as f64,
            before_us: 100.0 * rank as f64,
            inside_us: 0.0,
        }
    }

    #[test]
    fn a_rank_named_in_most_cases_is_the_suspect() {
        let late = named(5, StragglerKind::LateRank);
        let s = suspect(&[Some(late.clone()), Some(late), None]).expect("named in 2 of 3");
        assert_eq!(
            (s.rank, s.host.as_str(), s.cases_named, s.cases),
            (5, "n2", 2, 3)
        );
        assert_eq!(
            (s.kind, s.lateness_us, s.pairs),
            (StragglerKind::LateRank, 500.0, PairWord::NotTested)
        );
        assert!(note(&s).ends_with("in 2 of 3 battery cases; no pair test ran to confirm it"));
        assert!(battery_line(&s).contains("rank 5 (host n2), late rank"));
    }

    #[test]
    fn half_the_cases_or_split_votes_name_nobody() {
        assert_eq!(
            suspect(&[Some(named(1, StragglerKind::LateRank)), None]),
            None
        );
        let split = [1, 2, 3].map(|r| Some(named(r, StragglerKind::SlowLink)));
        assert_eq!(suspect(&split), None);
        assert_eq!(suspect(&[]), None);
    }

    #[test]
    fn rank_pairs_confirm_a_culprit_and_clear_anyone_else() {
        let s = suspect(&[Some(named(1, StragglerKind::SlowLink))]).unwrap();
        assert_eq!(s.kind, StragglerKind::SlowLink);
        let loc = |culprit: usize| Localization {
            method: String::new(),
            size_bytes: 0,
            fraction: 0.5,
            reference_gbps: 1.0,
            too_noisy: None,
            matrix: collbench_core::pairs::PairMatrix::new(Vec::new()),
            slow_pairs: Vec::new(),
            culprits: vec![crate::localize::Culprit {
                rank: culprit,
                host: "h".into(),
                slow_pairs: 1,
                measured_pairs: 1,
            }],
            slow_links: Vec::new(),
            bisection_rank: None,
        };
        assert_eq!(pair_word(&s, None, Some(&loc(1))), PairWord::Confirmed);
        assert_eq!(pair_word(&s, None, Some(&loc(0))), PairWord::Cleared);
        assert_eq!(pair_word(&s, None, None), PairWord::NotTested);
    }
}
