//! Which host pairs are tested, round by round. All pairs of a round are
//! disjoint, so they run at once and a round costs one pair test.
//!
//! Small worlds (up to [`SMALL_WORLD`] hosts) meet every other host: a
//! round-robin by the circle method, H-1 rounds for even H, H for odd H
//! (one host sits out each round, each exactly once). Large worlds get
//! ceil(log2 H) rounds of random disjoint pairings, seeded so that every
//! process computes the same schedule, with no pair drawn twice. After
//! the verdict, [`CONFIRMATION_ROUNDS`] rounds (rarely up to
//! [`MAX_CONFIRMATION_ROUNDS`]) pair each suspect host with fresh hosts
//! judged good and measure each suspect link again.

use super::types::{Finding, HostVerdict, JudgeConfig};
use serde::Serialize;

/// Worlds up to this many hosts get every pair (at most 15 or 16 rounds).
pub const SMALL_WORLD: usize = 16;

/// Rounds after the main schedule that confirm suspects, as a rule: a
/// link is named after three tests (one in the main rounds, two repeats).
pub const CONFIRMATION_ROUNDS: usize = 2;

/// The most confirmation rounds: suspects that share a host need more
/// than [`CONFIRMATION_ROUNDS`], since a host tests one pair at a time.
pub const MAX_CONFIRMATION_ROUNDS: usize = 6;

/// One round: disjoint host pairs that run at the same time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Round {
    /// Position in the whole run (main rounds first, then confirmation).
    pub index: usize,
    /// Host pairs (a < b), no host twice.
    pub pairs: Vec<(usize, usize)>,
}

impl Round {
    /// Hosts of `hosts` that test nothing in this round.
    pub fn idle(&self, hosts: usize) -> Vec<usize> {
        let mut busy = vec![false; hosts];
        for &(a, b) in &self.pairs {
            busy[a] = true;
            busy[b] = true;
        }
        (0..hosts).filter(|&h| !busy[h]).collect()
    }
}

/// How the main rounds were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Every pair once (small worlds).
    RoundRobin,
    /// ceil(log2 H) rounds of random disjoint pairings (large worlds).
    RandomPairings,
}

/// The main rounds for a job of `hosts` hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    pub hosts: usize,
    pub seed: u64,
    pub method: Method,
    pub rounds: Vec<Round>,
}

/// Number of main rounds for `hosts` hosts (see the module doc).
pub fn main_rounds(hosts: usize) -> usize {
    match hosts {
        0 | 1 => 0,
        h if h <= SMALL_WORLD => h - 1 + h % 2,
        h => h.next_power_of_two().trailing_zeros() as usize,
    }
}

/// The most rounds a whole run takes: main plus confirmation rounds.
pub fn max_rounds(hosts: usize) -> usize {
    main_rounds(hosts) + MAX_CONFIRMATION_ROUNDS
}

/// The main schedule for `hosts` hosts; the same for the same seed.
pub fn schedule(hosts: usize, seed: u64) -> Schedule {
    let (method, rounds) = if hosts <= SMALL_WORLD {
        (Method::RoundRobin, round_robin(hosts))
    } else {
        (Method::RandomPairings, random_pairings(hosts, seed))
    };
    Schedule {
        hosts,
        seed,
        method,
        rounds,
    }
}

fn ordered(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

/// Circle method: slot 0 stays, the others turn one place per round; slot
/// i meets slot n-1-i. For odd H a dummy host makes n even, and whoever
/// meets it sits out.
fn round_robin(hosts: usize) -> Vec<Round> {
    if hosts < 2 {
        return Vec::new();
    }
    let n = hosts + hosts % 2;
    let dummy = hosts; // only exists when hosts is odd
    (0..n - 1)
        .map(|r| {
            let slot = |i: usize| if i == 0 { 0 } else { 1 + (i - 1 + r) % (n - 1) };
            let pairs = (0..n / 2)
                .map(|i| (slot(i), slot(n - 1 - i)))
                .filter(|&(a, b)| a != dummy && b != dummy)
                .map(|(a, b)| ordered(a, b))
                .collect();
            Round { index: r, pairs }
        })
        .collect()
}

/// Random disjoint pairings. For odd H the host that sits out follows a
/// seeded order, so nobody sits out twice before everyone has once.
fn random_pairings(hosts: usize, seed: u64) -> Vec<Round> {
    let mut rng = Rng::new(seed);
    let mut sit_out_order: Vec<usize> = (0..hosts).collect();
    rng.shuffle(&mut sit_out_order);
    let mut seen = std::collections::HashSet::new();
    (0..main_rounds(hosts))
        .map(|r| {
            let mut order: Vec<usize> = (0..hosts).collect();
            if hosts % 2 == 1 {
                order.retain(|&h| h != sit_out_order[r % hosts]);
            }
            rng.shuffle(&mut order);
            let mut pairs: Vec<(usize, usize)> =
                order.chunks(2).map(|p| ordered(p[0], p[1])).collect();
            avoid_repeats(&mut pairs, &seen, &mut rng);
            seen.extend(pairs.iter().copied());
            Round { index: r, pairs }
        })
        .collect()
}

/// Swaps partners between a repeated pair and a random other pair until
/// neither repeats (a few tries each): a second test of the same pair
/// says less about either host than a test with someone new.
fn avoid_repeats(
    pairs: &mut [(usize, usize)],
    seen: &std::collections::HashSet<(usize, usize)>,
    rng: &mut Rng,
) {
    for i in 0..pairs.len() {
        for _ in 0..20 {
            if !seen.contains(&pairs[i]) {
                break;
            }
            let j = rng.below(pairs.len());
            let ((a, b), (c, d)) = (pairs[i], pairs[j]);
            let (p, q) = (ordered(a, d), ordered(c, b));
            if i != j && !seen.contains(&p) && !seen.contains(&q) {
                pairs[i] = p;
                pairs[j] = q;
            }
        }
    }
}

/// The confirmation rounds for `verdict`, numbered from `first_index`:
/// each suspect link tested again until it has `cfg.link_tests` tests,
/// each suspect host tested with `cfg.confirmations` good hosts (ones it
/// has not met first; in a small world, where it met everyone, a repeat).
/// Usually two rounds; suspects that share a host cannot be tested at
/// once and take more, up to [`MAX_CONFIRMATION_ROUNDS`]. Empty when
/// nothing is suspect.
pub fn confirmation_rounds(
    verdict: &HostVerdict,
    cfg: &JudgeConfig,
    first_index: usize,
) -> Vec<Round> {
    let hosts = verdict.matrix.hosts.len();
    // (a, b, tests still to run); a suspect host has b = None.
    let mut todo: Vec<(usize, Option<usize>, usize)> = Vec::new();
    for f in &verdict.findings {
        match f {
            Finding::SuspectLink { a, b, tests, .. } => {
                todo.push((*a, Some(*b), cfg.link_tests.saturating_sub(*tests)))
            }
            Finding::SuspectHost(e) => todo.push((e.host, None, cfg.confirmations)),
            _ => {}
        }
    }
    // Hosts of suspect links are not partners: their own tests come first.
    let in_link: Vec<usize> = todo
        .iter()
        .filter_map(|t| t.1.map(|b| [t.0, b]))
        .flatten()
        .collect();
    let good: Vec<usize> = verdict
        .good_hosts()
        .into_iter()
        .filter(|g| !in_link.contains(g))
        .collect();

    let mut met: std::collections::HashSet<(usize, usize)> = Default::default();
    let mut rounds = Vec::new();
    while rounds.len() < MAX_CONFIRMATION_ROUNDS {
        // Busiest hosts first, so their tests spread over the fewest rounds.
        let mut load = vec![0; hosts];
        for &(a, b, left) in &todo {
            load[a] += left;
            if let Some(b) = b {
                load[b] += left;
            }
        }
        let busiest = |t: &(usize, Option<usize>, usize)| load[t.0].max(t.1.map_or(0, |b| load[b]));
        todo.sort_by_key(|t| std::cmp::Reverse(busiest(t)));
        let mut busy = vec![false; hosts];
        let mut pairs = Vec::new();
        for (a, b, left) in todo.iter_mut().filter(|t| t.2 > 0) {
            let partner = match *b {
                Some(b) => Some(b),
                None => near_partner(*a, &good, &busy, &met, verdict, cfg),
            };
            let Some(p) = partner.filter(|&p| !busy[*a] && !busy[p]) else {
                continue;
            };
            busy[*a] = true;
            busy[p] = true;
            met.insert(ordered(*a, p));
            pairs.push(ordered(*a, p));
            *left -= 1;
        }
        if pairs.is_empty() {
            break;
        }
        rounds.push(Round {
            index: first_index + rounds.len(),
            pairs,
        });
    }
    rounds
}

/// A partner for suspect `host` from its own fabric group first (a slow
/// link between groups must not confirm a host), else any good host.
fn near_partner(
    host: usize,
    good: &[usize],
    busy: &[bool],
    met: &std::collections::HashSet<(usize, usize)>,
    verdict: &HostVerdict,
    cfg: &JudgeConfig,
) -> Option<usize> {
    let same_group = |b: usize| {
        cfg.group_of
            .as_ref()
            .is_none_or(|g| g.get(host).is_some() && g.get(host) == g.get(b))
    };
    let near: Vec<usize> = good.iter().copied().filter(|&g| same_group(g)).collect();
    pick_partner(host, &near, busy, met, verdict)
        .or_else(|| pick_partner(host, good, busy, met, verdict))
}

/// A free good host for suspect `host`: one it has not met if any, else
/// one it met only in the main rounds. The search starts at a different
/// place for each suspect, so that suspects do not queue for one host.
fn pick_partner(
    host: usize,
    good: &[usize],
    busy: &[bool],
    met: &std::collections::HashSet<(usize, usize)>,
    verdict: &HostVerdict,
) -> Option<usize> {
    let start = host % good.len().max(1);
    let free = (0..good.len())
        .map(|i| good[(start + i) % good.len()])
        .filter(|&g| g != host && !busy[g] && !met.contains(&ordered(host, g)));
    let (fresh, seen): (Vec<usize>, Vec<usize>) =
        free.partition(|&g| !verdict.matrix.measured(host, g));
    fresh.first().or(seen.first()).copied()
}

/// SplitMix64: a few lines that give the same numbers on every machine
/// and every version, which a schedule shared by all processes needs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn check_disjoint(s: &Schedule) {
        for r in &s.rounds {
            let mut seen = HashSet::new();
            for &(a, b) in &r.pairs {
                assert!(a < b && b < s.hosts, "{a}, {b}");
                assert!(seen.insert(a) && seen.insert(b), "host twice in {r:?}");
            }
            assert_eq!(r.idle(s.hosts).len(), s.hosts % 2, "round {}", r.index);
        }
    }

    #[test]
    fn small_worlds_meet_every_pair_once() {
        for h in 2..=SMALL_WORLD {
            let s = schedule(h, 7);
            check_disjoint(&s);
            assert_eq!(s.method, Method::RoundRobin);
            assert_eq!(s.rounds.len(), main_rounds(h));
            let pairs: Vec<_> = s.rounds.iter().flat_map(|r| r.pairs.clone()).collect();
            let unique: HashSet<_> = pairs.iter().collect();
            assert_eq!(pairs.len(), h * (h - 1) / 2, "{h} hosts");
            assert_eq!(unique.len(), pairs.len(), "{h} hosts");
        }
        assert_eq!(main_rounds(4), 3);
        assert_eq!(main_rounds(5), 5);
    }

    #[test]
    fn odd_worlds_sit_each_host_out_fairly() {
        for h in [5, 15, 17, 101] {
            let s = schedule(h, 3);
            check_disjoint(&s);
            let mut out = vec![0; h];
            for r in &s.rounds {
                for i in r.idle(h) {
                    out[i] += 1;
                }
            }
            let (lo, hi) = (out.iter().min().unwrap(), out.iter().max().unwrap());
            assert!(hi - lo <= 1, "{h} hosts sit out {out:?}");
        }
    }

    #[test]
    fn large_worlds_take_log2_rounds_of_new_pairs_deterministically() {
        for (h, rounds) in [(17, 5), (512, 9), (513, 10), (4096, 12)] {
            let s = schedule(h, 42);
            check_disjoint(&s);
            assert_eq!(s.method, Method::RandomPairings);
            assert_eq!(s.rounds.len(), rounds, "{h} hosts");
            let pairs: Vec<_> = s.rounds.iter().flat_map(|r| r.pairs.clone()).collect();
            let unique: HashSet<_> = pairs.iter().collect();
            assert_eq!(unique.len(), pairs.len(), "{h} hosts: a pair drawn twice");
            assert_eq!(s, schedule(h, 42));
            assert_ne!(s, schedule(h, 43));
        }
    }
}
