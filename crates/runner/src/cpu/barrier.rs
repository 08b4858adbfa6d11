//! A reusable barrier for rank threads.
//!
//! Waiting ranks spin for a short while when every rank can have a core of
//! its own (ranks usually arrive within a microsecond of each other), and
//! otherwise, or once the spin is over, sleep until the last rank wakes
//! them. The old version spun 2000 pause instructions (about 50 us here)
//! before each `yield_now`: whenever two ranks shared a core (placement of
//! fresh threads is random, and other processes take cores), every
//! barrier cost those 50 us, and small-message times jumped between 1 us
//! and 50-100 us from run to run (bench/results/cpu-jitter.md).
//!
//! A barrier given a [`Watch`] publishes that a sleeping rank waits, and
//! lets its ranks go with `Err(Stopped)` once the job is stopped, so a
//! rank that never arrives cannot hang the process.

use crate::watch::{Stopped, Watch};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Longest spin before sleeping: long enough for a peer on another core
/// finishing a 64 KiB step, short against a time slice.
const SPIN: Duration = Duration::from_micros(20);

/// Sense-reversing barrier for a fixed number of threads.
pub struct SpinBarrier {
    parties: usize,
    /// Whether waiting ranks spin before sleeping (see [`spins_for`]).
    spin: bool,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// Ranks asleep (or about to be) in [`SpinBarrier::wait`].
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    watch: Option<Arc<Watch>>,
}

/// How often a sleeping rank of a watched barrier looks at the stop flag.
const LOOK: Duration = Duration::from_millis(20);

/// Whether ranks spin: only if each of `parties` ranks can have one of
/// `cores` CPUs. With more ranks than cores, a spinning rank holds the
/// core the rank it waits for needs.
pub fn spins_for(parties: usize, cores: usize) -> bool {
    parties <= cores
}

/// CPUs this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl SpinBarrier {
    /// A barrier for `parties` threads.
    pub fn new(parties: usize) -> SpinBarrier {
        SpinBarrier::with_spin(parties, spins_for(parties, cores()))
    }

    /// A barrier that spins before sleeping, or not.
    pub fn with_spin(parties: usize, spin: bool) -> SpinBarrier {
        SpinBarrier {
            parties: parties.max(1),
            spin,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            watch: None,
        }
    }

    /// The same barrier, watched (see the module's doc).
    pub fn watched(mut self, watch: Option<Arc<Watch>>) -> SpinBarrier {
        self.watch = watch;
        self
    }

    /// Blocks rank `r` until all parties have called `wait` for this
    /// generation; `Err` when the job stops first (watched barriers only).
    pub fn wait(&self, r: usize) -> Result<(), Stopped> {
        if self.parties == 1 {
            return Ok(());
        }
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::SeqCst);
            // Sleepers announce themselves before their last look at the
            // generation (both SeqCst): either they see the new one, or we
            // see them and wake them under the lock they sleep with.
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
                self.wake.notify_all();
            }
            return Ok(());
        }
        if self.spin {
            let start = Instant::now();
            'spin: loop {
                for _ in 0..64 {
                    if self.generation.load(Ordering::Acquire) != gen {
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                if start.elapsed() > SPIN {
                    break 'spin;
                }
            }
        }
        if let Some(w) = &self.watch {
            w.waiting(r);
        }
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut result = Ok(());
        while self.generation.load(Ordering::SeqCst) == gen {
            guard = match &self.watch {
                None => self.wake.wait(guard).unwrap_or_else(|e| e.into_inner()),
                Some(w) if w.is_stopped() => {
                    result = Err(Stopped);
                    break;
                }
                Some(_) => {
                    self.wake
                        .wait_timeout(guard, LOOK)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn no_thread_passes_early(b: &SpinBarrier, n: usize) {
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    for round in 1..=50u64 {
                        counter.fetch_add(1, Ordering::SeqCst);
                        b.wait(0).unwrap();
                        assert!(counter.load(Ordering::SeqCst) >= round * n as u64);
                        b.wait(0).unwrap();
                    }
                });
            }
        });
    }

    #[test]
    fn spinning_barrier_holds_everyone() {
        no_thread_passes_early(&SpinBarrier::with_spin(5, true), 5);
    }

    #[test]
    fn sleeping_barrier_holds_everyone_and_wakes_everyone() {
        // More threads than this machine has cores, all sleeping: a lost
        // wake-up would hang here.
        let n = 4 * cores() + 1;
        no_thread_passes_early(&SpinBarrier::with_spin(n, false), n);
    }

    #[test]
    fn a_watched_barrier_lets_its_ranks_go_when_the_job_stops() {
        use crate::watch::Stop;
        let watch = Arc::new(Watch::new(3, 0, Vec::new()));
        watch.begin_case(0);
        let b = SpinBarrier::with_spin(3, true).watched(Some(watch.clone()));
        std::thread::scope(|s| {
            // Rank 2 never arrives.
            let waiting: Vec<_> = (0..2)
                .map(|r| {
                    let (b, watch) = (&b, &watch);
                    s.spawn(move || {
                        watch.calling(r, 0).unwrap();
                        b.wait(r)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(50));
            assert!(waiting.iter().all(|h| !h.is_finished()));
            watch.stop(Stop::Stuck("line".into()));
            for h in waiting {
                assert_eq!(h.join().unwrap(), Err(Stopped));
            }
        });
        // Sleeping ranks said they wait.
        let phases: Vec<_> = watch.positions().iter().map(|p| p.unwrap().phase).collect();
        use collbench_core::Phase;
        assert_eq!(phases, [Phase::Wait, Phase::Wait, Phase::Idle]);
    }

    #[test]
    fn ranks_spin_only_with_a_core_each() {
        // The cause of the 1 us / 50-100 us jumps: spinning while the rank
        // being waited for needs this core.
        assert!(spins_for(2, 2));
        assert!(!spins_for(3, 2));
        assert!(!spins_for(8, 2));
        assert!(!SpinBarrier::new(cores() + 1).spin);
    }
}
