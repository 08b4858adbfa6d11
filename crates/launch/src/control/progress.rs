//! Where the ranks are: this rank's published progress word, and on rank 0
//! every rank's latest word with the moments it last changed and was last
//! heard (on the other ranks, rank 0's). Lock-free, so publishing is one
//! atomic store and reading never waits on the control plane's threads.

use collbench_core::{Heard, Progress, RankProgress};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// This rank's word and, on rank 0, everyone's.
pub(super) struct Board {
    /// What this rank published last (0: nothing yet).
    own: AtomicU64,
    /// The moment `changed_ns` counts from.
    start: Instant,
    /// Rank 0 (and a world of one): per rank, its latest word. Other
    /// ranks: one slot, rank 0's.
    words: Vec<AtomicU64>,
    /// Per rank: nanoseconds after `start` when its word last changed.
    changed_ns: Vec<AtomicU64>,
    /// Per rank: nanoseconds after `start` when its last heartbeat came.
    heard_ns: Vec<AtomicU64>,
    /// The job's heartbeat period (every rank's: they share the flags).
    beat: Duration,
}

impl Board {
    /// A board for `ranks` ranks (the world size on rank 0, else 1: rank
    /// 0 itself) that beat every `beat`.
    pub(super) fn new(ranks: usize, beat: Duration) -> Board {
        let zeros = || (0..ranks).map(|_| AtomicU64::new(0)).collect();
        Board {
            own: AtomicU64::new(0),
            start: Instant::now(),
            words: zeros(),
            changed_ns: zeros(),
            heard_ns: zeros(),
            beat,
        }
    }

    /// The job's heartbeat period.
    pub(super) fn beat(&self) -> Duration {
        self.beat
    }

    /// Publishes this rank's progress: one atomic store.
    pub(super) fn publish(&self, word: u64) {
        self.own.store(word, Ordering::Relaxed);
    }

    /// This rank's latest word (what its heartbeats carry).
    pub(super) fn own(&self) -> u64 {
        self.own.load(Ordering::Relaxed)
    }

    /// `rank`'s heartbeat carried `word` (on other ranks than 0, only
    /// rank 0's is kept); notes when it came and when the word changed.
    pub(super) fn record(&self, rank: usize, word: u64) {
        let Some(slot) = self.words.get(rank) else {
            return;
        };
        let now = self.start.elapsed().as_nanos() as u64;
        self.heard_ns[rank].store(now, Ordering::Relaxed);
        if slot.swap(word, Ordering::Relaxed) != word {
            self.changed_ns[rank].store(now, Ordering::Relaxed);
        }
    }

    /// Rank 0: every rank's latest progress, named by `host_of(rank)`,
    /// and whether its heartbeats still arrive. Rank 0's own entry is its
    /// own published word.
    pub(super) fn table(&self, host_of: impl Fn(usize) -> String) -> Vec<RankProgress> {
        self.record(0, self.own());
        (0..self.words.len())
            .map(|rank| self.entry(rank, host_of(rank)))
            .collect()
    }

    /// Slot `slot` as a table entry (on ranks other than 0, slot 0 is
    /// rank 0 as its heartbeats tell it).
    pub(super) fn entry(&self, slot: usize, host: String) -> RankProgress {
        let now = self.start.elapsed();
        let at =
            |ns: &AtomicU64| now.saturating_sub(Duration::from_nanos(ns.load(Ordering::Relaxed)));
        RankProgress {
            rank: slot,
            host,
            progress: Progress::unpack(self.words[slot].load(Ordering::Relaxed)),
            unchanged_for: at(&self.changed_ns[slot]),
            heard: Heard::after(at(&self.heard_ns[slot]), self.beat),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::Phase;

    #[test]
    fn a_word_that_stays_the_same_ages_and_a_new_one_resets_the_age() {
        let beat = Duration::from_millis(10);
        let board = Board::new(2, beat);
        let at = |iteration| {
            Progress {
                case: 1,
                iteration,
                phase: Phase::Wait,
            }
            .pack()
        };
        board.record(1, at(3));
        std::thread::sleep(Duration::from_millis(30));
        board.record(1, at(3));
        let table = board.table(|r| format!("h{r}"));
        assert_eq!(table[1].progress.unwrap().iteration, 3);
        assert_eq!(table[1].host, "h1");
        assert!(table[1].unchanged_for >= Duration::from_millis(30));
        board.record(1, at(4));
        let again = board.table(|_| String::new());
        assert!(again[1].unchanged_for < Duration::from_millis(30));
        assert_eq!(table[0].progress, None, "rank 0 published nothing yet");
        assert_eq!(again[1].heard, Heard::InTime, "just heard");
        // Nothing for three beats of 10 ms: late (silence takes 2 s at
        // least); rank 0 hears itself.
        std::thread::sleep(Duration::from_millis(30));
        let later = board.table(|_| String::new());
        assert_eq!(later[1].heard, Heard::Late);
        assert_eq!(later[0].heard, Heard::InTime);
    }
}
