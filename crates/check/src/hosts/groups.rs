//! Host tests that follow the fabric: hosts in groups (a leaf switch, a
//! topology block, an NVLink clique), tested within their groups first,
//! then in rounds across group boundaries.
//!
//! 1. **Within.** Each group runs its own schedule
//!    ([`super::schedule()`]), all groups side by side; the verdict and its
//!    confirmation rounds (partners from the suspect's own group first)
//!    name the slow hosts.
//! 2. **Across.** Groups meet by the circle method (G-1 rounds for even
//!    G), each pair of groups matching their members one to one, the
//!    hosts found slow left out; small groups meet again until every
//!    pair of groups has [`JudgeConfig::link_tests`] tests.
//! 3. **Links between groups.** A pair of groups whose tests across sit,
//!    at their median, below the cut (under the typical pair between good
//!    hosts) is a slow link between the groups: each group passed alone,
//!    their join is slow, so the finding names the link, never a host.
//! 4. **Hosts again**, on every test but those across a slow group link,
//!    with confirmation rounds if anything new is suspect.

use super::confirm::judge_and_confirm;
use super::matrix::PairResult;
use super::noise::{median, Threshold};
use super::schedule::{schedule, Rng, Round, MAX_CONFIRMATION_ROUNDS};
use super::types::{Finding, HostVerdict, JudgeConfig};
use crate::verdict::Status;
use serde::Serialize;

/// Each host's fabric group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostGroups {
    /// The groups' names, in order of their first host.
    pub names: Vec<String>,
    /// Each host's group: an index into `names`.
    pub of_host: Vec<usize>,
}

impl HostGroups {
    /// Groups from each host's group name.
    pub fn from_names(group_of_host: &[String]) -> HostGroups {
        let mut names: Vec<String> = Vec::new();
        let of_host = group_of_host
            .iter()
            .map(|g| match names.iter().position(|n| n == g) {
                Some(i) => i,
                None => {
                    names.push(g.clone());
                    names.len() - 1
                }
            })
            .collect();
        HostGroups { names, of_host }
    }

    /// The hosts of group `g`, in host order.
    pub fn members(&self, g: usize) -> Vec<usize> {
        (0..self.of_host.len())
            .filter(|&h| self.of_host[h] == g)
            .collect()
    }
}

/// The rounds within groups: round r holds every group's round r.
pub fn within_rounds(groups: &HostGroups, seed: u64) -> Vec<Round> {
    let mut rounds: Vec<Round> = Vec::new();
    for g in 0..groups.names.len() {
        let members = groups.members(g);
        let own = schedule(members.len(), seed.wrapping_add(g as u64));
        for (r, round) in own.rounds.iter().enumerate() {
            if rounds.len() <= r {
                rounds.push(Round {
                    index: r,
                    pairs: Vec::new(),
                });
            }
            let global = |x: usize| members[x];
            rounds[r]
                .pairs
                .extend(round.pairs.iter().map(|&(a, b)| (global(a), global(b))));
        }
    }
    rounds
}

/// The rounds across groups, numbered from `first_index`: the circle
/// method over groups, each meeting matching members one to one (rotated
/// by a seeded offset, and by one more each time the same groups meet
/// again), hosts in `skip` left out, repeated until every pair of groups
/// has `min_tests` tests.
pub fn across_rounds(
    groups: &HostGroups,
    skip: &[usize],
    first_index: usize,
    seed: u64,
    min_tests: usize,
) -> Vec<Round> {
    let count = groups.names.len();
    let members: Vec<Vec<usize>> = (0..count)
        .map(|g| {
            let mut m = groups.members(g);
            m.retain(|h| !skip.contains(h));
            m
        })
        .collect();
    let smallest = members.iter().map(Vec::len).min().unwrap_or(0);
    if count < 2 || smallest == 0 {
        return Vec::new();
    }
    let repeats = min_tests.div_ceil(smallest).max(1);
    let meetings = group_meetings(count);
    let mut rng = Rng::new(seed ^ 0x0ac0_55e5);
    let mut rounds = Vec::new();
    for repeat in 0..repeats {
        for meeting in &meetings {
            let mut pairs = Vec::new();
            for &(ga, gb) in meeting {
                let (ma, mb) = (&members[ga], &members[gb]);
                let offset = rng.below(mb.len()) + repeat;
                for (i, &a) in ma.iter().enumerate().take(ma.len().min(mb.len())) {
                    let b = mb[(i + offset) % mb.len()];
                    pairs.push((a.min(b), a.max(b)));
                }
            }
            rounds.push(Round {
                index: first_index + rounds.len(),
                pairs,
            });
        }
    }
    rounds
}

/// Which groups meet in each round: the circle method over `count`
/// groups (one sits out each round when `count` is odd).
fn group_meetings(count: usize) -> Vec<Vec<(usize, usize)>> {
    let n = count + count % 2;
    (0..n - 1)
        .map(|r| {
            let slot = |i: usize| if i == 0 { 0 } else { 1 + (i - 1 + r) % (n - 1) };
            (0..n / 2)
                .map(|i| (slot(i), slot(n - 1 - i)))
                .filter(|&(a, b)| a < count && b < count)
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect()
        })
        .collect()
}

/// The slow links between groups in `across` (tests between groups):
/// pairs of groups whose median test, over the job median, is below the
/// cut under the typical pair between good hosts.
pub fn group_links(
    across: &[PairResult],
    groups: &HostGroups,
    verdict: &HostVerdict,
    cfg: &JudgeConfig,
) -> Vec<Finding> {
    let cut = match verdict.threshold {
        Some(Threshold::Judgeable { cut, .. } | Threshold::TooNoisy { cut, .. }) => cut,
        None => return Vec::new(),
    };
    let m = &verdict.matrix;
    if m.reference_gbps <= 0.0 {
        return Vec::new();
    }
    let good = |h: usize| {
        m.hosts
            .get(h)
            .and_then(|s| s.score)
            .is_some_and(|s| s >= cut)
    };
    let mut typical: Vec<f64> = m
        .pairs
        .iter()
        .filter(|p| good(p.a) && good(p.b) && groups.of_host[p.a] == groups.of_host[p.b])
        .map(|p| p.ratio)
        .collect();
    let link_cut = median(&mut typical) * cut;
    let count = groups.names.len();
    let mut out = Vec::new();
    for ga in 0..count {
        for gb in ga + 1..count {
            let mut ratios: Vec<f64> = across
                .iter()
                .filter(|r| {
                    let (x, y) = (groups.of_host[r.a], groups.of_host[r.b]);
                    (x.min(y), x.max(y)) == (ga, gb)
                })
                .map(|r| r.busbw_gbps / m.reference_gbps)
                .collect();
            let tests = ratios.len();
            let ratio = median(&mut ratios);
            if tests >= cfg.link_tests && ratio < link_cut {
                out.push(Finding::SlowGroupLink {
                    a: groups.names[ga].clone(),
                    b: groups.names[gb].clone(),
                    ratio,
                    tests,
                });
            }
        }
    }
    out
}

/// The whole grouped procedure (see the module doc): the verdict, with
/// the slow links between groups among its findings, and the number of
/// rounds run. `measure` runs one round, as for [`super::run`].
pub fn run_grouped<E>(
    cfg: &JudgeConfig,
    groups: &HostGroups,
    seed: u64,
    mut measure: impl FnMut(&Round) -> Result<Vec<PairResult>, E>,
) -> Result<(HostVerdict, usize), E> {
    let within = within_rounds(groups, seed);
    let cfg = JudgeConfig {
        main_rounds: Some(within.len()),
        group_of: Some(groups.of_host.clone()),
        ..cfg.clone()
    };
    let mut results = Vec::new();
    for round in &within {
        results.extend(measure(round)?);
    }
    let mut rounds = within.len();
    let last = rounds + MAX_CONFIRMATION_ROUNDS;
    let first = judge_and_confirm(&cfg, &mut results, &mut rounds, last, &mut measure)?;
    // Hosts named or still suspect would slow every test across.
    let skip: Vec<usize> = first.findings.iter().filter_map(Finding::host).collect();
    let mut across = Vec::new();
    for round in across_rounds(groups, &skip, rounds, seed, cfg.link_tests) {
        across.extend(measure(&round)?);
        rounds += 1;
    }
    let links = group_links(&across, groups, &first, &cfg);
    let slow_between = |r: &PairResult| {
        let (x, y) = (groups.of_host[r.a], groups.of_host[r.b]);
        links.iter().any(|f| {
            matches!(f, Finding::SlowGroupLink { a, b, .. }
                if (a == &groups.names[x.min(y)] && b == &groups.names[x.max(y)]))
        })
    };
    results.extend(across.iter().filter(|r| !slow_between(r)).copied());
    let last = rounds + MAX_CONFIRMATION_ROUNDS;
    let mut verdict = judge_and_confirm(&cfg, &mut results, &mut rounds, last, &mut measure)?;
    for f in links {
        verdict.status = verdict.status.max(f.status(cfg.fractions));
        verdict.findings.push(f);
    }
    verdict.status = verdict.status.max(Status::Pass);
    Ok((verdict, rounds))
}

#[cfg(test)]
mod tests;
