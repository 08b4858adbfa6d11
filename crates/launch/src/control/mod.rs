//! The control plane: small messages between ranks over TCP, star-shaped
//! around rank 0.
//!
//! Rank 0 listens on the rendezvous port; every other rank connects (with
//! retries until the deadline) and says hello (protocol version, job token,
//! rank, world size, host). Rank 0 refuses, and logs one line about, a
//! hello with a wrong token or world size, a rank out of range, or a rank
//! that already joined: two jobs or a stray client never join each other.
//! When all have joined, rank 0 says Ready.
//!
//! Collectives go through rank 0: a rank sends its part (`Contribute`), rank
//! 0 answers (`Result`). Every call carries a sequence number and its kind,
//! so ranks that call different things fail with a message saying so.
//!
//! Threads: rank 0 drives every connection from one event loop over
//! non-blocking sockets (`hub`), so its cost does not grow by a thread per
//! rank (4096 ranks: 2 threads, about 33 MiB; bench/results/scale.md); its
//! accept queue is sized for the world. The other ranks hold one
//! connection, read by a reader thread, and a heartbeat thread; they
//! retry joining with jittered backoff.
//!
//! Failures: a peer that closes without a goodbye (exit, crash, kill),
//! sends nothing for the timeout (stopped, hung, unreachable) or, on rank
//! 0, reads nothing it is sent for the timeout, fails the job; rank 0 then
//! sends Abort to everyone else, so they fail at once instead of waiting
//! out their own timeouts. Every wait has a deadline. Before Ready a lost
//! connection is not yet a failure: the rank may be retrying a slow join
//! (a hello with the same nonce replaces its earlier connection); one
//! that never comes back is named at the join deadline.
//! After a failure every call returns the first failure's message, which
//! names the rank and host.
//!
//! Progress: each rank publishes where it is (one atomic store of a packed
//! word, `collbench_core::Progress`); its heartbeats carry the latest word,
//! and rank 0 keeps every rank's word, when it last changed and when the
//! rank was last heard, the table a stuck-collective watchdog reads (the
//! other ranks keep rank 0's, to tell when rank 0 itself is stopped).
//! Heartbeats come four times per timeout and per watchdog deadline, at
//! most every 2 s. `abort_job` stops the job with a
//! reason that every rank reports verbatim (a `Stop` message, passed on by
//! rank 0).
//!
//! Files, one job each: this one holds the public face ([`Control`], its
//! calls and its goodbye); `shared` the state the background threads share
//! with the caller; `call` the request/reply machinery of one call
//! (sequence numbers, deadlines, buffering); `rendezvous` joining (hello,
//! refusals, Ready); `hub` rank 0's event loop; `liveness` the other
//! ranks' reader and heartbeat threads, which turn a dead or silent rank 0
//! into a failure naming it; `progress` the table of
//! where every rank is; `tests` runs ranks as
//! threads against hand-made bad clients.

mod call;
mod hub;
mod liveness;
mod progress;
mod rendezvous;
mod shared;
#[cfg(test)]
mod tests;

use crate::wire::{self, Op};
use crate::{LaunchError, LaunchOptions, World};
use call::start_call;
use collbench_core::{PeerFailure, Progress, RankProgress};
use liveness::heartbeat_interval;
use progress::Board;
use rendezvous::{join_as_peer, join_as_root};
use shared::Outbox;
use shared::{Link, Shared};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Locks, ignoring poisoning: a panicked holder leaves nothing half-written
/// that matters here.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A rank as it introduced itself to rank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerHello {
    /// Its rank.
    pub rank: usize,
    /// Its local rank.
    pub local_rank: usize,
    /// Its host, as it names itself ([`World::hostname`]).
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// What it attached to the hello (preflight: its `RankInfo` as JSON).
    pub info: Vec<u8>,
}

/// The control plane of this process. Methods take `&self` and are meant
/// for one thread at a time (they serialize on an internal lock).
pub struct Control {
    world: World,
    timeout: Duration,
    /// `None` for a world of one: no sockets at all.
    link: Option<Link>,
    /// This rank's own hello (what `hellos` reports in a world of one).
    own: PeerHello,
    /// This rank's progress word; on rank 0 everyone's.
    board: Arc<Board>,
    /// The job's failure and failure hook: the link's, or in a world of
    /// one a lone one (so `abort_job` and `failure` behave the same).
    shared: Arc<Shared>,
}

impl Control {
    /// Joins the job: rank 0 listens and waits for everyone, the others
    /// connect to rank 0. Returns when every rank has joined, or fails
    /// after `args.timeout_s` (`--timeout-s`) naming the missing ranks. A
    /// world of one opens no socket.
    pub fn connect(world: &World, args: &LaunchOptions) -> Result<Control, LaunchError> {
        Control::connect_with_info(world, args, Vec::new())
    }

    /// [`Control::connect`], attaching `info` to this rank's hello; rank 0
    /// sees every rank's attachment in [`Control::hellos`] (and in
    /// [`LaunchError::MissingRanks`] when some never come).
    pub fn connect_with_info(
        world: &World,
        args: &LaunchOptions,
        info: Vec<u8>,
    ) -> Result<Control, LaunchError> {
        if world.rank >= world.world_size {
            return Err(LaunchError::Discovery(format!(
                "rank {} is not in a world of {} ranks: check the rank and world size the job gives this process",
                world.rank, world.world_size
            )));
        }
        // The CLI refuses more than a year; a library caller's larger value
        // is a year too, as `now + timeout` must not overflow.
        let timeout =
            Duration::from_secs(args.timeout_s.clamp(1, collbench_core::bounds::MAX_SECONDS));
        let own = PeerHello {
            rank: world.rank,
            local_rank: world.local_rank,
            host: world.hostname.clone(),
            pid: std::process::id(),
            info,
        };
        let watchdog = args.watchdog_s.map(Duration::from_secs);
        let beat = heartbeat_interval(timeout, watchdog);
        let board = Arc::new(Board::new(
            match world.rank {
                0 => world.world_size,
                _ => 1,
            },
            beat,
        ));
        let link = match (world.world_size, world.rank) {
            (1, _) => None,
            (_, 0) => Some(join_as_root(world, timeout, own.clone(), board.clone())?),
            _ => Some(join_as_peer(world, timeout, own.clone(), board.clone())?),
        };
        let shared = match &link {
            Some(link) => Arc::clone(&link.shared),
            None => Shared::new(world, timeout, board.clone(), Outbox::Alone).0,
        };
        Ok(Control {
            world: world.clone(),
            timeout,
            link,
            own,
            board,
            shared,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.world.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.world.world_size
    }

    /// The world this control plane was built for.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Rank 0: every rank's hello (with its attachment), indexed by rank.
    /// Other ranks: only their own.
    pub fn hellos(&self) -> Vec<PeerHello> {
        match &self.link {
            Some(link) if !link.hellos.is_empty() => link.hellos.clone(),
            _ => vec![self.own.clone()],
        }
    }

    /// The job's first failure, if any (names the rank and host). Never
    /// blocks.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Runs `hook` once, on a background thread, when the job fails (a peer
    /// died, went silent or aborted): the place to abort NCCL communicators
    /// that would otherwise wait forever for the dead peer.
    pub fn on_failure(&self, hook: impl Fn(&str) + Send + 'static) {
        *lock(&self.shared.hook) = Some(Box::new(hook));
        if let Some(reason) = self.shared.failure() {
            if let Some(hook) = lock(&self.shared.hook).as_ref() {
                hook(&reason);
            }
        }
    }

    /// Publishes where this rank is: one atomic store. Heartbeats carry
    /// the latest word to rank 0 (so rank 0 sees it within a heartbeat
    /// period, [`LaunchOptions::timeout_s`] / 4 capped at 2 s).
    pub fn publish_progress(&self, progress: Progress) {
        self.board.publish(progress.pack());
    }

    /// Rank 0: every rank's latest progress (as its heartbeats carried it),
    /// its host, how long the progress has stayed the same and whether its
    /// heartbeats still arrive, indexed by rank; rank 0's own entry is what
    /// it published. `None` on the others.
    pub fn progress_of_all(&self) -> Option<Vec<RankProgress>> {
        if self.world.rank != 0 {
            return None;
        }
        let hellos = self.link.as_ref().map(|link| &link.hellos);
        let host_of = |rank: usize| match hellos {
            Some(hellos) => hellos[rank].host.clone(),
            None => self.own.host.clone(),
        };
        Some(self.board.table(host_of))
    }

    /// Ranks other than 0: rank 0's latest progress as its heartbeats carry
    /// it, and whether they still arrive (every rank beats at the period
    /// its [`LaunchOptions`] give, the same for every rank of a job).
    /// `None` on rank 0 and in a world of one.
    pub fn root_progress(&self) -> Option<RankProgress> {
        let link = self.link.as_ref().filter(|_| self.world.rank != 0)?;
        let host = match &link.shared.out {
            Outbox::Root(root) => root.host.clone(),
            _ => "?".into(),
        };
        Some(self.board.entry(0, host))
    }

    /// Stops the whole job with `failure`, verbatim (it names who is at
    /// fault) and with its kind: rank 0 tells everyone, another rank asks
    /// rank 0 to. Every process's pending and later calls fail with exactly
    /// its message, and [`Bootstrap::failure`](collbench_core::Bootstrap::failure)
    /// returns it, kind included (unless the job had failed before).
    pub fn abort_job(&self, failure: &PeerFailure) {
        self.shared.stop(failure.clone(), None);
    }

    /// A world of one: the job's failure (after `abort_job`), if any.
    fn alone(&self) -> Result<(), LaunchError> {
        match self.shared.failure() {
            Some(failure) => Err(LaunchError::Control(failure)),
            None => Ok(()),
        }
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<(), LaunchError> {
        let Some(link) = &self.link else {
            return self.alone();
        };
        let (mut state, step) = start_call(link, Op::Barrier)?;
        if self.world.rank == 0 {
            self.collect(link, &mut state, step, Vec::new())?;
            self.answer_all(link, step, &[])
        } else {
            self.contribute(link, step, &[])?;
            self.await_answer(link, &mut state, step).map(drop)
        }
    }

    /// Rank 0 passes `Some(data)`; every rank returns rank 0's data.
    pub fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, LaunchError> {
        if self.world.rank == 0 && data.is_none() {
            return Err(LaunchError::Control(
                "broadcast: rank 0 must pass the data (a bug in the caller)".into(),
            ));
        }
        let Some(link) = &self.link else {
            self.alone()?;
            return Ok(data.unwrap_or_default());
        };
        let (mut state, step) = start_call(link, Op::Broadcast)?;
        match data {
            Some(data) if self.world.rank == 0 => {
                self.answer_all(link, step, &data)?;
                Ok(data)
            }
            _ => self.await_answer(link, &mut state, step),
        }
    }

    /// Rank 0 gets every rank's data indexed by rank; others get `None`
    /// (and do not wait for rank 0).
    pub fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, LaunchError> {
        let Some(link) = &self.link else {
            self.alone()?;
            return Ok(Some(vec![data]));
        };
        let (mut state, step) = start_call(link, Op::Gather)?;
        if self.world.rank == 0 {
            self.collect(link, &mut state, step, data).map(Some)
        } else {
            self.contribute(link, step, &data).map(|_| None)
        }
    }

    /// Every rank gets every rank's data indexed by rank.
    pub fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, LaunchError> {
        let Some(link) = &self.link else {
            self.alone()?;
            return Ok(vec![data]);
        };
        let (mut state, step) = start_call(link, Op::AllGather)?;
        if self.world.rank == 0 {
            let parts = self.collect(link, &mut state, step, data)?;
            self.answer_all(link, step, &wire::pack(&parts))?;
            Ok(parts)
        } else {
            self.contribute(link, step, &data)?;
            let packed = self.await_answer(link, &mut state, step)?;
            wire::unpack(&packed)
                .filter(|parts| parts.len() == self.world.world_size)
                .ok_or_else(|| {
                    link.shared
                        .fail(format!("{step}: rank 0 sent a malformed answer"), None)
                })
        }
    }

    /// Tells every other rank to stop with `reason` (their calls fail with
    /// a message naming this rank); this rank's later calls fail too.
    pub fn abort(&self, reason: &str) {
        if let Some(link) = &self.link {
            let who = format!("rank {} on host {}", self.world.rank, self.world.hostname);
            link.shared.fail(format!("{who} aborted: {reason}"), None);
        }
    }

    /// Test aid: drop every connection without the goodbye, as a crash
    /// would, so tests of failure handling can run ranks as threads.
    #[doc(hidden)]
    pub fn crash_for_tests(self) {
        self.shared.close();
        std::mem::forget(self);
    }
}

impl Drop for Control {
    /// Says goodbye to every peer, so closing is not mistaken for a crash.
    fn drop(&mut self) {
        if self.link.is_some() {
            self.shared.goodbye();
        }
    }
}

/// What the runner, the checks and the backends see of the control plane.
impl collbench_core::Bootstrap for Control {
    fn rank(&self) -> usize {
        Control::rank(self)
    }
    fn world_size(&self) -> usize {
        Control::world_size(self)
    }
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        Ok(Control::broadcast(self, data)?)
    }
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Ok(Control::gather(self, data)?)
    }
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        Ok(Control::all_gather(self, data)?)
    }
    fn publish_progress(&self, progress: Progress) {
        Control::publish_progress(self, progress)
    }
    fn progress_of_all(&self) -> Option<Vec<RankProgress>> {
        Control::progress_of_all(self)
    }
    fn root_progress(&self) -> Option<RankProgress> {
        Control::root_progress(self)
    }
    fn abort_job(&self, failure: &PeerFailure) {
        Control::abort_job(self, failure)
    }
    fn failure(&self) -> Option<PeerFailure> {
        self.shared.first_failure()
    }
}
