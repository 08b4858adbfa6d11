//! How far a run has come, for people: where it is (collective, size),
//! how long it has run and about how long is left. On a terminal the
//! progress bar shows it; in a batch job (a Slurm output file, a pod's
//! log: stderr is no terminal) [`BatchLog`] writes it as a comment line
//! when each collective starts and at least every 10 s, so a long sweep
//! never looks hung. A run is quiet for its first interval: a short run,
//! or one that fails at once, keeps stderr to its one line.
//!
//! The estimate weighs each case by its bytes plus a fixed latency share
//! ([`LATENCY_BYTES`]): a sweep spends most of its time in its largest
//! sizes, so "cases done / cases planned" would promise far too early an
//! end. The time per weight measured so far prices what is left.

use collbench_core::size::{format_bytes, ByteStyle};
use collbench_core::Collective;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a small case costs, counted as bytes: launch and synchronisation
/// take about as long as moving this much data.
const LATENCY_BYTES: u64 = 1 << 20;

/// The longest a batch log stays silent.
pub const BATCH_EVERY: Duration = Duration::from_secs(10);

/// Hidden test hook: the batch log's interval in milliseconds, so a test
/// sees several lines in a short run. Not for users.
const EVERY_ENV: &str = "COLLBENCH_TEST_PROGRESS_EVERY_MS";

/// The run's cases in the order the runner measures them: each collective
/// in turn, every cycle, variant and size.
#[derive(Debug, Clone)]
pub struct Sweep {
    collectives: Vec<Collective>,
    /// (index into `collectives`, bytes) per case.
    cases: Vec<(usize, u64)>,
    /// `-N 0`: the sweep repeats until stopped, nothing is "left".
    forever: bool,
}

impl Sweep {
    /// Cases in one pass of the sweep; 0 for a run that repeats until
    /// stopped (a progress bar without an end).
    pub fn len(&self) -> u64 {
        if self.forever {
            0
        } else {
            self.cases.len() as u64
        }
    }

    /// `cases_per_size(coll)`: how many cases each size of `coll` has
    /// (its variants times cycles); `forever` for `-N 0`, which repeats
    /// one cycle until stopped.
    pub fn new(
        collectives: &[Collective],
        sizes: &[u64],
        cases_per_size: impl Fn(Collective) -> usize,
        forever: bool,
    ) -> Sweep {
        let mut cases = Vec::new();
        for (i, &coll) in collectives.iter().enumerate() {
            for _ in 0..cases_per_size(coll) {
                cases.extend(sizes.iter().map(|&b| (i, b)));
            }
        }
        Sweep {
            collectives: collectives.to_vec(),
            cases,
            forever,
        }
    }
}

/// Where a run is in its [`Sweep`] and since when.
#[derive(Debug)]
pub struct Tracker {
    sweep: Sweep,
    started: Instant,
    /// The next case to finish.
    next: usize,
    /// The weight finished so far.
    done_weight: u64,
    /// Set once the first collective begins.
    begun: bool,
}

fn weight(bytes: u64) -> u64 {
    bytes.saturating_add(LATENCY_BYTES)
}

impl Tracker {
    /// A run of `sweep` that starts now.
    pub fn new(sweep: Sweep, started: Instant) -> Tracker {
        Tracker {
            sweep,
            started,
            next: 0,
            done_weight: 0,
            begun: false,
        }
    }

    /// `coll` starts: its first case is next (a collective skipped before
    /// it leaves its cases out of the count).
    pub fn begin_collective(&mut self, coll: Collective) {
        self.begun = true;
        if let Some(i) = self.sweep.collectives.iter().position(|&c| c == coll) {
            if let Some(first) = self.sweep.cases.iter().position(|&(c, _)| c == i) {
                self.next = self.next.max(first);
            }
        }
    }

    /// One case finished.
    pub fn row(&mut self) {
        if let Some(&(_, bytes)) = self.sweep.cases.get(self.next) {
            self.done_weight += weight(bytes);
        }
        self.next += 1;
        if self.sweep.forever && self.next >= self.sweep.cases.len() {
            self.next = 0;
        }
    }

    /// About how long is left at `now`: `None` before the first case
    /// ends, and for a run that repeats until stopped.
    pub fn left(&self, now: Instant) -> Option<Duration> {
        if self.done_weight == 0 || self.sweep.forever {
            return None;
        }
        let rest: u64 = self
            .sweep
            .cases
            .iter()
            .skip(self.next)
            .map(|&(_, b)| weight(b))
            .sum();
        let per_weight = now.duration_since(self.started).as_secs_f64() / self.done_weight as f64;
        Some(Duration::from_secs_f64(per_weight * rest as f64))
    }

    /// `all_gather 5/11, 64 MiB`: the collective in progress, its place
    /// among the run's, and the size being measured.
    pub fn position(&self) -> Option<String> {
        let case = self.sweep.cases.get(self.next).or(self.sweep.cases.last());
        let &(i, bytes) = case.filter(|_| self.begun)?;
        Some(format!(
            "{} {}/{}, {}",
            self.sweep.collectives[i].name(),
            i + 1,
            self.sweep.collectives.len(),
            format_bytes(bytes, ByteStyle::Table)
        ))
    }

    /// The batch log's line at `now` (without the leading `# `), `None`
    /// before the first collective begins.
    pub fn line(&self, now: Instant) -> Option<String> {
        let mut s = format!(
            "collbench: {}, {} elapsed",
            self.position()?,
            clock(now.duration_since(self.started))
        );
        if let Some(left) = self.left(now) {
            s += &format!(", ~{} left", clock(left));
        }
        Some(s)
    }
}

/// `40s`, `1m12s`, `2h05m`: whole seconds, the two largest units.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec:02}s"),
        (h, min, _) => format!("{h}h{min:02}m"),
    }
}

/// A thread that writes the tracker's line to stderr whenever none was
/// written for the interval; it stops when dropped.
pub struct BatchLog {
    shared: Arc<Mutex<Shared>>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    tracker: Tracker,
    /// When the last line was written (or was due, with nothing to say).
    last_line: Instant,
    /// The end of the quiet first interval.
    quiet_until: Instant,
}

impl BatchLog {
    /// Starts the thread over `tracker`, writing at least every
    /// [`BATCH_EVERY`] (or the test hook's interval).
    pub fn start(tracker: Tracker) -> BatchLog {
        let every = std::env::var(EVERY_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(BATCH_EVERY, Duration::from_millis);
        let now = Instant::now();
        let shared = Arc::new(Mutex::new(Shared {
            tracker,
            last_line: now,
            quiet_until: now + every.mul_f64(0.95),
        }));
        let (stop, stopped) = mpsc::channel();
        let s = shared.clone();
        let thread = std::thread::spawn(move || loop {
            // Woken a little early, so a late wake-up never makes a gap
            // longer than the interval.
            let due = lock(&s).last_line + every.mul_f64(0.95);
            match stopped.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Err(RecvTimeoutError::Timeout) => {
                    let mut g = lock(&s);
                    if g.last_line + every.mul_f64(0.95) <= Instant::now() {
                        write_line(&mut g);
                    }
                }
                _ => return,
            }
        });
        BatchLog {
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Runs `f` on the tracker; `say_now` writes the line at once, unless
    /// the run is still in its quiet first interval.
    pub fn update(&self, say_now: bool, f: impl FnOnce(&mut Tracker)) {
        let mut g = lock(&self.shared);
        f(&mut g.tracker);
        if say_now && Instant::now() >= g.quiet_until {
            write_line(&mut g);
        }
    }
}

/// The lock, even if a panicking writer poisoned it (the tracker is plain
/// counters, never left half-updated in a way that matters).
fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the line, if there is one yet (a rank other than 0, or a run
/// still setting up, has none); the next is due an interval later either way.
fn write_line(g: &mut Shared) {
    let now = Instant::now();
    if let Some(line) = g.tracker.line(now) {
        crate::stdout::say(format!("# {line}"));
    }
    g.last_line = now;
}

impl Drop for BatchLog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Collective::{AllGather, AllReduce, Broadcast};

    fn tracker(start: Instant) -> Tracker {
        let sweep = Sweep::new(
            &[AllReduce, AllGather],
            &[8, 1 << 20, 64 << 20],
            |_| 1,
            false,
        );
        Tracker::new(sweep, start)
    }

    #[test]
    fn the_line_names_collective_place_size_and_times() {
        let t0 = Instant::now();
        let mut t = tracker(t0);
        assert_eq!(t.line(t0), None, "nothing before the first collective");
        t.begin_collective(AllReduce);
        assert_eq!(
            t.line(t0 + Duration::from_secs(3)).unwrap(),
            "collbench: all_reduce 1/2, 8 B, 3s elapsed"
        );
        t.row();
        t.row();
        t.row();
        t.begin_collective(AllGather);
        assert_eq!(
            t.line(t0 + Duration::from_secs(72)).unwrap(),
            "collbench: all_gather 2/2, 8 B, 1m12s elapsed, ~1m12s left"
        );
    }

    #[test]
    fn large_sizes_weigh_more_than_small_ones() {
        let t0 = Instant::now();
        let mut t = tracker(t0);
        t.begin_collective(AllReduce);
        t.row(); // 8 B: weight 1 MiB of the collective's 67 MiB
        let left = t.left(t0 + Duration::from_secs(1)).unwrap();
        // About 1 s per MiB of weight: the rest is 2 + 65 + 1 + 2 + 65.
        assert_eq!(clock(left), "2m15s");
    }

    #[test]
    fn a_skipped_collective_is_not_waited_for() {
        let t0 = Instant::now();
        let sweep = Sweep::new(&[Broadcast, AllReduce], &[1 << 20], |_| 1, false);
        let mut t = Tracker::new(sweep, t0);
        t.begin_collective(AllReduce);
        assert_eq!(t.position().unwrap(), "all_reduce 2/2, 1 MiB");
        t.row();
        assert_eq!(t.left(t0 + Duration::from_secs(5)), Some(Duration::ZERO));
    }

    #[test]
    fn a_run_until_stopped_has_no_end() {
        let t0 = Instant::now();
        let sweep = Sweep::new(&[AllReduce], &[8, 16], |_| 1, true);
        let mut t = Tracker::new(sweep, t0);
        t.begin_collective(AllReduce);
        for _ in 0..5 {
            t.row();
        }
        assert_eq!(t.left(t0 + Duration::from_secs(9)), None);
        assert_eq!(t.position().unwrap(), "all_reduce 1/1, 16 B");
    }

    #[test]
    fn clock_reads_like_a_person_would_write_it() {
        let s = Duration::from_secs;
        assert_eq!(clock(s(0)), "0s");
        assert_eq!(clock(s(40)), "40s");
        assert_eq!(clock(s(72)), "1m12s");
        assert_eq!(clock(s(7500)), "2h05m");
    }
}
