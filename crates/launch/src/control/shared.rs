//! What the calling thread and the background threads (rank 0's event
//! loop; elsewhere the reader and heartbeat) share: the way to the peers,
//! the job's first failure, the event channel.

use super::hub::handle::{Command, HubHandle};
use super::progress::Board;
use super::{lock, PeerHello};
use crate::wire::{self, Msg, Op};
use crate::{LaunchError, World};
use collbench_core::PeerFailure;
use std::collections::VecDeque;
use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Rank 0: every rank has joined (Ready is on its way to them).
    Joined,
    /// Rank 0: what its event loop received in one turn.
    Batch(Vec<Event>),
}

pub(super) type FailureHook = Box<dyn Fn(&str) + Send>;

/// What the background threads share with the calling thread.
pub(super) struct Shared {
    pub(super) world_size: usize,
    pub(super) timeout: Duration,
    pub(super) token: String,
    /// How this process reaches its peers.
    pub(super) out: Outbox,
    pub(super) failure: Mutex<Option<PeerFailure>>,
    pub(super) hook: Mutex<Option<FailureHook>>,
    pub(super) events: Mutex<Sender<Event>>,
    /// Set when this process closes: background threads stop, quietly.
    pub(super) closing: AtomicBool,
    /// This rank's progress word and, on rank 0, everyone's.
    pub(super) board: Arc<Board>,
}

/// How a process reaches its peers.
pub(super) enum Outbox {
    /// Rank 0: its event loop owns every connection; calls queue frames.
    Hub(HubHandle),
    /// Other ranks: the one connection, to rank 0, written directly.
    Root(Arc<Peer>),
    /// A world of one: nobody to tell.
    Alone,
}

/// The other end of one connection (other ranks: rank 0).
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

impl Shared {
    /// The shared state and the receiving end of its event channel.
    pub(super) fn new(
        world: &World,
        timeout: Duration,
        board: Arc<Board>,
        out: Outbox,
    ) -> (Arc<Shared>, Receiver<Event>) {
        let (events, received) = std::sync::mpsc::channel();
        let shared = Shared {
            world_size: world.world_size,
            timeout,
            token: world.token.clone(),
            out,
            failure: Mutex::new(None),
            hook: Mutex::new(None),
            events: Mutex::new(events),
            closing: AtomicBool::new(false),
            board,
        };
        (Arc::new(shared), received)
    }

    /// Rank 0's event loop (only rank 0 has one).
    pub(super) fn hub(&self) -> &HubHandle {
        match &self.out {
            Outbox::Hub(hub) => hub,
            _ => unreachable!("only rank 0 has an event loop"),
        }
    }

    /// Whether `rank` said goodbye.
    pub(super) fn left(&self, rank: usize) -> bool {
        match &self.out {
            Outbox::Hub(hub) => hub.left[rank].load(Ordering::SeqCst),
            Outbox::Root(peer) => peer.left.load(Ordering::SeqCst),
            Outbox::Alone => false,
        }
    }

    /// Stops the background threads and drops every connection (no
    /// goodbye: used when joining failed, the failure is already sent).
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        match &self.out {
            Outbox::Hub(hub) => hub.finish(Command::Close),
            Outbox::Root(peer) => {
                let _ = lock(&peer.writer).shutdown(Shutdown::Both);
            }
            Outbox::Alone => {}
        }
    }

    /// Says goodbye to every peer, so closing is not mistaken for a crash.
    pub(super) fn goodbye(&self) {
        self.closing.store(true, Ordering::SeqCst);
        match &self.out {
            Outbox::Hub(hub) => hub.finish(Command::Goodbye),
            Outbox::Root(peer) => linger(peer),
            Outbox::Alone => {}
        }
    }

    pub(super) fn event(&self, event: Event) {
        let _ = lock(&self.events).send(event);
    }

    /// The job's first failure's message, if any.
    pub(super) fn failure(&self) -> Option<String> {
        lock(&self.failure).as_ref().map(|f| f.message.clone())
    }

    /// The job's first failure, kind and message, if any.
    pub(super) fn first_failure(&self) -> Option<PeerFailure> {
        lock(&self.failure).clone()
    }

    /// Records the job's first failure, tells every peer but `culprit`
    /// (rank 0 fans out to all; others tell rank 0), and wakes the caller.
    /// Returns the recorded (first) failure as an error.
    pub(super) fn fail(&self, reason: String, culprit: Option<usize>) -> LaunchError {
        let failure = PeerFailure::new(reason);
        self.fail_with(failure, culprit, |f| Msg::Abort { reason: f.message })
    }

    /// [`Shared::fail`], but every rank fails with `failure` verbatim, its
    /// kind included (`abort_job`: the reason already names who is at
    /// fault).
    pub(super) fn stop(&self, failure: PeerFailure, culprit: Option<usize>) -> LaunchError {
        self.fail_with(failure, culprit, |f| Msg::Stop {
            reason: f.message,
            kind: f.kind,
        })
    }

    fn fail_with(
        &self,
        failure: PeerFailure,
        culprit: Option<usize>,
        notice: fn(PeerFailure) -> Msg,
    ) -> LaunchError {
        let reason = failure.message.clone();
        if let Err(first) = self.record(failure.clone()) {
            return first;
        }
        match &self.out {
            Outbox::Hub(hub) => {
                if let Ok(frame) = wire::encode(&notice(failure), &[]) {
                    hub.send_all_now(frame.into(), culprit);
                }
            }
            Outbox::Root(peer) => {
                if culprit != Some(0) && !peer.left.load(Ordering::SeqCst) {
                    let _ = peer.send(&notice(failure), &[]);
                }
            }
            Outbox::Alone => {}
        }
        self.after_failure(&reason);
        LaunchError::Control(reason)
    }

    /// Records `failure` as the job's failure unless one came first (then
    /// that one is the error).
    pub(super) fn record(&self, failure: PeerFailure) -> Result<(), LaunchError> {
        let mut first = lock(&self.failure);
        match first.as_ref() {
            Some(first) => Err(LaunchError::Control(first.message.clone())),
            None => {
                *first = Some(failure);
                Ok(())
            }
        }
    }

    /// After the fan-out (the hook may be slow: aborting NCCL), before
    /// waking the caller (whose call then returns with NCCL aborted).
    pub(super) fn after_failure(&self, reason: &str) {
        if let Some(hook) = lock(&self.hook).as_ref() {
            hook(reason);
        }
        self.event(Event::Failed);
    }
}

/// Other ranks' goodbye: Bye, then read until rank 0 closes its side (or
/// a short deadline). Closing with unread bytes makes the kernel send a
/// reset, which can discard a failure notice the peer has received but not
/// yet read.
fn linger(peer: &Peer) {
    let _ = peer.send(&Msg::Bye, &[]);
    let mut stream = lock(&peer.writer);
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 4096];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
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
