//! Arrival timing (issue #53): when each rank enters each timed iteration
//! and when the collective ends on it, on a clock all processes share
//! within a stated error, so rank 0 can say who arrived last and whether
//! the time was lost before the collective or inside it
//! ([`collbench_core::arrival`]).
//!
//! A backend's timed loop fills one [`RankSamples`] per local rank: the
//! CPU backend from each rank thread (threads share a clock), the MPI
//! backend from its one rank, and a GPU backend can add each iteration's
//! kernel start and end ([`RankSamples::start_ns`], converted to the host
//! clock) beside the host entry. Files: `clock` (offsets between
//! processes), `timelines` (this process's samples on rank 0's clock,
//! and the row's figures on rank 0).

pub mod clock;
pub mod timelines;

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Most timed iterations kept per rank: enough for a verdict and a
/// median, in fixed memory whatever `-n` is.
pub const MAX_ITERATIONS: usize = 4096;

/// Nanoseconds since this process's first call: one clock for every
/// rank thread of the process (`Instant`, monotonic).
#[inline]
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// One local rank's timed iterations on this process's clock
/// ([`now_ns`]), as the backend took them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankSamples {
    /// When the rank entered each iteration's first call (host).
    pub entry_ns: Vec<u64>,
    /// When the work started on the device (a GPU kernel's first
    /// instruction, on the host clock); empty where there is no device:
    /// the entry stands for it.
    #[serde(default)]
    pub start_ns: Vec<u64>,
    /// When the iteration's last call had completed on this rank.
    pub end_ns: Vec<u64>,
}

impl RankSamples {
    /// Room for `iters` timed iterations (at most [`MAX_ITERATIONS`]),
    /// taken before the clock starts so the loop never allocates.
    pub fn with_capacity(iters: u64) -> RankSamples {
        let n = (iters as usize).min(MAX_ITERATIONS);
        RankSamples {
            entry_ns: Vec::with_capacity(n),
            start_ns: Vec::new(),
            end_ns: Vec::with_capacity(n),
        }
    }

    /// The rank enters an iteration: one clock read and a store, none
    /// past [`MAX_ITERATIONS`].
    #[inline]
    pub fn enter(&mut self) {
        if self.entry_ns.len() < MAX_ITERATIONS {
            self.entry_ns.push(now_ns());
        }
    }

    /// The iteration entered last has completed on this rank.
    #[inline]
    pub fn leave(&mut self) {
        if self.end_ns.len() < self.entry_ns.len() {
            self.end_ns.push(now_ns());
        }
    }
}

/// What a backend took for one case: one [`RankSamples`] per local rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalSamples {
    pub ranks: Vec<RankSamples>,
    /// Bound on the error of device times put on the host clock (a GPU's
    /// timer aligned to [`now_ns`], the largest of this process's GPUs);
    /// 0 where the samples are host readings only.
    #[serde(default)]
    pub device_clock_error_ns: u64,
}

impl ArrivalSamples {
    /// Appends `other`'s iterations rank by rank (`-n auto`'s repeats),
    /// up to [`MAX_ITERATIONS`].
    pub fn append(&mut self, other: ArrivalSamples) {
        if self.ranks.is_empty() {
            *self = other;
            return;
        }
        self.device_clock_error_ns = self.device_clock_error_ns.max(other.device_clock_error_ns);
        for (mine, theirs) in self.ranks.iter_mut().zip(other.ranks) {
            let room = MAX_ITERATIONS.saturating_sub(mine.entry_ns.len());
            let n = room.min(theirs.entry_ns.len()).min(theirs.end_ns.len());
            mine.entry_ns.extend_from_slice(&theirs.entry_ns[..n]);
            mine.end_ns.extend_from_slice(&theirs.end_ns[..n]);
            if theirs.start_ns.len() >= n && mine.start_ns.len() + n == mine.entry_ns.len() {
                mine.start_ns.extend_from_slice(&theirs.start_ns[..n]);
            }
        }
    }
}

/// The end of a [`LateEntry`] hold that is a busy wait: longer than a
/// sleep's usual overshoot on a busy machine.
pub const SPIN_TAIL: Duration = Duration::from_micros(200);

/// Test hook (`--test-late-entry RANK:MICROSECONDS`): rank `rank` (its
/// number among the backend's ranks) enters every call `delay` after it
/// could have, as a busy CPU or a slow launch would make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateEntry {
    pub rank: usize,
    pub delay: Duration,
}

impl LateEntry {
    /// Parses `RANK:MICROSECONDS` (whole numbers).
    pub fn parse(s: &str) -> Result<LateEntry, String> {
        let usage = || format!("'{s}' is not RANK:MICROSECONDS (whole numbers)");
        let (rank, us) = s.split_once(':').ok_or_else(usage)?;
        Ok(LateEntry {
            rank: rank.parse().map_err(|_| usage())?,
            delay: Duration::from_micros(us.parse().map_err(|_| usage())?),
        })
    }

    /// Holds rank `r` back, if it is the hooked one: asleep for all but
    /// the last [`SPIN_TAIL`], then a busy wait to the end, so the delay is
    /// as exact as the clock (a sleep alone overshoots by the scheduler's
    /// wake-up) and the rank does not burn the CPU time that would make
    /// the scheduler hold it back further (a rank spinning for a
    /// millisecond on a busy core is preempted for several).
    /// Returns how long it held the rank (`None`: not the hooked rank): on
    /// a machine too busy to wake the rank in time, more than the delay.
    #[inline]
    pub fn hold(hook: Option<LateEntry>, r: usize) -> Option<Duration> {
        let h = hook.filter(|h| h.rank == r)?;
        let start = Instant::now();
        let end = start + h.delay;
        if let Some(nap) = h.delay.checked_sub(SPIN_TAIL) {
            std::thread::sleep(nap);
        }
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        Some(start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_within_their_bound_and_pair_entries_with_ends() {
        let mut s = RankSamples::with_capacity(u64::MAX);
        assert_eq!(s.entry_ns.capacity(), MAX_ITERATIONS);
        s.leave(); // nothing entered: no end
        for _ in 0..MAX_ITERATIONS + 3 {
            s.enter();
            s.leave();
        }
        assert_eq!(
            (s.entry_ns.len(), s.end_ns.len()),
            (MAX_ITERATIONS, MAX_ITERATIONS)
        );
        assert!(s.entry_ns.windows(2).all(|w| w[0] <= w[1]));
        assert!(s.entry_ns.iter().zip(&s.end_ns).all(|(e, x)| e <= x));
    }

    #[test]
    fn repeats_append_rank_by_rank() {
        let one = |t: u64| ArrivalSamples {
            ranks: vec![RankSamples {
                entry_ns: vec![t],
                start_ns: Vec::new(),
                end_ns: vec![t + 1],
            }],
            device_clock_error_ns: t,
        };
        let mut a = ArrivalSamples::default();
        a.append(one(10));
        a.append(one(20));
        assert_eq!(a.ranks[0].entry_ns, [10, 20]);
        assert_eq!(a.ranks[0].end_ns, [11, 21]);
        assert!(a.ranks[0].start_ns.is_empty());
        assert_eq!(a.device_clock_error_ns, 20, "the larger bound holds");
    }

    #[test]
    fn the_late_entry_hook_parses_and_holds_only_its_rank() {
        let h = LateEntry::parse("2:1000").unwrap();
        assert_eq!((h.rank, h.delay), (2, Duration::from_millis(1)));
        for bad in ["2", "a:1", "1:-3", "1:2:3"] {
            assert_eq!(
                LateEntry::parse(bad).unwrap_err(),
                format!("'{bad}' is not RANK:MICROSECONDS (whole numbers)")
            );
        }
        let t = Instant::now();
        assert_eq!(LateEntry::hold(Some(h), 1), None);
        assert!(t.elapsed() < Duration::from_micros(500));
        let held = LateEntry::hold(Some(h), 2).unwrap();
        assert!(held >= Duration::from_millis(1) && t.elapsed() >= held);
    }
}
