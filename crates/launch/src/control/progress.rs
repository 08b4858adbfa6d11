//! Where the ranks are: this rank's published progress word, and on rank 0
//! every rank's latest word with the moment it last changed. Lock-free, so
//! publishing is one atomic store and reading never waits on the control
//! plane's threads.

use collbench_core::{Progress, RankProgress};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// This rank's word and, on rank 0, everyone's.
pub(super) struct Board {
    /// What this rank published last (0: nothing yet).
    own: AtomicU64,
    /// The moment `changed_ns` counts from.
    start: Instant,
    /// Rank 0 (and a world of one): per rank, its latest word.
    words: Vec<AtomicU64>,
    /// Per rank: nanoseconds after `start` when its word last changed.
    changed_ns: Vec<AtomicU64>,
}

impl Board {
    /// A board for `ranks` ranks (the world size on rank 0, else 0).
    pub(super) fn new(ranks: usize) -> Board {
        Board {
            own: AtomicU64::new(0),
            start: Instant::now(),
            words: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            changed_ns: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Publishes this rank's progress: one atomic store.
    pub(super) fn publish(&self, word: u64) {
        self.own.store(word, Ordering::Relaxed);
    }

    /// This rank's latest word (what its heartbeats carry).
    pub(super) fn own(&self) -> u64 {
        self.own.load(Ordering::Relaxed)
    }

    /// Rank 0: `rank`'s heartbeat carried `word`; notes when it changed.
    pub(super) fn record(&self, rank: usize, word: u64) {
        let Some(slot) = self.words.get(rank) else {
            return;
        };
        if slot.swap(word, Ordering::Relaxed) != word {
            let now = self.start.elapsed().as_nanos() as u64;
            self.changed_ns[rank].store(now, Ordering::Relaxed);
        }
    }

    /// Rank 0: every rank's latest progress, named by `host_of(rank)`.
    /// Rank 0's own entry is its own published word.
    pub(super) fn table(&self, host_of: impl Fn(usize) -> String) -> Vec<RankProgress> {
        self.record(0, self.own());
        let now = self.start.elapsed();
        (0..self.words.len())
            .map(|rank| {
                let changed = Duration::from_nanos(self.changed_ns[rank].load(Ordering::Relaxed));
                RankProgress {
                    rank,
                    host: host_of(rank),
                    progress: Progress::unpack(self.words[rank].load(Ordering::Relaxed)),
                    unchanged_for: now.saturating_sub(changed),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::Phase;

    #[test]
    fn a_word_that_stays_the_same_ages_and_a_new_one_resets_the_age() {
        let board = Board::new(2);
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
        assert!(board.table(|_| String::new())[1].unchanged_for < Duration::from_millis(30));
        assert_eq!(table[0].progress, None, "rank 0 published nothing yet");
    }
}
