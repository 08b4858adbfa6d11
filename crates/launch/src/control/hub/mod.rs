//! Rank 0's event loop: one thread, whatever the world size, drives every
//! connection over non-blocking sockets (mio): accepts, checks hellos,
//! reads frames, writes queued frames, sends heartbeats and turns a dead,
//! silent or stalled rank into the job's failure naming it.
//!
//! Memory per rank is bounded: a partial incoming frame (frames are
//! bounded by `wire`), a queue of outgoing frames shared between ranks
//! (an answer to everyone is one buffer), and a few fields. The calling
//! thread talks to the loop through [`HubHandle`]: commands on a channel
//! plus a waker; the loop talks back through the event channel. This file
//! holds the loop and what frames mean; `io` the sockets.

pub(super) mod handle;
mod hello;
mod io;

use super::shared::{Event, Shared};
use super::{lock, PeerHello};
use crate::wire::{self, Msg};
use handle::{Command, HubHandle};
use hello::judge_hello;
use io::Conn;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Connection `i` is token `i + FIRST`.
const FIRST: usize = 2;
/// Lines about lost connections printed one by one during the join.
const NOTED: usize = 3;

/// The loop's poll and the handle to it (the handle goes into `Shared`
/// before the loop starts; [`spawn`] then starts the loop).
pub(super) fn handle(
    world_size: usize,
    own: PeerHello,
) -> std::io::Result<(Poll, HubHandle, Receiver<Command>)> {
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    let (tx, rx) = mpsc::channel();
    let handle = HubHandle::new(world_size, own, waker, tx);
    Ok((poll, handle, rx))
}

/// Starts the loop on its thread.
pub(super) fn spawn(
    poll: Poll,
    mut listener: TcpListener,
    shared: Arc<Shared>,
    commands: Receiver<Command>,
) -> std::io::Result<()> {
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let n = shared.world_size;
    let root_host = lock(&shared.hub().hellos)[0]
        .as_ref()
        .map(|own| own.host.clone())
        .unwrap_or_default();
    let mut hub = Hub {
        poll,
        listener,
        shared: Arc::clone(&shared),
        commands,
        conns: Vec::new(),
        free: Vec::new(),
        by_rank: vec![None; n],
        joined: 1,
        scratch: vec![0u8; 64 << 10],
        ending: None,
        news: Vec::new(),
        noted: 0,
        nonces: vec![0; n],
        welcome: frame_of(&Msg::Welcome, root_host.as_bytes()),
    };
    let thread = thread::Builder::new()
        .name("collbench-hub".into())
        .spawn(move || hub.run())?;
    shared.hub().set_thread(thread);
    Ok(())
}

/// How the loop is ending.
#[derive(Clone, Copy)]
enum Ending {
    /// Goodbye sent; ends when every rank closed, or at the deadline.
    Goodbye(Instant),
    /// Ends when every queue is written, or at the deadline.
    Close(Instant),
}

struct Hub {
    poll: Poll,
    listener: TcpListener,
    shared: Arc<Shared>,
    commands: Receiver<Command>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    by_rank: Vec<Option<usize>>,
    joined: usize,
    scratch: Vec<u8>,
    ending: Option<Ending>,
    /// Events for the calling thread, delivered as one batch per turn of
    /// the loop: thousands of parts of a gather wake it a few times, not
    /// thousands.
    news: Vec<Event>,
    /// Lines about connections lost during the join (see `note`).
    noted: usize,
    /// Per admitted rank, its hello's nonce.
    nonces: Vec<u64>,
    /// The welcome every admitted rank gets: it names rank 0's host, so
    /// the others name rank 0 as rank 0 names them (not by its address).
    welcome: Arc<[u8]>,
}

/// Why a connection is over.
enum Outcome {
    Open,
    /// Close it without a word (closed by the peer, refused, garbage).
    Drop,
    /// The job fails with this reason (naming the rank).
    Fail(String),
}

impl Hub {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let beat = self.shared.board.beat();
        let mut next_beat = Instant::now() + beat;
        let mut next_check = Instant::now();
        loop {
            let tick = Duration::from_millis(20).min(beat);
            if self.poll.poll(&mut events, Some(tick)).is_err() {
                // EINTR and the like: poll again.
                thread::sleep(Duration::from_millis(1));
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(t) => {
                        let readable =
                            event.is_readable() || event.is_read_closed() || event.is_error();
                        self.service(t - FIRST, readable);
                    }
                }
            }
            self.deliver();
            self.take_commands();
            let now = Instant::now();
            if now >= next_beat && self.ending.is_none() {
                next_beat = now + beat;
                self.heartbeat();
            }
            // Deadlines are seconds; looking every 20 ms keeps a turn of
            // the loop O(events), not O(world size).
            if now >= next_check {
                next_check = now + tick;
                self.check_deadlines(now);
            }
            self.deliver();
            if self.ended(now) {
                break;
            }
        }
        for slot in self.conns.iter_mut() {
            if let Some(conn) = slot.take() {
                let _ = conn.stream.shutdown(Shutdown::Both);
            }
        }
    }

    fn settle(&mut self, i: usize, outcome: Outcome) {
        match outcome {
            Outcome::Open => {}
            Outcome::Drop => self.drop_conn(i),
            Outcome::Fail(reason) => {
                let rank = self.conns[i].as_ref().and_then(|c| c.rank);
                self.drop_conn(i);
                self.fail(reason, rank);
            }
        }
    }

    /// One whole frame from connection `i`.
    fn frame(&mut self, i: usize, msg: Msg, payload: Vec<u8>) -> Outcome {
        let conn = self.conns[i].as_mut().expect("a live connection");
        let Some(rank) = conn.rank else {
            return self.hello(i, msg, payload);
        };
        match msg {
            Msg::Heartbeat => self.shared.board.record(rank, wire::payload_word(&payload)),
            Msg::Bye => {
                conn.finished = true;
                self.shared.hub().left[rank].store(true, Ordering::SeqCst);
                self.news.push(Event::Left(rank));
            }
            msg @ (Msg::Contribute { .. } | Msg::Result { .. } | Msg::Ready) => {
                self.news.push(Event::Frame {
                    from: rank,
                    msg,
                    payload,
                });
            }
            // A rank's own abort reason already names it (see `abort`).
            Msg::Abort { reason } => return Outcome::Fail(reason),
            Msg::Stop { reason, kind } => {
                let failure = collbench_core::PeerFailure {
                    kind,
                    message: reason,
                };
                self.stop(failure, rank);
                return Outcome::Open;
            }
            // Named only here: a name per frame is an allocation per part.
            other => {
                return Outcome::Fail(format!(
                    "{} sent an unexpected {other:?} (a different collbench version?)",
                    conn.name()
                ))
            }
        }
        Outcome::Open
    }

    /// The first frame of a connection: a hello to admit or refuse.
    fn hello(&mut self, i: usize, msg: Msg, info: Vec<u8>) -> Outcome {
        let complete = self.joined == self.shared.world_size;
        let shared = Arc::clone(&self.shared);
        let hub = shared.hub();
        let nonce = match &msg {
            Msg::Hello { nonce, .. } => *nonce,
            _ => 0,
        };
        let verdict = judge_hello(&shared, msg, complete).and_then(|hello| {
            match &lock(&hub.hellos)[hello.rank] {
                // The same rank again: it gave up on a slow welcome.
                Some(_) if self.nonces[hello.rank] == nonce => Ok(hello),
                Some(first) => Err((hello.host, format!(
                    "rank {} already joined from host {} (pid {}): two processes were given the same rank",
                    hello.rank, first.host, first.pid
                ))),
                None => Ok(hello),
            }
        });
        if let Ok(hello) = &verdict {
            if let Some(old) = self.by_rank[hello.rank] {
                self.drop_conn(old);
                self.unadmit(hello.rank);
            }
        }
        let conn = self.conns[i].as_mut().expect("a live connection");
        let mut hello = match verdict {
            Ok(hello) => hello,
            Err((host, reason)) => {
                collbench_core::diag::line(&format!(
                    "collbench: rank 0 refused a connection from {} (host {host}): {reason}",
                    conn.addr
                ));
                if let Ok(frame) = wire::encode(&Msg::Refused { reason }, &[]) {
                    conn.queue(frame.into());
                }
                conn.finished = true;
                return Outcome::Open;
            }
        };
        hello.info = info;
        let rank = hello.rank;
        self.nonces[rank] = nonce;
        conn.rank = Some(rank);
        conn.host = hello.host.clone();
        conn.queue(Arc::clone(&self.welcome));
        lock(&hub.hellos)[rank] = Some(hello);
        self.by_rank[rank] = Some(i);
        self.joined += 1;
        if self.joined == self.shared.world_size {
            if self.noted > NOTED {
                collbench_core::diag::line(&format!(
                    "collbench: rank 0 left out {} more such lines while the ranks joined",
                    self.noted - NOTED
                ));
            }
            self.broadcast(frame_of(&Msg::Ready, &[]), None);
            self.deliver();
            self.shared.event(Event::Joined);
        }
        Outcome::Open
    }

    fn take_commands(&mut self) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::SendAll {
                    except,
                    frame,
                    written,
                } => {
                    self.broadcast(frame, except);
                    if let Some(written) = written {
                        let _ = written.send(());
                    }
                }
                Command::Goodbye => {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    self.ending = Some(Ending::Goodbye(deadline));
                    self.broadcast(frame_of(&Msg::Bye, &[]), None);
                }
                Command::Close => {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    self.ending = Some(Ending::Close(deadline));
                }
            }
        }
    }

    /// Queues `frame` for every admitted rank but `except` and writes.
    fn broadcast(&mut self, frame: Arc<[u8]>, except: Option<usize>) {
        for i in 0..self.conns.len() {
            let Some(conn) = self.conns[i].as_mut() else {
                continue;
            };
            let rank = conn.rank;
            if rank.is_none() || rank == except {
                continue;
            }
            if rank.is_some_and(|r| self.shared.hub().left[r].load(Ordering::SeqCst))
                && !matches!(self.ending, Some(Ending::Goodbye(_)))
            {
                continue;
            }
            conn.queue(Arc::clone(&frame));
            let outcome = self.write(i);
            self.settle(i, outcome);
        }
    }

    fn heartbeat(&mut self) {
        let word = wire::word_payload(self.shared.board.own());
        self.broadcast(frame_of(&Msg::Heartbeat, &word), None);
    }

    /// Silent ranks, stalled writes, hellos that never came.
    fn check_deadlines(&mut self, now: Instant) {
        let timeout = self.shared.timeout;
        for i in 0..self.conns.len() {
            let Some(conn) = self.conns[i].as_ref() else {
                continue;
            };
            let outcome = match conn.rank {
                None if now > conn.hello_deadline => {
                    if !conn.finished {
                        let line = format!(
                            "dropped {}: nothing received before a hello (not a collbench rank?)",
                            conn.name()
                        );
                        self.note(line);
                    }
                    Outcome::Drop
                }
                None => Outcome::Open,
                Some(_) if conn.finished || self.ending.is_some() => Outcome::Open,
                Some(_) if now.duration_since(conn.last_heard) > timeout => Outcome::Fail(format!(
                    "{} sent nothing for {} s (stopped, hung or unreachable)",
                    conn.name(),
                    timeout.as_secs()
                )),
                Some(_)
                    if conn
                        .stalled_since
                        .is_some_and(|s| now.duration_since(s) > timeout) =>
                {
                    Outcome::Fail(format!(
                        "{} read nothing for {} s (stopped, hung or unreachable)",
                        conn.name(),
                        timeout.as_secs()
                    ))
                }
                Some(_) => Outcome::Open,
            };
            self.settle(i, outcome);
        }
    }

    fn ended(&self, now: Instant) -> bool {
        match self.ending {
            None => false,
            Some(Ending::Goodbye(deadline)) => {
                now > deadline || self.conns.iter().all(Option::is_none)
            }
            Some(Ending::Close(deadline)) => {
                now > deadline || self.conns.iter().flatten().all(|c| c.out.is_empty())
            }
        }
    }

    /// One line about a connection lost while the ranks join (a stray
    /// client, a rank that retried a slow join, a rank that died): the
    /// first few, then one count at Ready, so a connect storm does not
    /// print thousands of lines.
    fn note(&mut self, line: String) {
        let joining = self.joined < self.shared.world_size;
        if self.noted < NOTED || !joining {
            collbench_core::diag::line(&format!("collbench: rank 0 {line}"));
        }
        if joining {
            self.noted += 1;
        }
    }

    /// Forgets rank `rank`'s admission (before Ready: it rejoins).
    fn unadmit(&mut self, rank: usize) {
        let taken = lock(&self.shared.hub().hellos)
            .get_mut(rank)
            .and_then(Option::take);
        if taken.is_some() {
            self.joined -= 1;
        }
        self.by_rank[rank] = None;
    }

    /// Hands the calling thread what arrived this turn, in one batch.
    fn deliver(&mut self) {
        match self.news.len() {
            0 => {}
            1 => self.shared.event(self.news.pop().expect("one event")),
            _ => self
                .shared
                .event(Event::Batch(std::mem::take(&mut self.news))),
        }
    }

    fn drop_conn(&mut self, i: usize) {
        if let Some(mut conn) = self.conns[i].take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if let Some(rank) = conn.rank {
                if self.by_rank[rank] == Some(i) {
                    self.by_rank[rank] = None;
                }
            }
            self.free.push(i);
        }
    }

    /// A failure seen here: the first one fails the job. The Abort goes
    /// out before the failure hook runs (it may take long: aborting NCCL).
    fn fail(&mut self, reason: String, culprit: Option<usize>) {
        // What arrived before the failure still counts (see `call::wait`).
        self.deliver();
        let failure = collbench_core::PeerFailure::new(reason.clone());
        if self.ending.is_some() || self.shared.record(failure).is_err() {
            return;
        }
        if let Ok(frame) = wire::encode(
            &Msg::Abort {
                reason: reason.clone(),
            },
            &[],
        ) {
            self.broadcast(frame.into(), culprit);
        }
        self.shared.after_failure(&reason);
    }

    /// `abort_job` from rank `from`: everyone stops with `failure`
    /// verbatim, its kind included.
    fn stop(&mut self, failure: collbench_core::PeerFailure, from: usize) {
        self.deliver();
        let reason = failure.message.clone();
        let kind = failure.kind;
        if self.shared.record(failure).is_err() {
            return;
        }
        if let Ok(frame) = wire::encode(
            &Msg::Stop {
                reason: reason.clone(),
                kind,
            },
            &[],
        ) {
            self.broadcast(frame.into(), Some(from));
        }
        self.shared.after_failure(&reason);
    }
}

/// A frame known to encode (no payload over the limit).
fn frame_of(msg: &Msg, payload: &[u8]) -> Arc<[u8]> {
    wire::encode(msg, payload)
        .expect("a small control frame encodes")
        .into()
}
