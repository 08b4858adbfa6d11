//! Who arrived last, and by how much (issue #53): a row's arrival skew as
//! the record carries it ([`Arrival`]), and the analysis that makes it from
//! every rank's timeline ([`analyze`]).
//!
//! A collective runs at the pace of its last rank. Each rank's timeline
//! holds, per timed iteration, when it entered the collective on the host,
//! when the collective's work started on it (the GPU kernel's first
//! instruction; the entry again where there is no device) and when it
//! ended, all on one clock (rank 0's, within `clock_error_us`). A rank
//! arrives when its work starts (on a GPU the kernel, whose host launch
//! may be queued iterations ahead; elsewhere the entry). From them:
//! the spread of arrivals (skew), each rank's lateness, the time spent
//! inside, and a verdict: a rank that is last by more than the noise in
//! most iterations is a straggler, "late rank" when the time was mostly
//! lost before the collective (between its previous end and its arrival,
//! beyond the others' gap), "slow link" when mostly inside (it left the
//! previous collective last: its entry is late because its end was).

use serde::{Deserialize, Serialize};

/// Fewest iterations a verdict is drawn from: below it, nobody is named.
pub const MIN_ITERATIONS: usize = 5;
/// Share of the iterations a rank must be late in to be named (most of
/// them, with room for a preempted one on a busy machine).
pub const LATE_SHARE: f64 = 0.6;
/// How many robust standard deviations (1.4826 x MAD) of the quiet ranks'
/// lateness, above their median, a lateness must exceed to count.
pub const NOISE_SIGMAS: f64 = 5.0;
/// How many robust standard deviations of the rank's own time lost inside,
/// from iteration to iteration, it must exceed: a rank slow inside every
/// time is slow by about the same each time; one woken late now and then
/// (a busy machine) by anything from nothing to a time slice.
pub const OWN_SIGMAS: f64 = 3.0;
/// The least lateness that counts, in microseconds: below it a rank's
/// lateness is the loop's own jitter (threads waking from one barrier).
pub const NOISE_FLOOR_US: f64 = 5.0;

/// One rank's timed iterations, in microseconds on the aligned clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankTimeline {
    /// Global rank.
    pub rank: u64,
    /// Host the rank runs on.
    pub host: String,
    /// When the rank entered each iteration's collective (host clock).
    pub entry_us: Vec<f64>,
    /// When its work started (GPU: the kernel's first instruction);
    /// equal to `entry_us` where the backend has no device.
    pub start_us: Vec<f64>,
    /// When the collective ended on this rank.
    pub end_us: Vec<f64>,
}

/// Where a straggler lost its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StragglerKind {
    /// Before the collective: the rank entered late (a busy CPU, a slow
    /// launch, a noisy neighbour).
    LateRank,
    /// Inside it: the rank left the collective before last and therefore
    /// entered the next one late (a slow link, a slow device).
    SlowLink,
}

impl StragglerKind {
    /// How a line for people says it.
    pub fn words(self) -> &'static str {
        match self {
            StragglerKind::LateRank => "late rank (time lost before the collective)",
            StragglerKind::SlowLink => "slow link (time lost inside the collective)",
        }
    }
}

/// A rank named as last by more than the noise in most iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Straggler {
    pub rank: u64,
    /// Its host, as the backend named it.
    pub host: String,
    pub kind: StragglerKind,
    /// Iterations after the first in which the part of its lateness that
    /// names it (before, or inside) exceeded that part's noise.
    pub late_iterations: u64,
    /// Iterations analysed.
    pub iterations: u64,
    /// Median of its lead over the next-latest rank where it was last;
    /// for a late rank that others still arrived after (their lateness
    /// the collective's own order), the median of its arrival after the
    /// other ranks' median arrival.
    pub lateness_us: f64,
    /// Of its lateness, the part lost before entering: its time between
    /// the previous iteration's end and this entry, over the other ranks'
    /// median (median over its late iterations; 0 with none before).
    pub before_us: f64,
    /// The part lost inside the previous iteration: its end after the
    /// other ranks' median end.
    pub inside_us: f64,
}

/// A placement's arrival figures (`--arrival`; `check`'s battery).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arrival {
    /// Timed iterations analysed.
    pub iterations: u64,
    /// Bound on the error of the aligned clocks between any two ranks
    /// (0 for threads of one process, which share a clock).
    pub clock_error_us: f64,
    /// Median over iterations of the spread of arrivals (last - first
    /// start: the kernel's on a GPU, the host entry elsewhere).
    pub skew_us: f64,
    /// Largest spread of one iteration.
    pub skew_max_us: f64,
    /// The rank that entered last most often, and in how many iterations.
    pub last_rank: u64,
    pub last_rank_iterations: u64,
    /// Per rank: median over iterations of its arrival after the first
    /// rank's.
    pub lateness_us: Vec<f64>,
    /// Time inside the collective per iteration (end - start), each rank's
    /// median over iterations, then the least, median and largest rank.
    pub inside_min_us: f64,
    pub inside_median_us: f64,
    pub inside_max_us: f64,
    /// Device time per operation: per iteration the shortest time inside
    /// (the last rank to arrive waits for nobody), median over iterations,
    /// divided by the aggregated operations; and its busbw, beside the
    /// host-time one as rccl-tests' device timing reports it.
    pub device_time_us: f64,
    pub device_busbw_gbps: f64,
    /// The time lost before the collective that counts as late
    /// ([`noise_us`] of the other ranks' time lost there).
    pub noise_us: f64,
    /// The rank named, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub straggler: Option<Straggler>,
}

/// Median of `v` (0 when empty); sorts a copy.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The lateness above which a rank counts as late: the quiet ranks' median
/// plus [`NOISE_SIGMAS`] robust deviations, never below the clock's error
/// bound or [`NOISE_FLOOR_US`].
pub fn noise_us(quiet_lateness_us: &[f64], clock_error_us: f64) -> f64 {
    let m = median(quiet_lateness_us);
    let dev: Vec<f64> = quiet_lateness_us.iter().map(|x| (x - m).abs()).collect();
    let spread = m + NOISE_SIGMAS * 1.4826 * median(&dev);
    spread.max(clock_error_us).max(NOISE_FLOOR_US)
}

/// Per iteration: the latest rank, its lead over the next-latest, and
/// the spread of all.
struct Order {
    last: usize,
    lead: f64,
    spread: f64,
}

fn order(times: &[f64]) -> Order {
    let mut last = 0;
    for (r, t) in times.iter().enumerate() {
        if *t > times[last] {
            last = r;
        }
    }
    let next = (0..times.len())
        .filter(|&r| r != last)
        .map(|r| times[r])
        .fold(f64::NEG_INFINITY, f64::max);
    let first = times.iter().copied().fold(f64::INFINITY, f64::min);
    Order {
        last,
        lead: if next.is_finite() {
            times[last] - next
        } else {
            0.0
        },
        spread: times[last] - first,
    }
}

/// What [`analyze`] needs beside the timelines.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Error bound of the aligned clocks.
    pub clock_error_us: f64,
    /// Operations per iteration (`-m`).
    pub agg_iters: u64,
    /// busbw of one operation taking 1 us (so that busbw = this / time).
    pub busbw_gbps_at_1us: f64,
}

/// The row's arrival figures from every rank's timeline (global rank
/// order); `None` with no iteration to analyse.
pub fn analyze(ranks: &[RankTimeline], scale: Scale) -> Option<Arrival> {
    let iters = ranks.iter().map(|r| r.entry_us.len()).min()?;
    if iters == 0
        || ranks
            .iter()
            .any(|r| r.start_us.len() < iters || r.end_us.len() < iters)
    {
        return None;
    }
    // A rank arrives when its work starts: on a GPU the kernel's first
    // instruction (a host entry there only says when the launch was
    // queued, iterations ahead of the stream), elsewhere the entry.
    let entries = |i: usize| ranks.iter().map(|r| r.start_us[i]).collect::<Vec<_>>();
    let orders: Vec<Order> = (0..iters).map(|i| order(&entries(i))).collect();
    let mut last_counts = vec![0u64; ranks.len()];
    orders.iter().for_each(|o| last_counts[o.last] += 1);
    let last_rank = (0..ranks.len()).max_by_key(|&r| (last_counts[r], usize::MAX - r))?;
    let lateness_us = (0..ranks.len())
        .map(|r| {
            let late: Vec<f64> = (0..iters)
                .map(|i| {
                    ranks[r].start_us[i] - entries(i).into_iter().fold(f64::INFINITY, f64::min)
                })
                .collect();
            median(&late)
        })
        .collect();
    let inside: Vec<Vec<f64>> = ranks
        .iter()
        .map(|r| (0..iters).map(|i| r.end_us[i] - r.start_us[i]).collect())
        .collect();
    let mut per_rank: Vec<f64> = inside.iter().map(|v| median(v)).collect();
    per_rank.sort_by(f64::total_cmp);
    let shortest: Vec<f64> = (0..iters)
        .map(|i| inside.iter().map(|v| v[i]).fold(f64::INFINITY, f64::min))
        .collect();
    let device_time_us = median(&shortest) / scale.agg_iters.max(1) as f64;
    let spreads: Vec<f64> = orders.iter().map(|o| o.spread).collect();
    let verdict = Verdict::of(ranks, iters, last_rank, scale.clock_error_us);
    let straggler = verdict
        .straggler(ranks, &orders, last_rank)
        .or_else(|| late_but_hidden(ranks, iters, (last_rank, &verdict), scale.clock_error_us));
    Some(Arrival {
        iterations: iters as u64,
        clock_error_us: scale.clock_error_us,
        skew_us: median(&spreads),
        skew_max_us: spreads.iter().copied().fold(0.0, f64::max),
        last_rank: ranks[last_rank].rank,
        last_rank_iterations: last_counts[last_rank],
        lateness_us,
        inside_min_us: per_rank[0],
        inside_median_us: median(&per_rank),
        inside_max_us: per_rank[per_rank.len() - 1],
        device_time_us,
        device_busbw_gbps: if device_time_us > 0.0 {
            scale.busbw_gbps_at_1us / device_time_us
        } else {
            0.0
        },
        noise_us: verdict.noise_before_us,
        straggler,
    })
}

/// A rank that loses time before the collective in most iterations
/// while others still arrive after it: their lateness is the collective's
/// own order (over TCP, the rank whose sends finish last leaves last and
/// arrives last, by the same few hundred µs every iteration), which hides
/// the late rank from "last most often". Seen on 4 emulated hosts at
/// 4 MiB: a rank held 100 µs before every iteration was last in 14-21 of
/// 40. The candidate is the rank with the largest median time lost before
/// entering (its gap since its previous end over all ranks' median gap);
/// it is named a late rank when that part exceeds its noise in more than
/// [`LATE_SHARE`] of the iterations, as for the last rank.
fn late_but_hidden(
    ranks: &[RankTimeline],
    iters: usize,
    (last_rank, last): (usize, &Verdict),
    clock_error_us: f64,
) -> Option<Straggler> {
    if ranks.len() < 2 || iters < MIN_ITERATIONS {
        return None;
    }
    let gap = |r: usize, i: usize| ranks[r].start_us[i] - ranks[r].end_us[i - 1];
    let mut excess: Vec<Vec<f64>> = vec![Vec::with_capacity(iters); ranks.len()];
    for i in 1..iters {
        let all: Vec<f64> = (0..ranks.len()).map(|r| gap(r, i)).collect();
        let m = median(&all);
        for (r, g) in all.iter().enumerate() {
            excess[r].push(g - m);
        }
    }
    let medians: Vec<f64> = excess.iter().map(|v| median(v)).collect();
    let c = (0..ranks.len()).max_by(|&a, &b| medians[a].total_cmp(&medians[b]))?;
    // The last rank itself may be the candidate: last most often but in
    // too few iterations (24 of 40 on that emulation), the same test of
    // its time lost before still names it.
    let other;
    let v = if c == last_rank {
        last
    } else {
        other = Verdict::of(ranks, iters, c, clock_error_us);
        &other
    };
    let late: Vec<f64> = v
        .before
        .iter()
        .copied()
        .filter(|&b| b > v.noise_before_us)
        .collect();
    if (late.len() as f64) <= LATE_SHARE * (iters - 1) as f64 {
        return None;
    }
    // Its arrival after the other ranks' median arrival, per iteration.
    let after_others: Vec<f64> = (0..iters)
        .map(|i| {
            let others: Vec<f64> = (0..ranks.len())
                .filter(|&o| o != c)
                .map(|o| ranks[o].start_us[i])
                .collect();
            ranks[c].start_us[i] - median(&others)
        })
        .collect();
    Some(Straggler {
        rank: ranks[c].rank,
        host: ranks[c].host.clone(),
        kind: StragglerKind::LateRank,
        late_iterations: late.len() as u64,
        iterations: iters as u64,
        lateness_us: median(&after_others),
        before_us: median(&v.before),
        inside_us: median(&v.inside),
    })
}

/// Robust standard deviation (1.4826 x MAD) of `v`.
fn sigma(v: &[f64]) -> f64 {
    let m = median(v);
    let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    1.4826 * median(&dev)
}

/// For every iteration after the first, how much `part` of rank `r` (its
/// gap since its previous end, or that end) exceeds the median of the
/// ranks other than `candidate` (and `r`).
fn excess(
    ranks: &[RankTimeline],
    iters: usize,
    candidate: usize,
    r: usize,
    part: impl Fn(&RankTimeline, usize) -> f64,
) -> Vec<f64> {
    (1..iters)
        .map(|i| {
            let others: Vec<f64> = (0..ranks.len())
                .filter(|&o| o != candidate && o != r)
                .map(|o| part(&ranks[o], i))
                .collect();
            match others.is_empty() {
                true => 0.0,
                false => part(&ranks[r], i) - median(&others),
            }
        })
        .collect()
}

/// The last rank's lateness split in two, iteration by iteration, with the
/// noise of each part: lost before entering (its gap since its previous
/// end beyond the others'), lost inside the previous iteration (its end
/// after the others').
struct Verdict {
    before: Vec<f64>,
    inside: Vec<f64>,
    noise_before_us: f64,
    noise_inside_us: f64,
}

impl Verdict {
    fn of(ranks: &[RankTimeline], iters: usize, c: usize, clock_error_us: f64) -> Verdict {
        let gap = |t: &RankTimeline, i: usize| t.start_us[i] - t.end_us[i - 1];
        let end = |t: &RankTimeline, i: usize| t.end_us[i - 1];
        let quiet = |part: &dyn Fn(&RankTimeline, usize) -> f64| -> Vec<f64> {
            (0..ranks.len())
                .filter(|&r| r != c)
                .flat_map(|r| excess(ranks, iters, c, r, part))
                .collect()
        };
        let before = excess(ranks, iters, c, c, gap);
        let inside = excess(ranks, iters, c, c, end);
        // Between two calls a rank runs a few instructions: time lost there
        // is the rank's own, and the other ranks' spread bounds its noise.
        // Inside, the end of a collective also carries the scheduler's
        // wake-ups (of a barrier, a poll) that come and go from one
        // iteration to the next: the rank's own spread bounds it too.
        let inside_noise = noise_us(&quiet(&end), clock_error_us).max(OWN_SIGMAS * sigma(&inside));
        Verdict {
            noise_before_us: noise_us(&quiet(&gap), clock_error_us),
            noise_inside_us: inside_noise,
            before,
            inside,
        }
    }

    /// The last rank, named if it was last in more than [`LATE_SHARE`] of
    /// at least [`MIN_ITERATIONS`] iterations and one part of its lateness
    /// exceeded that part's noise in more than that share: "late rank"
    /// (before) or "slow link" (inside), the part late more often.
    fn straggler(&self, ranks: &[RankTimeline], orders: &[Order], c: usize) -> Option<Straggler> {
        let iters = orders.len();
        if ranks.len() < 2 || iters < MIN_ITERATIONS {
            return None;
        }
        let last: Vec<f64> = orders
            .iter()
            .filter(|o| o.last == c)
            .map(|o| o.lead)
            .collect();
        let late_before = self
            .before
            .iter()
            .filter(|&&b| b > self.noise_before_us)
            .count();
        // Time lost inside is judged against the other ranks' ends: with
        // two ranks there is no third to compare with, and the two ends
        // differ by the collective's own order (2 emulated hosts over TCP:
        // one rank's ends 98 us after the other's in 40 of 40 iterations,
        // no fault), which a slow link between the two would share.
        let late_inside = match ranks.len() {
            0..=2 => 0,
            _ => self
                .inside
                .iter()
                .filter(|&&s| s > self.noise_inside_us)
                .count(),
        };
        let share = |n: usize, of: usize| n as f64 > LATE_SHARE * of as f64;
        if !share(last.len(), iters) {
            return None;
        }
        let kind = match (share(late_before, iters - 1), share(late_inside, iters - 1)) {
            (true, _) if late_before >= late_inside => StragglerKind::LateRank,
            (_, true) => StragglerKind::SlowLink,
            (true, false) => StragglerKind::LateRank,
            (false, false) => return None,
        };
        Some(Straggler {
            rank: ranks[c].rank,
            host: ranks[c].host.clone(),
            kind,
            late_iterations: match kind {
                StragglerKind::LateRank => late_before,
                StragglerKind::SlowLink => late_inside,
            } as u64,
            iterations: iters as u64,
            lateness_us: median(&last),
            before_us: median(&self.before),
            inside_us: median(&self.inside),
        })
    }
}

#[cfg(test)]
#[path = "arrival_tests.rs"]
mod tests;
