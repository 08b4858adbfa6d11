//! What the calling thread and the background threads (readers, heartbeat,
//! acceptor) share: the peers, the job's first failure, the event channel.

use super::progress::Board;
use super::PeerHello;
use crate::wire::{self, Msg, Op};
use crate::{LaunchError, World};
use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub(super) struct Link {
    pub(super) shared: Arc<Shared>,
    pub(super) state: Mutex<State>,
    /// Rank 0 only: every rank's hello, indexed by rank.
    pub(super) hellos: Vec<PeerHello>,
}

/// What the calling thread owns: incoming events and what is buffered.
pub(super) struct State {
    pub(super) events: Receiver<Event>,
    /// Per rank, parts (rank 0) or answers (others) that arrived early.
    pub(super) pending: Vec<VecDeque<Part>>,
    /// Per rank: said goodbye.
    pub(super) left: Vec<bool>,
    /// Sequence number of the next call.
    pub(super) seq: u64,
}

pub(super) struct Part {
    pub(super) seq: u64,
    pub(super) op: Op,
    pub(super) data: Vec<u8>,
}

pub(super) enum Event {
    Frame {
        from: usize,
        msg: Msg,
        payload: Vec<u8>,
    },
    Left(usize),
    Failed,
}

pub(super) type FailureHook = Box<dyn Fn(&str) + Send>;

/// What the background threads share with the calling thread.
pub(super) struct Shared {
    pub(super) world_size: usize,
    pub(super) timeout: Duration,
    pub(super) token: String,
    pub(super) peers: Mutex<Vec<Option<Arc<Peer>>>>,
    pub(super) failure: Mutex<Option<String>>,
    pub(super) hook: Mutex<Option<FailureHook>>,
    pub(super) events: Mutex<Sender<Event>>,
    /// Set when this process closes: background threads stop, quietly.
    pub(super) closing: AtomicBool,
    /// Rank 0: every rank joined; later hellos are refused.
    pub(super) complete: AtomicBool,
    /// This rank's progress word and, on rank 0, everyone's.
    pub(super) board: Arc<Board>,
}

/// The other end of one connection.
pub(super) struct Peer {
    pub(super) rank: usize,
    pub(super) host: String,
    pub(super) writer: Mutex<TcpStream>,
    pub(super) left: AtomicBool,
    /// Its reader thread has ended (the connection is over).
    pub(super) reader_done: AtomicBool,
}

impl Peer {
    pub(super) fn send(&self, msg: &Msg, payload: &[u8]) -> std::io::Result<()> {
        wire::write_frame(&mut *lock(&self.writer), msg, payload)
    }
    pub(super) fn name(&self) -> String {
        format!("rank {} on host {}", self.rank, self.host)
    }
}

/// Locks, ignoring poisoning: a panicked holder leaves nothing half-written
/// that matters here.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(super) fn new(
        world: &World,
        timeout: Duration,
        events: Sender<Event>,
        board: Arc<Board>,
    ) -> Shared {
        Shared {
            world_size: world.world_size,
            timeout,
            token: world.token.clone(),
            peers: Mutex::new(vec![None; world.world_size]),
            failure: Mutex::new(None),
            hook: Mutex::new(None),
            events: Mutex::new(events),
            closing: AtomicBool::new(false),
            complete: AtomicBool::new(false),
            board,
        }
    }

    /// Stops the background threads and drops every connection (no
    /// goodbye: used when joining failed, the failure is already sent).
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        for peer in self.peers() {
            let _ = lock(&peer.writer).shutdown(Shutdown::Both);
        }
    }

    pub(super) fn peers(&self) -> Vec<Arc<Peer>> {
        lock(&self.peers).iter().flatten().cloned().collect()
    }

    pub(super) fn event(&self, event: Event) {
        let _ = lock(&self.events).send(event);
    }

    pub(super) fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Records the job's first failure, tells every peer but `culprit`
    /// (rank 0 fans out to all; others tell rank 0), and wakes the caller.
    /// Returns the recorded (first) failure as an error.
    pub(super) fn fail(&self, reason: String, culprit: Option<usize>) -> LaunchError {
        self.fail_with(reason, culprit, |reason| Msg::Abort { reason })
    }

    /// [`Shared::fail`], but every rank fails with `reason` verbatim
    /// (`abort_job`: the reason already names who is at fault).
    pub(super) fn stop(&self, reason: String, culprit: Option<usize>) -> LaunchError {
        self.fail_with(reason, culprit, |reason| Msg::Stop { reason })
    }

    fn fail_with(
        &self,
        reason: String,
        culprit: Option<usize>,
        notice: fn(String) -> Msg,
    ) -> LaunchError {
        {
            let mut failure = lock(&self.failure);
            if let Some(first) = failure.as_ref() {
                return LaunchError::Control(first.clone());
            }
            *failure = Some(reason.clone());
        }
        for peer in self.peers() {
            if Some(peer.rank) != culprit && !peer.left.load(Ordering::SeqCst) {
                let _ = peer.send(&notice(reason.clone()), &[]);
            }
        }
        // After the fan-out (the hook may be slow: aborting NCCL), before
        // waking the caller (whose call then returns with NCCL aborted).
        if let Some(hook) = lock(&self.hook).as_ref() {
            hook(&reason);
        }
        self.event(Event::Failed);
        LaunchError::Control(reason)
    }
}

pub(super) fn new_state(events: Receiver<Event>, n: usize) -> State {
    State {
        events,
        pending: (0..n).map(|_| VecDeque::new()).collect(),
        left: vec![false; n],
        seq: 0,
    }
}
