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
//! Failures: one reader thread per connection and one heartbeat thread per
//! process. A peer that closes without a goodbye (exit, crash, kill) or
//! sends nothing for the timeout (stopped, hung, unreachable) fails the
//! job; rank 0 then sends Abort to everyone else, so they fail at once
//! instead of waiting out their own timeouts. Every wait has a deadline.
//! After a failure every call returns the first failure's message, which
//! names the rank and host.

use crate::wire::{self, Msg, Op, ReadError, PROTOCOL_VERSION};
use crate::{ranks_phrase, LaunchArgs, LaunchError, World};
use std::collections::VecDeque;
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

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
}

struct Link {
    shared: Arc<Shared>,
    state: Mutex<State>,
    /// Rank 0 only: every rank's hello, indexed by rank.
    hellos: Vec<PeerHello>,
}

/// What the calling thread owns: incoming events and what is buffered.
struct State {
    events: Receiver<Event>,
    /// Per rank, parts (rank 0) or answers (others) that arrived early.
    pending: Vec<VecDeque<Part>>,
    /// Per rank: said goodbye.
    left: Vec<bool>,
    /// Sequence number of the next call.
    seq: u64,
}

struct Part {
    seq: u64,
    op: Op,
    data: Vec<u8>,
}

enum Event {
    Frame {
        from: usize,
        msg: Msg,
        payload: Vec<u8>,
    },
    Left(usize),
    Failed,
}

type FailureHook = Box<dyn Fn(&str) + Send>;

/// What the background threads share with the calling thread.
struct Shared {
    world_size: usize,
    timeout: Duration,
    token: String,
    peers: Mutex<Vec<Option<Arc<Peer>>>>,
    failure: Mutex<Option<String>>,
    hook: Mutex<Option<FailureHook>>,
    events: Mutex<Sender<Event>>,
    /// Set when this process closes: background threads stop, quietly.
    closing: AtomicBool,
    /// Rank 0: every rank joined; later hellos are refused.
    complete: AtomicBool,
}

/// The other end of one connection.
struct Peer {
    rank: usize,
    host: String,
    writer: Mutex<TcpStream>,
    left: AtomicBool,
    /// Its reader thread has ended (the connection is over).
    reader_done: AtomicBool,
}

impl Peer {
    fn send(&self, msg: &Msg, payload: &[u8]) -> std::io::Result<()> {
        wire::write_frame(&mut *lock(&self.writer), msg, payload)
    }
    fn name(&self) -> String {
        format!("rank {} on host {}", self.rank, self.host)
    }
}

/// Locks, ignoring poisoning: a panicked holder leaves nothing half-written
/// that matters here.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn new(world: &World, timeout: Duration, events: Sender<Event>) -> Shared {
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
        }
    }

    /// Stops the background threads and drops every connection (no
    /// goodbye: used when joining failed, the failure is already sent).
    fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        for peer in self.peers() {
            let _ = lock(&peer.writer).shutdown(Shutdown::Both);
        }
    }

    fn peers(&self) -> Vec<Arc<Peer>> {
        lock(&self.peers).iter().flatten().cloned().collect()
    }

    fn event(&self, event: Event) {
        let _ = lock(&self.events).send(event);
    }

    fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Records the job's first failure, tells every peer but `culprit`
    /// (rank 0 fans out to all; others tell rank 0), and wakes the caller.
    /// Returns the recorded (first) failure as an error.
    fn fail(&self, reason: String, culprit: Option<usize>) -> LaunchError {
        {
            let mut failure = lock(&self.failure);
            if let Some(first) = failure.as_ref() {
                return LaunchError::Control(first.clone());
            }
            *failure = Some(reason.clone());
        }
        for peer in self.peers() {
            if Some(peer.rank) != culprit && !peer.left.load(Ordering::SeqCst) {
                let _ = peer.send(
                    &Msg::Abort {
                        reason: reason.clone(),
                    },
                    &[],
                );
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

/// Heartbeat period: a few beats per timeout, so one late beat is no alarm.
fn heartbeat_interval(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(2))
}

impl Control {
    /// Joins the job: rank 0 listens and waits for everyone, the others
    /// connect to rank 0. Returns when every rank has joined, or fails at
    /// `--timeout-s` naming the missing ranks. A world of one opens no socket.
    pub fn connect(world: &World, args: &LaunchArgs) -> Result<Control, LaunchError> {
        Control::connect_with_info(world, args, Vec::new())
    }

    /// [`Control::connect`], attaching `info` to this rank's hello; rank 0
    /// sees every rank's attachment in [`Control::hellos`] (and in
    /// [`LaunchError::MissingRanks`] when some never come).
    pub fn connect_with_info(
        world: &World,
        args: &LaunchArgs,
        info: Vec<u8>,
    ) -> Result<Control, LaunchError> {
        let timeout = Duration::from_secs(args.timeout_s.max(1));
        let own = PeerHello {
            rank: world.rank,
            local_rank: world.local_rank,
            host: world.hostname.clone(),
            pid: std::process::id(),
            info,
        };
        let link = match (world.world_size, world.rank) {
            (1, _) => None,
            (_, 0) => Some(join_as_root(world, timeout, own.clone())?),
            _ => Some(join_as_peer(world, timeout, own.clone())?),
        };
        Ok(Control {
            world: world.clone(),
            timeout,
            link,
            own,
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

    /// The job's first failure, if any (names the rank and host).
    pub fn failure(&self) -> Option<String> {
        self.link.as_ref().and_then(|l| l.shared.failure())
    }

    /// Runs `hook` once, on a background thread, when the job fails (a peer
    /// died, went silent or aborted): the place to abort NCCL communicators
    /// that would otherwise wait forever for the dead peer.
    pub fn on_failure(&self, hook: impl Fn(&str) + Send + 'static) {
        if let Some(link) = &self.link {
            *lock(&link.shared.hook) = Some(Box::new(hook));
            if let Some(reason) = link.shared.failure() {
                if let Some(hook) = lock(&link.shared.hook).as_ref() {
                    hook(&reason);
                }
            }
        }
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<(), LaunchError> {
        let Some(link) = &self.link else {
            return Ok(());
        };
        let (mut state, seq) = start_call(link)?;
        if self.world.rank == 0 {
            self.collect(link, &mut state, Op::Barrier, seq, Vec::new())?;
            self.answer_all(link, Op::Barrier, seq, &[])
        } else {
            self.contribute(link, Op::Barrier, seq, &[])?;
            self.await_answer(link, &mut state, Op::Barrier, seq)
                .map(drop)
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
            return Ok(data.unwrap_or_default());
        };
        let (mut state, seq) = start_call(link)?;
        match data {
            Some(data) if self.world.rank == 0 => {
                self.answer_all(link, Op::Broadcast, seq, &data)?;
                Ok(data)
            }
            _ => self.await_answer(link, &mut state, Op::Broadcast, seq),
        }
    }

    /// Rank 0 gets every rank's data indexed by rank; others get `None`
    /// (and do not wait for rank 0).
    pub fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, LaunchError> {
        let Some(link) = &self.link else {
            return Ok(Some(vec![data]));
        };
        let (mut state, seq) = start_call(link)?;
        if self.world.rank == 0 {
            self.collect(link, &mut state, Op::Gather, seq, data)
                .map(Some)
        } else {
            self.contribute(link, Op::Gather, seq, &data).map(|_| None)
        }
    }

    /// Every rank gets every rank's data indexed by rank.
    pub fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, LaunchError> {
        let Some(link) = &self.link else {
            return Ok(vec![data]);
        };
        let (mut state, seq) = start_call(link)?;
        if self.world.rank == 0 {
            let parts = self.collect(link, &mut state, Op::AllGather, seq, data)?;
            self.answer_all(link, Op::AllGather, seq, &wire::pack(&parts))?;
            Ok(parts)
        } else {
            self.contribute(link, Op::AllGather, seq, &data)?;
            let packed = self.await_answer(link, &mut state, Op::AllGather, seq)?;
            wire::unpack(&packed)
                .filter(|parts| parts.len() == self.world.world_size)
                .ok_or_else(|| {
                    link.shared.fail(
                        format!("all_gather #{seq}: rank 0 sent a malformed answer"),
                        None,
                    )
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
        if let Some(link) = &self.link {
            link.shared.close();
        }
        std::mem::forget(self);
    }

    /// Rank 0: waits for every rank's part of call `seq`.
    fn collect(
        &self,
        link: &Link,
        state: &mut State,
        op: Op,
        seq: u64,
        own: Vec<u8>,
    ) -> Result<Vec<Vec<u8>>, LaunchError> {
        let n = self.world.world_size;
        let deadline = self.call_deadline();
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; n];
        parts[0] = Some(own);
        loop {
            for (rank, slot) in parts.iter_mut().enumerate().skip(1) {
                if slot.is_some() {
                    continue;
                }
                if let Some(part) = state.pending[rank].pop_front() {
                    *slot = Some(self.check_step(link, rank, &part, op, seq)?);
                } else if state.left[rank] {
                    let who = link.hellos[rank].host.as_str();
                    return Err(link.shared.fail(
                        format!("rank {rank} on host {who} left before {op} #{seq}: every rank must make the same control-plane calls"),
                        Some(rank),
                    ));
                }
            }
            if parts.iter().all(Option::is_some) {
                return Ok(parts.into_iter().flatten().collect());
            }
            if !self.wait(link, state, deadline)? {
                let missing: Vec<usize> = (1..n).filter(|&r| parts[r].is_none()).collect();
                let hosts: Vec<&str> = missing
                    .iter()
                    .map(|&r| link.hellos[r].host.as_str())
                    .collect();
                return Err(link.shared.fail(
                    format!(
                        "{op} #{seq} timed out after {} s waiting for {} (on {}): they are alive but did not make the call",
                        self.timeout.as_secs(),
                        ranks_phrase(&missing),
                        dedup(hosts).join(", ")
                    ),
                    None,
                ));
            }
        }
    }

    /// Other ranks: waits for rank 0's answer to call `seq`.
    fn await_answer(
        &self,
        link: &Link,
        state: &mut State,
        op: Op,
        seq: u64,
    ) -> Result<Vec<u8>, LaunchError> {
        let deadline = self.call_deadline();
        let root = self.root_host();
        loop {
            if let Some(part) = state.pending[0].pop_front() {
                return self.check_step(link, 0, &part, op, seq);
            }
            if state.left[0] {
                return Err(LaunchError::Control(format!(
                    "rank 0 on host {root} closed the control plane before {op} #{seq}: it finished or failed first (see its output)"
                )));
            }
            if !self.wait(link, state, deadline)? {
                return Err(link.shared.fail(
                    format!(
                        "{op} #{seq}: rank 0 on host {root} did not answer within {} s",
                        self.timeout.as_secs()
                    ),
                    None,
                ));
            }
        }
    }

    /// Checks that a part belongs to the call being made.
    fn check_step(
        &self,
        link: &Link,
        from: usize,
        part: &Part,
        op: Op,
        seq: u64,
    ) -> Result<Vec<u8>, LaunchError> {
        if part.seq == seq && part.op == op {
            return Ok(part.data.clone());
        }
        let me = self.world.rank;
        Err(link.shared.fail(
            format!(
                "rank {from} made call #{} ({}) while rank {me} made call #{seq} ({op}): every rank must make the same control-plane calls in the same order",
                part.seq, part.op
            ),
            None,
        ))
    }

    fn contribute(&self, link: &Link, op: Op, seq: u64, data: &[u8]) -> Result<(), LaunchError> {
        self.send(link, 0, &Msg::Contribute { seq, op }, data)
    }

    fn answer_all(&self, link: &Link, op: Op, seq: u64, data: &[u8]) -> Result<(), LaunchError> {
        for rank in 1..self.world.world_size {
            self.send(link, rank, &Msg::Result { seq, op }, data)?;
        }
        Ok(())
    }

    fn send(&self, link: &Link, to: usize, msg: &Msg, data: &[u8]) -> Result<(), LaunchError> {
        if let Some(failure) = link.shared.failure() {
            return Err(LaunchError::Control(failure));
        }
        let peer = lock(&link.shared.peers)[to].clone();
        let Some(peer) = peer else {
            return Err(LaunchError::Control(format!(
                "rank {to} is not connected (a bug)"
            )));
        };
        let Err(e) = peer.send(msg, data) else {
            return Ok(());
        };
        if e.kind() == std::io::ErrorKind::InvalidInput {
            return Err(link
                .shared
                .fail(format!("cannot send to {}: {e}", peer.name()), None));
        }
        // The reader usually knows better why the connection is gone (an
        // Abort or goodbye that arrived just before): let it finish first.
        let patience = Instant::now() + Duration::from_secs(2);
        while !peer.reader_done.load(Ordering::SeqCst) && Instant::now() < patience {
            thread::sleep(Duration::from_millis(5));
        }
        if let Some(failure) = link.shared.failure() {
            return Err(LaunchError::Control(failure));
        }
        if peer.left.load(Ordering::SeqCst) {
            return Err(LaunchError::Control(format!(
                "{} closed the control plane before this call: it finished or failed first (see its output)",
                peer.name()
            )));
        }
        Err(link
            .shared
            .fail(format!("{} disconnected ({e})", peer.name()), Some(to)))
    }

    /// Waits for events until `deadline`; `Ok(false)` when it passed.
    /// What already arrived is taken before a failure is reported, so a call
    /// whose answer came before a peer died still completes.
    fn wait(&self, link: &Link, state: &mut State, deadline: Instant) -> Result<bool, LaunchError> {
        let mut got_any = false;
        while let Ok(event) = state.events.try_recv() {
            absorb(state, event);
            got_any = true;
        }
        if got_any {
            return Ok(true);
        }
        if let Some(failure) = link.shared.failure() {
            return Err(LaunchError::Control(failure));
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(false);
        };
        match state.events.recv_timeout(left) {
            Ok(event) => {
                absorb(state, event);
                Ok(true)
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => {
                Err(LaunchError::Control("control plane closed".into()))
            }
        }
    }

    /// When a call gives up. A heartbeat later than the silence limit, so
    /// that a stopped peer is reported as silent (the more useful message)
    /// rather than as late.
    fn call_deadline(&self) -> Instant {
        Instant::now() + self.timeout + heartbeat_interval(self.timeout)
    }

    fn root_host(&self) -> String {
        self.world
            .rendezvous_host
            .clone()
            .unwrap_or_else(|| "?".into())
    }
}

impl Drop for Control {
    /// Says goodbye to every peer, so closing is not mistaken for a crash.
    fn drop(&mut self) {
        if let Some(link) = &self.link {
            link.shared.closing.store(true, Ordering::SeqCst);
            let peers = link.shared.peers();
            for peer in &peers {
                let _ = peer.send(&Msg::Bye, &[]);
                let _ = lock(&peer.writer).shutdown(Shutdown::Write);
            }
            // Lingering close: read until each peer closes its side (or a
            // short deadline). Closing with unread bytes makes the kernel
            // send a reset, which can discard a failure notice the peer
            // has received but not yet read.
            let deadline = Instant::now() + Duration::from_secs(1);
            let mut buf = [0u8; 4096];
            for peer in &peers {
                let mut stream = lock(&peer.writer);
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
        }
    }
}

/// Takes the call lock and a sequence number; after a failure every call
/// fails at once with the first failure's message.
fn start_call(link: &Link) -> Result<(MutexGuard<'_, State>, u64), LaunchError> {
    if let Some(failure) = link.shared.failure() {
        return Err(LaunchError::Control(failure));
    }
    let mut state = lock(&link.state);
    state.seq += 1;
    let seq = state.seq;
    Ok((state, seq))
}

fn absorb(state: &mut State, event: Event) {
    match event {
        Event::Frame {
            from,
            msg: Msg::Contribute { seq, op } | Msg::Result { seq, op },
            payload,
        } => state.pending[from].push_back(Part {
            seq,
            op,
            data: payload,
        }),
        Event::Left(rank) => state.left[rank] = true,
        Event::Frame { .. } | Event::Failed => {}
    }
}

fn dedup(mut items: Vec<&str>) -> Vec<&str> {
    items.sort_unstable();
    items.dedup();
    items
}

fn new_state(events: Receiver<Event>, n: usize) -> State {
    State {
        events,
        pending: (0..n).map(|_| VecDeque::new()).collect(),
        left: vec![false; n],
        seq: 0,
    }
}

/// A validated hello waiting for rank 0's duplicate check.
struct Joiner {
    hello: PeerHello,
    stream: TcpStream,
    addr: SocketAddr,
}

fn join_as_root(world: &World, timeout: Duration, own: PeerHello) -> Result<Link, LaunchError> {
    let n = world.world_size;
    let listen = format!("{}:{}", world.bind, world.rendezvous_port);
    let listener = TcpListener::bind((world.bind.as_str(), world.rendezvous_port)).map_err(|e| {
        LaunchError::Control(format!(
            "rank 0 cannot listen on {listen}: {e}; if another job uses this port, set COLLBENCH_PORT or --rendezvous HOST:PORT to a free one"
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| LaunchError::Control(format!("listen on {listen}: {e}")))?;

    let (events_tx, events_rx) = mpsc::channel();
    let shared = Arc::new(Shared::new(world, timeout, events_tx));
    let (join_tx, join_rx) = mpsc::channel();
    spawn_acceptor(listener, Arc::clone(&shared), join_tx);
    spawn_heartbeat(Arc::clone(&shared));

    let deadline = Instant::now() + timeout;
    let mut hellos: Vec<Option<PeerHello>> = vec![None; n];
    hellos[0] = Some(own);
    while hellos.iter().any(Option::is_none) {
        if let Some(failure) = shared.failure() {
            shared.close();
            return Err(LaunchError::Control(failure));
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            let missing: Vec<usize> = (0..n).filter(|&r| hellos[r].is_none()).collect();
            let joined: Vec<PeerHello> = hellos.into_iter().flatten().collect();
            let error = LaunchError::MissingRanks {
                missing,
                timeout_s: timeout.as_secs(),
                listen,
                joined,
            };
            shared.fail(error.to_string(), None);
            shared.close();
            return Err(error);
        };
        let Ok(joiner) = join_rx.recv_timeout(left.min(Duration::from_millis(100))) else {
            continue;
        };
        let Joiner {
            hello,
            stream,
            addr,
        } = joiner;
        if let Some(first) = &hellos[hello.rank] {
            let reason = format!(
                "rank {} already joined from host {} (pid {}): two processes were given the same rank",
                hello.rank, first.host, first.pid
            );
            refuse(stream, addr, &hello.host, &reason);
            continue;
        }
        let rank = hello.rank;
        if admit(&shared, &hello, stream) {
            hellos[rank] = Some(hello);
        }
    }
    shared.complete.store(true, Ordering::SeqCst);
    for peer in shared.peers() {
        if peer.send(&Msg::Ready, &[]).is_err() {
            let error = shared.fail(
                format!("{} disconnected while the job started", peer.name()),
                Some(peer.rank),
            );
            shared.close();
            return Err(error);
        }
    }
    let hellos = hellos.into_iter().flatten().collect();
    Ok(Link {
        shared,
        state: Mutex::new(new_state(events_rx, n)),
        hellos,
    })
}

/// Welcomes a rank and starts reading from it; false if it vanished.
fn admit(shared: &Arc<Shared>, hello: &PeerHello, stream: TcpStream) -> bool {
    let Ok(writer) = stream.try_clone() else {
        return false;
    };
    let peer = Arc::new(Peer {
        rank: hello.rank,
        host: hello.host.clone(),
        writer: Mutex::new(writer),
        left: AtomicBool::new(false),
        reader_done: AtomicBool::new(false),
    });
    if peer.send(&Msg::Welcome, &[]).is_err() {
        return false;
    }
    lock(&shared.peers)[hello.rank] = Some(Arc::clone(&peer));
    spawn_reader(Arc::clone(shared), peer, stream);
    true
}

/// Rank 0: accepts connections until closing; each hello is checked on its
/// own thread so a silent stray client cannot hold up the others.
fn spawn_acceptor(listener: TcpListener, shared: Arc<Shared>, join_tx: Sender<Joiner>) {
    let _ = thread::Builder::new()
        .name("collbench-accept".into())
        .spawn(move || {
            while !shared.closing.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, addr)) => {
                        let shared = Arc::clone(&shared);
                        let join_tx = join_tx.clone();
                        let _ = thread::Builder::new()
                            .name("collbench-hello".into())
                            .spawn(move || check_hello(&shared, stream, addr, &join_tx));
                    }
                    // Non-blocking accept: poll, so closing is noticed.
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
}

/// Reads and validates one hello; passes it on or refuses it.
fn check_hello(shared: &Shared, stream: TcpStream, addr: SocketAddr, join_tx: &Sender<Joiner>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(shared.timeout.min(Duration::from_secs(10))));
    let _ = stream.set_write_timeout(Some(shared.timeout));
    let mut reader = match stream.try_clone() {
        Ok(r) => r,
        Err(_) => return,
    };
    let (msg, info) = match wire::read_frame(&mut reader) {
        Ok(frame) => frame,
        Err(e) => {
            eprintln!("collbench: rank 0 dropped a connection from {addr}: {e} before a hello (not a collbench rank?)");
            return;
        }
    };
    let Msg::Hello {
        protocol,
        token,
        rank,
        world_size,
        local_rank,
        host,
        pid,
    } = msg
    else {
        refuse(
            stream,
            addr,
            "?",
            "the first message was not a hello (not a collbench rank?)",
        );
        return;
    };
    let n = shared.world_size;
    let problem = if protocol != PROTOCOL_VERSION {
        Some(format!("it speaks control protocol {protocol}, rank 0 speaks {PROTOCOL_VERSION}: run the same collbench on every rank"))
    } else if token != shared.token {
        Some("wrong job token: it belongs to another job or is a stray process (every rank needs the same COLLBENCH_TOKEN / --token)".to_string())
    } else if world_size != n {
        Some(format!(
            "it expects a world of {world_size} ranks but this job has {n}"
        ))
    } else if rank == 0 || rank >= n {
        Some(format!("rank {rank} is not in 1..{n}"))
    } else if shared.complete.load(Ordering::SeqCst) {
        Some(format!(
            "all {n} ranks already joined (a second process with rank {rank}?)"
        ))
    } else {
        None
    };
    match problem {
        Some(reason) => refuse(stream, addr, &host, &format!("rank {rank}: {reason}")),
        None => {
            let hello = PeerHello {
                rank,
                local_rank,
                host,
                pid,
                info,
            };
            let _ = join_tx.send(Joiner {
                hello,
                stream,
                addr,
            });
        }
    }
}

/// Refuses a connection with a reason the client prints, and logs one line.
fn refuse(stream: TcpStream, addr: SocketAddr, host: &str, reason: &str) {
    eprintln!("collbench: rank 0 refused a connection from {addr} (host {host}): {reason}");
    let mut stream = stream;
    let _ = wire::write_frame(
        &mut stream,
        &Msg::Refused {
            reason: reason.to_string(),
        },
        &[],
    );
    let _ = stream.shutdown(Shutdown::Both);
}

/// Why one attempt to join failed.
enum Attempt {
    Refused(String),
    Retry(String),
}

fn join_as_peer(world: &World, timeout: Duration, own: PeerHello) -> Result<Link, LaunchError> {
    let host = world.rendezvous_host.clone().ok_or_else(|| {
        LaunchError::Discovery(format!(
            "rank {} does not know where rank 0 listens: set COLLBENCH_RENDEZVOUS=HOST:PORT or pass --rendezvous",
            world.rank
        ))
    })?;
    let port = world.rendezvous_port;
    let hello = Msg::Hello {
        protocol: PROTOCOL_VERSION,
        token: world.token.clone(),
        rank: world.rank,
        world_size: world.world_size,
        local_rank: world.local_rank,
        host: world.hostname.clone(),
        pid: own.pid,
    };
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last_problem = String::from("not tried");
    let stream = loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(LaunchError::Control(format!(
                "rank {} could not join rank 0 at {host}:{port} within {} s (last: {last_problem}): check that rank 0 runs and that {host}:{port} is reachable from {}",
                world.rank,
                timeout.as_secs(),
                world.hostname
            )));
        };
        match try_join(&host, port, &hello, &own.info, left) {
            Ok(stream) => break stream,
            Err(Attempt::Refused(reason)) => {
                return Err(LaunchError::Control(format!(
                    "rank 0 at {host}:{port} refused this process: {reason}"
                )))
            }
            Err(Attempt::Retry(problem)) => {
                last_problem = problem;
                thread::sleep(Duration::from_millis(100).min(left));
            }
        }
    };

    let (events_tx, events_rx) = mpsc::channel();
    let shared = Arc::new(Shared::new(world, timeout, events_tx));
    let Ok(writer) = stream.try_clone() else {
        return Err(LaunchError::Control(
            "cannot clone the socket to rank 0".into(),
        ));
    };
    let root = Arc::new(Peer {
        rank: 0,
        host: host.clone(),
        writer: Mutex::new(writer),
        left: AtomicBool::new(false),
        reader_done: AtomicBool::new(false),
    });
    lock(&shared.peers)[0] = Some(Arc::clone(&root));
    spawn_reader(Arc::clone(&shared), root, stream);
    spawn_heartbeat(Arc::clone(&shared));

    // Rank 0 decides (at its own deadline) whether everyone came; it stays
    // audible through heartbeats, so waiting for Ready is bounded either way.
    let mut state = new_state(events_rx, world.world_size);
    let ready_deadline = start + timeout * 2 + Duration::from_secs(5);
    loop {
        if let Some(failure) = shared.failure() {
            shared.close();
            return Err(LaunchError::Control(failure));
        }
        let Some(left) = ready_deadline.checked_duration_since(Instant::now()) else {
            let error = shared.fail(
                format!(
                    "rank 0 on host {host} did not start the job within {} s",
                    (timeout * 2).as_secs()
                ),
                None,
            );
            shared.close();
            return Err(error);
        };
        match state.events.recv_timeout(left) {
            Ok(Event::Frame {
                msg: Msg::Ready, ..
            }) => break,
            Ok(Event::Left(_)) => {
                shared.close();
                return Err(LaunchError::Control(format!(
                    "rank 0 on host {host} closed before the job started"
                )));
            }
            Ok(event) => absorb(&mut state, event),
            Err(_) => {}
        }
    }
    Ok(Link {
        shared,
        state: Mutex::new(state),
        hellos: Vec::new(),
    })
}

/// One attempt: connect, say hello, read the answer.
fn try_join(
    host: &str,
    port: u16,
    hello: &Msg,
    info: &[u8],
    left: Duration,
) -> Result<TcpStream, Attempt> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Attempt::Retry(format!("cannot resolve {host}: {e}")))?
        .collect();
    let mut problem = format!("{host} resolves to no address");
    for addr in addrs {
        let mut stream = match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(2))) {
            Ok(s) => s,
            Err(e) => {
                problem = format!("connect to {addr}: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(
            left.clamp(Duration::from_millis(10), Duration::from_secs(10)),
        ));
        let _ = stream.set_write_timeout(Some(left.max(Duration::from_millis(10))));
        if let Err(e) = wire::write_frame(&mut stream, hello, info) {
            problem = format!("hello to {addr}: {e}");
            continue;
        }
        match wire::read_frame(&mut stream) {
            Ok((Msg::Welcome, _)) => return Ok(stream),
            Ok((Msg::Refused { reason }, _)) => return Err(Attempt::Refused(reason)),
            Ok((other, _)) => problem = format!("{addr} answered {other:?} instead of a welcome"),
            Err(e) => problem = format!("{addr} answered no welcome: {e}"),
        }
    }
    Err(Attempt::Retry(problem))
}

/// Reads one connection until it closes; turns every way it can end
/// badly into a job failure naming the peer.
fn spawn_reader(shared: Arc<Shared>, peer: Arc<Peer>, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(shared.timeout));
    let _ = stream.set_write_timeout(Some(shared.timeout));
    let name = format!("collbench-rx-{}", peer.rank);
    let _ = thread::Builder::new().name(name).spawn(move || {
        read_until_end(&shared, &peer, &mut stream);
        peer.reader_done.store(true, Ordering::SeqCst);
    });
}

fn read_until_end(shared: &Shared, peer: &Peer, stream: &mut TcpStream) {
    loop {
        let frame = wire::read_frame(stream);
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let who = peer.name();
        let reason = match frame {
            Ok((Msg::Heartbeat, _)) => continue,
            Ok((Msg::Bye, _)) => {
                peer.left.store(true, Ordering::SeqCst);
                shared.event(Event::Left(peer.rank));
                return;
            }
            Ok((msg @ (Msg::Contribute { .. } | Msg::Result { .. } | Msg::Ready), payload)) => {
                shared.event(Event::Frame {
                    from: peer.rank,
                    msg,
                    payload,
                });
                continue;
            }
            Ok((Msg::Abort { reason }, _)) if peer.rank == 0 => {
                format!("rank 0 stopped the job: {reason}")
            }
            // A rank's own abort reason already names it (see `abort`).
            Ok((Msg::Abort { reason }, _)) => reason,
            Ok((other, _)) => {
                format!("{who} sent an unexpected {other:?} (a different collbench version?)")
            }
            Err(ReadError::Closed) => {
                format!("{who} disconnected (its process exited, crashed or was killed)")
            }
            Err(ReadError::Silent) => format!(
                "{who} sent nothing for {} s (stopped, hung or unreachable)",
                shared.timeout.as_secs()
            ),
            Err(e) => format!("{who}: {e}"),
        };
        shared.fail(reason, Some(peer.rank));
        return;
    }
}

/// Sends heartbeats to every peer until closing (one thread per process).
fn spawn_heartbeat(shared: Arc<Shared>) {
    let interval = heartbeat_interval(shared.timeout);
    let _ = thread::Builder::new()
        .name("collbench-heartbeat".into())
        .spawn(move || {
            let mut next = Instant::now();
            while !shared.closing.load(Ordering::SeqCst) {
                if Instant::now() >= next {
                    for peer in shared.peers() {
                        if !peer.left.load(Ordering::SeqCst) {
                            // A failed write is the reader's to report.
                            let _ = peer.send(&Msg::Heartbeat, &[]);
                        }
                    }
                    next = Instant::now() + interval;
                }
                thread::sleep(interval.min(Duration::from_millis(20)));
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Launcher;
    use std::io::Write;

    fn world(rank: usize, n: usize, port: u16) -> World {
        World {
            rank,
            world_size: n,
            local_rank: 0,
            local_world_size: 1,
            hostname: format!("host{rank}"),
            rendezvous_host: Some("127.0.0.1".into()),
            rendezvous_port: port,
            bind: "127.0.0.1".into(),
            token: "job".into(),
            launcher: Launcher::Explicit,
        }
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A rank that joins properly and then stops talking, like a process
    /// under SIGSTOP: its socket stays open but heartbeats stop.
    fn silent_rank(port: u16, rank: usize, n: usize) -> TcpStream {
        let hello = Msg::Hello {
            protocol: PROTOCOL_VERSION,
            token: "job".into(),
            rank,
            world_size: n,
            local_rank: 0,
            host: "frozen".into(),
            pid: 1,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match try_join("127.0.0.1", port, &hello, &[], Duration::from_secs(5)) {
                Ok(stream) => return stream,
                Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
                Err(_) => panic!("could not join"),
            }
        }
    }

    #[test]
    fn a_silent_rank_is_detected_within_the_timeout() {
        let port = free_port();
        let args = LaunchArgs {
            timeout_s: 2,
            ..LaunchArgs::default()
        };
        let args2 = args.clone();
        let root = thread::spawn(move || {
            let control = Control::connect(&world(0, 3, port), &args).unwrap();
            let start = Instant::now();
            (control.barrier().unwrap_err().to_string(), start.elapsed())
        });
        let live = thread::spawn(move || {
            let control = Control::connect(&world(1, 3, port), &args2).unwrap();
            control.barrier().unwrap_err().to_string()
        });
        let _frozen = silent_rank(port, 2, 3);
        let (root_error, waited) = root.join().unwrap();
        assert!(
            root_error.contains("rank 2 on host frozen sent nothing for 2 s"),
            "{root_error}"
        );
        assert!(waited < Duration::from_secs(2 + 5), "{waited:?}");
        let live_error = live.join().unwrap();
        assert!(live_error.contains("rank 2 on host frozen"), "{live_error}");
    }

    #[test]
    fn garbage_clients_are_dropped_and_the_job_goes_on() {
        let port = free_port();
        let args = LaunchArgs {
            timeout_s: 5,
            ..LaunchArgs::default()
        };
        let args2 = args.clone();
        let root = thread::spawn(move || {
            Control::connect(&world(0, 2, port), &args2).map(|c| c.all_gather(vec![7]))
        });
        thread::sleep(Duration::from_millis(200));
        let mut http = TcpStream::connect(("127.0.0.1", port)).unwrap();
        http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut huge = TcpStream::connect(("127.0.0.1", port)).unwrap();
        huge.write_all(&[0xff; 8]).unwrap();
        let peer = Control::connect(&world(1, 2, port), &args).unwrap();
        assert_eq!(peer.all_gather(vec![8]).unwrap(), vec![vec![7], vec![8]]);
        assert_eq!(
            root.join().unwrap().unwrap().unwrap(),
            vec![vec![7], vec![8]]
        );
    }
}
