//! [`Watch`]: what this process's ranks publish about where they are, and
//! how the job tells them to stop.
//!
//! The runner makes one per run and hands it to the backend
//! ([`crate::Backend::set_watch`]). In the timed loop a backend publishes
//! with [`Watch::calling`] as it enters each call and [`Watch::at`] after
//! it returns: each one relaxed atomic store to a cache line of that rank's
//! own, no syscall, no lock (and the fault hooks' check, a branch on an
//! empty list). Waits that can last (barriers, stream polls) say so with
//! [`Watch::waiting`], look at [`Watch::is_stopped`] and give up once the
//! watchdog ([`crate::watchdog`]) has stopped the job.
//!
//! The fault hooks ([`Fault`]) are for tests: a rank that stops calling,
//! one that stalls in a call for a while, one that exits mid-run.

use collbench_core::{Phase, Progress};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Why the job stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A collective made no progress for the deadline: the
    /// stuck-collective line naming who is behind (exit 5).
    Stuck(String),
    /// The job failed another way (a dead or silent peer): the control
    /// plane's message naming it.
    Failed(String),
}

impl Stop {
    /// The job's failure as the control plane reports it, by its kind: a
    /// stuck collective (rank 0's line) or another failure.
    pub fn from_failure(failure: collbench_core::PeerFailure) -> Stop {
        match failure.kind {
            collbench_core::FailureKind::Stuck => Stop::Stuck(failure.message),
            collbench_core::FailureKind::Peer => Stop::Failed(failure.message),
        }
    }

    /// The one line that says why.
    pub fn message(&self) -> &str {
        match self {
            Stop::Stuck(m) | Stop::Failed(m) => m,
        }
    }
}

/// A wait gave up because the job stopped (the reason is in
/// [`Watch::reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// A backend's error for a run the job stopped (the runner reports the
/// stop's own reason instead).
pub fn stopped_error(watch: Option<&Watch>) -> crate::BackendError {
    let why = watch
        .and_then(|w| w.reason())
        .map_or("the job stopped", |s| s.message());
    crate::BackendError::Timeout(why.to_string())
}

/// What a fault hook makes its rank do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Never make the call, nor any later one (the process stays alive
    /// and its heartbeat flows) until the job is stopped.
    StopCalling,
    /// Stall in the call for this long (or until the job is stopped).
    Sleep(Duration),
    /// Exit the process at once, without a goodbye, as a crash would.
    Exit,
}

/// A fault hook: rank `rank` does `kind` at iteration `iteration` of case
/// `case` (cases count placements in the plan's order from 0; iterations
/// count warm-up ones too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub rank: usize,
    pub case: u32,
    pub iteration: u32,
}

impl Fault {
    /// Parses `RANK:CASE:ITERATION` (and `:SECONDS` for a sleep; without
    /// it, the sleep lasts until the job is stopped).
    pub fn parse(kind: FaultKind, s: &str) -> Result<Fault, String> {
        let fields: Vec<&str> = s.split(':').collect();
        let sleep = matches!(kind, FaultKind::Sleep(_));
        let usage = || {
            let tail = if sleep { "[:SECONDS]" } else { "" };
            format!("'{s}' is not RANK:CASE:ITERATION{tail} (whole numbers)")
        };
        let n = |i: usize| fields[i].parse::<u64>().map_err(|_| usage());
        if fields.len() != 3 && !(sleep && fields.len() == 4) {
            return Err(usage());
        }
        let kind = match (kind, fields.len()) {
            (FaultKind::Sleep(_), 4) => FaultKind::Sleep(Duration::from_secs(n(3)?)),
            (FaultKind::Sleep(_), _) => FaultKind::Sleep(Duration::MAX),
            (k, _) => k,
        };
        let small = |v: u64| u32::try_from(v).map_err(|_| usage());
        Ok(Fault {
            kind,
            rank: n(0)? as usize,
            case: small(n(1)?)?,
            iteration: small(n(2)?)?,
        })
    }
}

/// One rank's published word, alone on its cache line so that rank
/// threads publishing every iteration do not slow each other down.
#[repr(align(128))]
#[derive(Default)]
struct Word(AtomicU64);

/// Where this process's ranks are, and whether the job has stopped.
pub struct Watch {
    /// Global rank of local rank 0.
    first_rank: usize,
    /// The case being run (set by the runner between cases).
    case: AtomicU32,
    /// Per local rank: its packed [`Progress`].
    words: Box<[Word]>,
    stopped: AtomicBool,
    stop: OnceLock<Stop>,
    faults: Vec<Fault>,
}

/// How often stoppable sleeps look at the stop flag.
const SLICE: Duration = Duration::from_millis(20);

impl Watch {
    /// A watch over `local_ranks` ranks, the first being global rank
    /// `first_rank`, with these fault hooks.
    pub fn new(local_ranks: usize, first_rank: usize, faults: Vec<Fault>) -> Watch {
        Watch {
            first_rank,
            case: AtomicU32::new(0),
            words: (0..local_ranks.max(1)).map(|_| Word::default()).collect(),
            stopped: AtomicBool::new(false),
            stop: OnceLock::new(),
            faults,
        }
    }

    /// Number of local ranks watched.
    pub fn local_ranks(&self) -> usize {
        self.words.len()
    }

    /// Global rank of local rank 0.
    pub fn first_rank(&self) -> usize {
        self.first_rank
    }

    fn publish(&self, local: usize, iteration: u32, phase: Phase) {
        let case = self.case.load(Ordering::Relaxed);
        if let Some(w) = self.words.get(local) {
            let p = Progress {
                case,
                iteration,
                phase,
            };
            w.0.store(p.pack(), Ordering::Relaxed);
        }
    }

    /// Runner: every local rank is between cases, next `case` (setting it
    /// up, or exchanging the results of the one before).
    pub fn begin_case(&self, case: u32) {
        self.case.store(case, Ordering::Relaxed);
        for r in 0..self.words.len() {
            self.publish(r, 0, Phase::Idle);
        }
    }

    /// Runner, as it hands the case to the backend: every local rank is
    /// about to make its first call (iteration 0), until the backend says
    /// more. No fault hook acts here.
    pub fn entering(&self) {
        for r in 0..self.words.len() {
            self.publish(r, 0, Phase::Issue);
        }
    }

    /// Runner: every local rank checks the results of the current case.
    pub fn checking(&self) {
        for r in 0..self.words.len() {
            self.publish(r, 0, Phase::Check);
        }
    }

    /// Backend, in the timed loop: local rank `local` has returned from
    /// the calls before `iteration` (0 before the first call) and has not
    /// entered that one. One relaxed store; the hooks that stop calling or
    /// exit act here. `Err` once the job is stopped during a hook.
    #[inline]
    pub fn at(&self, local: usize, iteration: u32) -> Result<(), Stopped> {
        self.mark(local, iteration, Phase::Issue)
    }

    /// Backend, in the timed loop: local rank `local` enters the call of
    /// `iteration`. One relaxed store; the hook that stalls in a call acts
    /// here.
    #[inline]
    pub fn calling(&self, local: usize, iteration: u32) -> Result<(), Stopped> {
        self.mark(local, iteration, Phase::Call)
    }

    /// Publishes `phase` at `iteration`, then lets a fault hook act (the
    /// ones for inside a call only in [`Phase::Call`]).
    #[inline]
    fn mark(&self, local: usize, iteration: u32, phase: Phase) -> Result<(), Stopped> {
        self.publish(local, iteration, phase);
        if self.faults.is_empty() {
            return Ok(());
        }
        self.fault(local, iteration, phase == Phase::Call)
    }

    /// [`Watch::at`] for every local rank (one thread driving them all).
    pub fn at_all(&self, iteration: u32) -> Result<(), Stopped> {
        (0..self.words.len()).try_for_each(|r| self.at(r, iteration))
    }

    /// [`Watch::calling`] for every local rank.
    pub fn calling_all(&self, iteration: u32) -> Result<(), Stopped> {
        (0..self.words.len()).try_for_each(|r| self.calling(r, iteration))
    }

    /// Backend: local rank `local`, inside its call, waits for peers (at
    /// a barrier): it waits at that iteration. Anywhere else it stays where
    /// it is.
    pub fn waiting(&self, local: usize) {
        self.wait_from(local, false);
    }

    /// Backend, one thread driving every local rank: they wait for the
    /// calls they made to complete: inside a call, at that iteration;
    /// after the last call, at the last one.
    pub fn completing_all(&self) {
        for r in 0..self.words.len() {
            self.wait_from(r, true);
        }
    }

    fn wait_from(&self, local: usize, after_calls: bool) {
        let Some(w) = self.words.get(local) else {
            return;
        };
        let iteration = match Progress::unpack(w.0.load(Ordering::Relaxed)) {
            Some(p) if p.phase == Phase::Call => p.iteration,
            Some(p) if after_calls && p.phase == Phase::Issue && p.iteration > 0 => p.iteration - 1,
            _ => return,
        };
        self.publish(local, iteration, Phase::Wait);
    }

    /// Backend: local rank `local` meets its peers before the call of
    /// `iteration` (the timed loop's start): it counts as inside that
    /// call, so that waiting there reads as waiting at that iteration.
    /// No hook acts here.
    pub fn arriving(&self, local: usize, iteration: u32) {
        self.publish(local, iteration, Phase::Call);
    }

    /// Every local rank's last published position.
    pub fn positions(&self) -> Vec<Option<Progress>> {
        self.words
            .iter()
            .map(|w| Progress::unpack(w.0.load(Ordering::Relaxed)))
            .collect()
    }

    /// Whether the job has stopped; cheap enough for a poll loop.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops the job (the first reason wins); `true` if this was first.
    pub fn stop(&self, why: Stop) -> bool {
        let first = self.stop.set(why).is_ok();
        self.stopped.store(true, Ordering::Release);
        first
    }

    /// Why the job stopped, once it has.
    pub fn reason(&self) -> Option<&Stop> {
        self.stop.get()
    }

    /// Sleeps `d` (`Duration::MAX`: until stopped), waking early with
    /// `Err` when the job stops.
    pub fn sleep(&self, d: Duration) -> Result<(), Stopped> {
        let end = Instant::now().checked_add(d);
        loop {
            if self.is_stopped() {
                return Err(Stopped);
            }
            let left = end.map_or(SLICE, |e| e.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(SLICE));
        }
    }

    /// The fault hooks of local rank `local` at `iteration` of the
    /// current case: inside the call (`in_call`) or before it.
    #[cold]
    fn fault(&self, local: usize, iteration: u32, in_call: bool) -> Result<(), Stopped> {
        let rank = self.first_rank + local;
        let case = self.case.load(Ordering::Relaxed);
        for f in &self.faults {
            let sleep = matches!(f.kind, FaultKind::Sleep(_));
            if (f.rank, f.case, f.iteration) != (rank, case, iteration) || sleep != in_call {
                continue;
            }
            match f.kind {
                FaultKind::StopCalling => self.sleep(Duration::MAX)?,
                FaultKind::Sleep(d) => self.sleep(d)?,
                FaultKind::Exit => {
                    collbench_core::diag::line(&format!(
                        "collbench: test hook: rank {rank} exits at case {case} iteration {iteration}"
                    ));
                    std::process::exit(1);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_say_what_they_expect() {
        let f = Fault::parse(FaultKind::StopCalling, "3:1:7").unwrap();
        assert_eq!((f.rank, f.case, f.iteration), (3, 1, 7));
        let f = Fault::parse(FaultKind::Sleep(Duration::ZERO), "0:0:2:5").unwrap();
        assert_eq!(f.kind, FaultKind::Sleep(Duration::from_secs(5)));
        let f = Fault::parse(FaultKind::Sleep(Duration::ZERO), "0:0:2").unwrap();
        assert_eq!(f.kind, FaultKind::Sleep(Duration::MAX));
        let e = Fault::parse(FaultKind::Exit, "1:2").unwrap_err();
        assert_eq!(e, "'1:2' is not RANK:CASE:ITERATION (whole numbers)");
        assert!(Fault::parse(FaultKind::Exit, "1:2:3:4").is_err());
        assert!(Fault::parse(FaultKind::Exit, "a:2:3").is_err());
    }

    #[test]
    fn ranks_publish_where_they_are() {
        let w = Watch::new(2, 4, Vec::new());
        assert_eq!(w.positions(), [None, None]);
        w.begin_case(3);
        w.at(1, 5).unwrap();
        w.calling(1, 5).unwrap();
        w.waiting(1);
        w.waiting(0); // between cases: stays Idle
        let at = |iteration, phase| {
            Some(Progress {
                case: 3,
                iteration,
                phase,
            })
        };
        assert_eq!(w.positions(), [at(0, Phase::Idle), at(5, Phase::Wait)]);
        // After the last call (6 returned from): waits at the last one;
        // at a barrier between calls, stays.
        w.at(0, 6).unwrap();
        w.waiting(0);
        assert_eq!(w.positions()[0], at(6, Phase::Issue));
        w.completing_all();
        assert_eq!(w.positions()[0], at(5, Phase::Wait));
        w.checking();
        assert_eq!(w.positions(), [at(0, Phase::Check), at(0, Phase::Check)]);
    }

    #[test]
    fn a_stopped_rank_wakes_when_the_job_stops_and_the_first_reason_wins() {
        let hook = Fault::parse(FaultKind::StopCalling, "5:0:2").unwrap();
        let w = Watch::new(2, 4, vec![hook]);
        w.begin_case(0);
        w.at(1, 1).unwrap();
        w.at(0, 2).unwrap(); // rank 4: not the hooked rank
        std::thread::scope(|s| {
            let stuck = s.spawn(|| w.at(1, 2));
            std::thread::sleep(Duration::from_millis(50));
            assert!(!stuck.is_finished(), "rank 5 must stop calling");
            assert!(w.stop(Stop::Stuck("line".into())));
            assert_eq!(stuck.join().unwrap(), Err(Stopped));
        });
        assert!(!w.stop(Stop::Failed("later".into())));
        assert_eq!(w.reason(), Some(&Stop::Stuck("line".into())));
    }

    #[test]
    fn a_finite_sleep_hook_returns_by_itself() {
        let hook = Fault::parse(FaultKind::Sleep(Duration::ZERO), "0:0:0:0").unwrap();
        let w = Watch::new(1, 0, vec![hook]);
        w.begin_case(0);
        assert_eq!(w.calling(0, 0), Ok(()));
        // A stall is inside the call; a stop before it.
        let hook = Fault::parse(FaultKind::Sleep(Duration::ZERO), "0:0:0").unwrap();
        let w = Watch::new(1, 0, vec![hook]);
        w.begin_case(0);
        assert_eq!(w.at(0, 0), Ok(()));
    }
}
