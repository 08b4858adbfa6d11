//! The watchdog: a thread beside the run that carries this process's
//! progress to the control plane, stops the run when the job has failed,
//! and (on rank 0, which holds every rank's progress) names the ranks
//! that hold a collective up once nothing has moved for the deadline.
//!
//! Each tick it:
//! 1. publishes this process's least advanced local rank
//!    ([`Bootstrap::publish_progress`]);
//! 2. stops the run if the job has failed ([`Bootstrap::failure`]): a dead
//!    or silent peer (the control plane's message), or rank 0's
//!    stuck-collective line;
//! 3. on rank 0, with a deadline: builds the table of every rank's
//!    progress (the control plane's, or this process's rank threads in a
//!    world of one) and asks [`collbench_core::stuck::diagnose`]; a line
//!    means stop: [`Bootstrap::abort_job`] tells every process, and the
//!    local [`Watch`] stops this one's waits. On the other ranks, with a
//!    deadline: if rank 0 itself has fallen silent (stopped, so it names
//!    no one) while this process made no progress, the line
//!    [`collbench_core::stuck::root_silent`] gives, and the same stop;
//! 4. once stopped, gives the run a grace period to return; a run stuck
//!    where it cannot be interrupted (inside a library call) gets the
//!    [`Watchdog::last_resort`], which prints and exits.

use crate::watch::{Fault, Stop, Watch};
use collbench_core::stuck::{diagnose, least, root_silent};
use collbench_core::{Bootstrap, Heard, RankProgress};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What ends a process whose run does not return after a stop (prints the
/// line and exits with the CLI's code for it).
pub type LastResort = Arc<dyn Fn(&Stop) + Send + Sync>;

/// What says a stop's line the moment the job stops (the CLI prints it
/// and remembers that it did), before the run has returned: a run held
/// inside a library call by a stopped peer may take the whole grace
/// period to return, and the user should not wait that long for the line.
pub type Announce = Arc<dyn Fn(&Stop) + Send + Sync>;

/// How the runner watches a run.
#[derive(Clone, Default)]
pub struct Watchdog {
    /// Stop once no rank has moved for this long while inside a case
    /// (`None`: never; failures of the job still stop the run).
    pub deadline: Option<Duration>,
    /// Test hooks: ranks that misbehave on purpose.
    pub faults: Vec<Fault>,
    /// Called once the run has not returned within [`Watchdog::grace`]
    /// after a stop; `None`: wait for it.
    pub last_resort: Option<LastResort>,
    /// How long a stopped run may take to return (`None`: 3 s).
    pub grace: Option<Duration>,
    /// Called once, as soon as the job stops (`None`: nothing said then;
    /// the run's error says it when the run returns).
    pub announce: Option<Announce>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog")
            .field("deadline", &self.deadline)
            .field("faults", &self.faults)
            .field("last_resort", &self.last_resort.is_some())
            .field("grace", &self.grace)
            .field("announce", &self.announce.is_some())
            .finish()
    }
}

/// How long a stopped run may take to return before the last resort. A
/// run that can return (a CPU wait, NCCL's stream poll) does so within a
/// tick or two; one held inside ncclCommAbort by a stopped peer never
/// does, and a process whose job has ended must leave within 5 s of
/// learning it (two emulated hosts on one H200: with 10 s here the
/// survivor of a SIGSTOPped peer ended 15.5 s after the stop, -T 5).
pub(crate) const GRACE: Duration = Duration::from_secs(3);

/// How long [`end_process_now`] waits for stdout and stderr to flush.
const FLUSH_BOUND: Duration = Duration::from_secs(1);

/// Ends the process with `code` at once: stdout and stderr flushed (by
/// the console the binary installed, [`collbench_core::diag::flush`]), no
/// exit handlers, no destructors. For a process whose job has failed or
/// stuck, where a library's teardown may wait forever on a peer that is
/// stopped or gone (NCCL's, seen on two H200s with a SIGSTOPped peer).
pub fn end_process_now(code: i32) -> ! {
    // The flush takes stdout's lock, which another thread may hold while
    // it is itself held (a full pipe, or a writer locked across a check
    // whose teardown waits on a stopped peer: issue 27's faults stage saw
    // both ranks of a stopped `check` stay until killed). So it gets a
    // second, and the process ends whether or not it came back.
    let (tx, rx) = std::sync::mpsc::channel();
    let flushing = std::thread::Builder::new()
        .name("collbench-last-flush".into())
        .spawn(move || {
            collbench_core::diag::flush();
            let _ = tx.send(());
        });
    if flushing.is_ok() {
        let _ = rx.recv_timeout(FLUSH_BOUND);
    }
    // SAFETY: _exit ends the process; nothing of it runs afterwards, so
    // whatever state other threads hold is never observed.
    unsafe { libc::_exit(code) }
}

/// After a run of several processes has failed: ends this process with
/// the last resort unless it has ended by itself within the grace period.
/// The run has returned, but what follows (NCCL's teardown of
/// communicators whose peers are stopped or gone, CUDA's under MPS, exit
/// handlers) can wait forever: on two emulated hosts on one H200 a process
/// that had its line, or whose peers had left, stayed 30-60 s until it was
/// killed. Nothing waits on the timer; it dies with the process.
pub(crate) fn arm_after_failure(config: &Watchdog, why: Stop) {
    let Some(last) = config.last_resort.clone() else {
        return;
    };
    let grace = config.grace.unwrap_or(GRACE);
    let _ = std::thread::Builder::new()
        .name("collbench-exit-deadline".into())
        .spawn(move || {
            std::thread::sleep(grace);
            last(&why);
        });
}

impl Watchdog {
    /// How often the watchdog looks: a twentieth of the deadline, between
    /// 20 ms and 250 ms.
    pub(crate) fn tick(&self) -> Duration {
        let d = self.deadline.unwrap_or(Duration::from_secs(5)) / 20;
        d.clamp(Duration::from_millis(20), Duration::from_millis(250))
    }

    /// Whether a run needs the thread at all: something to watch for.
    pub(crate) fn needed(&self, control: &dyn Bootstrap) -> bool {
        self.deadline.is_some() || control.world_size() > 1 || !self.faults.is_empty()
    }
}

/// Set by the runner when the run returns, so the watchdog ends at once.
#[derive(Default)]
pub(crate) struct Done {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Done {
    pub(crate) fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// A guard that marks the run done when dropped, even by a panic
    /// (the watchdog thread must end for the run's scope to end).
    pub(crate) fn on_drop(&self) -> impl Drop + '_ {
        struct Guard<'a>(&'a Done);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.0.set();
            }
        }
        Guard(self)
    }

    /// Waits up to `d`; `true` once the run is done.
    fn wait(&self, d: Duration) -> bool {
        let g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, d, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

/// What the watchdog needs of the run.
pub(crate) struct Watched<'a> {
    pub control: &'a dyn Bootstrap,
    pub watch: &'a Watch,
    pub config: &'a Watchdog,
    /// The last cases' names by number, as far as this process has got.
    pub names: &'a Mutex<crate::case_names::CaseNames>,
    /// This process's host (for the table of a world of one).
    pub host: &'a str,
    pub done: &'a Done,
}

/// The watchdog's loop; returns when the run is done (or never, after the
/// last resort).
pub(crate) fn watch_over(w: Watched<'_>) {
    let tick = w.config.tick();
    let mut local = LocalTable::default();
    let mut stopped_at: Option<Instant> = None;
    while !w.done.wait(tick) {
        if let Some(since) = stopped_at {
            let grace = w.config.grace.unwrap_or(GRACE);
            if let (true, Some(last), Some(stop)) = (
                since.elapsed() >= grace,
                &w.config.last_resort,
                w.watch.reason(),
            ) {
                last(stop);
                return;
            }
            continue;
        }
        let positions = w.watch.positions();
        if let Some(mine) = least(positions.iter().copied()) {
            w.control.publish_progress(mine);
        }
        if let Some(f) = w.control.failure() {
            stop(&w, Stop::from_failure(f));
            stopped_at = Some(Instant::now());
            continue;
        }
        let Some(deadline) = w.config.deadline else {
            continue;
        };
        // Looked up only while a line is written, not every tick.
        let name = |c: u32| {
            let names = w.names.lock().unwrap_or_else(|e| e.into_inner());
            names.get(c)
        };
        let line = if w.control.rank() != 0 {
            // Rank 0 names everyone, unless rank 0 is what is stopped:
            // then each waiting process says so itself.
            let Some(root) = w.control.root_progress() else {
                continue;
            };
            let first = w.watch.first_rank();
            let mut mine = local.update(&positions, w.host);
            mine.iter_mut().for_each(|r| r.rank += first);
            root_silent(&root, &mine, deadline, &name)
        } else {
            // A world of one watches its own rank threads one by one; a
            // job of several, the control plane's table of processes.
            let table = if w.control.world_size() == 1 {
                local.update(&positions, w.host)
            } else {
                match w.control.progress_of_all() {
                    Some(t) => per_rank(t, w.watch.local_ranks()),
                    None => continue,
                }
            };
            diagnose(&table, deadline, &name)
        };
        if let Some(line) = line {
            w.control
                .abort_job(&collbench_core::PeerFailure::stuck(line.clone()));
            stop(&w, Stop::Stuck(line));
            stopped_at = Some(Instant::now());
        }
    }
}

/// Stops this process's run and says why at once.
fn stop(w: &Watched<'_>, why: Stop) {
    if let Some(announce) = &w.config.announce {
        announce(&why);
    }
    w.watch.stop(why);
}

/// The control plane's table is per process; with `g` ranks in each
/// process, process p stands for ranks p*g .. p*g+g-1.
fn per_rank(table: Vec<RankProgress>, g: usize) -> Vec<RankProgress> {
    if g <= 1 {
        return table;
    }
    table
        .into_iter()
        .flat_map(|p| {
            (0..g).map(move |i| RankProgress {
                rank: p.rank * g + i,
                ..p.clone()
            })
        })
        .collect()
}

/// A world of one: this process's rank threads, and since when each has
/// stayed where it is.
#[derive(Default)]
struct LocalTable {
    last: Vec<(u64, Instant)>,
}

impl LocalTable {
    fn update(
        &mut self,
        positions: &[Option<collbench_core::Progress>],
        host: &str,
    ) -> Vec<RankProgress> {
        let now = Instant::now();
        self.last.resize(positions.len(), (0, now));
        positions
            .iter()
            .zip(&mut self.last)
            .enumerate()
            .map(|(rank, (p, (word, since)))| {
                let packed = p.map_or(0, |p| p.pack());
                if packed != *word {
                    *word = packed;
                    *since = now;
                }
                RankProgress {
                    rank,
                    host: host.to_string(),
                    progress: *p,
                    unchanged_for: now - *since,
                    heard: Heard::InTime,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Phase, Progress};

    #[test]
    fn a_failed_run_is_ended_by_the_last_resort_if_the_process_lingers() {
        let (tx, rx) = std::sync::mpsc::channel::<Stop>();
        let tx = Mutex::new(tx);
        let config = Watchdog {
            last_resort: Some(Arc::new(move |stop: &Stop| {
                let _ = tx.lock().unwrap().send(stop.clone());
            })),
            grace: Some(Duration::from_millis(50)),
            ..Watchdog::default()
        };
        let started = Instant::now();
        arm_after_failure(
            &config,
            Stop::Failed("rank 1 on host n2 disconnected".into()),
        );
        let got = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got, Stop::Failed("rank 1 on host n2 disconnected".into()));
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn processes_stand_for_their_ranks() {
        let p = RankProgress {
            rank: 1,
            host: "h1".into(),
            progress: None,
            unchanged_for: Duration::ZERO,
            heard: Heard::InTime,
        };
        let ranks: Vec<usize> = per_rank(vec![p.clone()], 4)
            .iter()
            .map(|r| r.rank)
            .collect();
        assert_eq!(ranks, [4, 5, 6, 7]);
        assert_eq!(per_rank(vec![p.clone()], 1), vec![p]);
    }

    #[test]
    fn a_local_table_counts_time_from_the_last_change() {
        let mut t = LocalTable::default();
        let a = Progress {
            case: 0,
            iteration: 1,
            phase: Phase::Issue,
        };
        t.update(&[Some(a), Some(a)], "h");
        std::thread::sleep(Duration::from_millis(30));
        let b = Progress { iteration: 2, ..a };
        let table = t.update(&[Some(a), Some(b)], "h");
        assert!(table[0].unchanged_for >= Duration::from_millis(30));
        assert!(table[1].unchanged_for < Duration::from_millis(30));
        assert_eq!(table[1].host, "h");
    }
}
