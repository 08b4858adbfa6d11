//! Simulated ranks 1..W: a few threads, each driving many non-blocking
//! sockets that speak the real wire protocol to the real rank 0: connect
//! with jittered backoff, hello with a preflight-sized attachment,
//! Welcome, Ready, heartbeats; for each row rank 0 releases (the end of a
//! collective, which a real job learns from NCCL, not from the control
//! plane), a gather part of a runner report's size, then the agreement
//! rounds' 16 bytes (an all_max's gather part, or an all_gather's part;
//! as a real rank, each waits for a round's answer before its next part);
//! goodbye when rank 0 says goodbye.

use super::{Agree, ScaleOptions};
use crate::wire::{self, Msg, Op, PROTOCOL_VERSION};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the simulated ranks saw.
#[derive(Debug, Clone, Default)]
pub struct SwarmReport {
    /// From the first connect attempt until the last rank heard Ready.
    pub ready_s: f64,
    /// Connect attempts beyond the first, over all ranks (refused while
    /// rank 0 was not listening yet, or a full accept queue).
    pub retries: u64,
    /// From the last rank's death until every other rank had rank 0's
    /// Abort, s (0 when no rank was killed).
    pub abort_s: f64,
}

/// What rank 0 has said on its stdout: rows released so far (every rank
/// sends its part of each), and whether the last rank is to die now; plus
/// the wakers of the client threads, so either is acted on at once.
#[derive(Default)]
pub struct Rows {
    released: AtomicUsize,
    kill: AtomicBool,
    /// When the last rank's connection was dropped.
    killed_at: Mutex<Option<Instant>>,
    /// When rank 0's process closed its stdout (exited).
    root_gone: Mutex<Option<Instant>>,
    wakers: Mutex<Vec<Arc<Waker>>>,
}

impl Rows {
    /// Rows `0..n` are done on every simulated rank: send their parts.
    pub fn release(&self, n: usize) {
        self.released.store(n, Ordering::SeqCst);
        self.wake();
    }

    /// The last rank dies (its connection drops without a goodbye); every
    /// other rank then expects rank 0's Abort.
    pub fn kill_last(&self) {
        self.kill.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Rank 0's process has ended: ranks still waiting give up soon
    /// (instead of at their deadline, minutes later).
    pub fn root_gone(&self) {
        *self.root_gone.lock().unwrap() = Some(Instant::now());
        self.wake();
    }

    fn wake(&self) {
        for waker in self.wakers.lock().unwrap().iter() {
            let _ = waker.wake();
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for `retry_at` to (re)connect.
    Idle,
    Connecting,
    /// Hello sent, waiting for Welcome.
    Hello,
    Joined,
    Ready,
    /// Rank 0 said goodbye; ours is sent.
    Done,
}

struct Client {
    rank: usize,
    stream: Option<TcpStream>,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    stage: Stage,
    /// Idle: when to connect again. Connecting, Hello: when to give up
    /// on this attempt (as a real rank's connect and welcome timeouts).
    retry_at: Instant,
    backoff: Duration,
    /// Rounds whose part is queued.
    rows_sent: usize,
    /// Answers (`Result` frames) read so far.
    answers: usize,
}

const WAKE: Token = Token(usize::MAX);

/// Runs ranks 1..W against rank 0 at `addr` until rank 0 says goodbye.
pub fn run(opts: &ScaleOptions, addr: SocketAddr, rows: &Arc<Rows>) -> Result<SwarmReport, String> {
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let threads = opts.client_threads.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let ranks: Vec<usize> = (1..opts.world_size).filter(|r| r % threads == t).collect();
            let (opts, stop, rows) = (opts.clone(), Arc::clone(&stop), Arc::clone(rows));
            let first_error = Arc::clone(&first_error);
            thread::spawn(move || {
                let result = drive(&opts, addr, ranks, start, &stop, &rows);
                if let Err(e) = &result {
                    stop.store(true, Ordering::SeqCst);
                    first_error.lock().unwrap().get_or_insert(e.clone());
                }
                result
            })
        })
        .collect();
    let mut report = SwarmReport::default();
    for h in handles {
        if let Ok(seen) = h.join().map_err(|_| "a client thread panicked")? {
            report.ready_s = report.ready_s.max(seen.ready_s);
            report.retries += seen.retries;
            let killed_at = *rows.killed_at.lock().unwrap();
            if let (Some(killed), Some(aborted)) = (killed_at, seen.last_abort) {
                let abort_s = aborted.saturating_duration_since(killed).as_secs_f64();
                report.abort_s = report.abort_s.max(abort_s);
            }
        }
    }
    let first_error = first_error.lock().unwrap().take();
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// What one client thread saw.
struct Seen {
    /// Last Ready, s after the start.
    ready_s: f64,
    retries: u64,
    /// When its last rank got rank 0's Abort (after a kill).
    last_abort: Option<Instant>,
}

/// One thread's ranks.
fn drive(
    opts: &ScaleOptions,
    addr: SocketAddr,
    ranks: Vec<usize>,
    start: Instant,
    stop: &AtomicBool,
    rows: &Rows,
) -> Result<Seen, String> {
    let err = |e: std::io::Error| e.to_string();
    let poll = Poll::new().map_err(err)?;
    rows.wakers
        .lock()
        .unwrap()
        .push(Arc::new(Waker::new(poll.registry(), WAKE).map_err(err)?));
    let mut events = Events::with_capacity(1024);
    let mut ranks = Ranks::new(opts, addr, ranks, start, rows, poll);
    let deadline = start + Duration::from_secs(opts.timeout_s * 2 + 30);
    let beat = Duration::from_secs(2).min(Duration::from_secs(opts.timeout_s) / 4);
    let mut next_beat = start + beat;
    let mut next_timers = start;
    while ranks.clients.iter().any(|c| c.stage != Stage::Done) {
        if stop.load(Ordering::SeqCst) {
            return Err("stopped: another client thread failed".into());
        }
        let now = Instant::now();
        ranks.still_in_time(now, deadline)?;
        if now >= next_timers {
            next_timers = now + Duration::from_millis(10);
            ranks.connect_due(now)?;
        }
        if now >= next_beat {
            next_beat = now + beat;
            ranks.heartbeat()?;
        }
        if rows.kill.load(Ordering::SeqCst) {
            ranks.drop_victim();
        }
        ranks.send_released()?;
        ranks
            .poll
            .poll(&mut events, Some(Duration::from_millis(10)))
            .map_err(err)?;
        for event in events.iter() {
            if event.token() != WAKE {
                ranks.on_event(event)?;
            }
        }
    }
    Ok(Seen {
        ready_s: ranks.last_ready,
        retries: ranks.retries,
        last_abort: ranks.last_abort,
    })
}

/// One client thread's simulated ranks, their poll, and what they have
/// seen so far: the state [`drive`]'s loop steps through.
struct Ranks<'a> {
    opts: &'a ScaleOptions,
    addr: SocketAddr,
    start: Instant,
    rows: &'a Rows,
    poll: Poll,
    clients: Vec<Client>,
    hello_info: Vec<u8>,
    /// A row's part, as each rank reports it.
    report: Vec<u8>,
    rng: u64,
    retries: u64,
    /// Last Ready, s after the start.
    last_ready: f64,
    last_abort: Option<Instant>,
    scratch: Vec<u8>,
    /// Rounds released so far, as last seen.
    released_seen: usize,
    parts: Vec<Vec<u8>>,
}

impl<'a> Ranks<'a> {
    fn new(
        opts: &'a ScaleOptions,
        addr: SocketAddr,
        ranks: Vec<usize>,
        start: Instant,
        rows: &'a Rows,
        poll: Poll,
    ) -> Ranks<'a> {
        let clients: Vec<Client> = ranks
            .into_iter()
            .map(|rank| Client {
                rank,
                stream: None,
                inbuf: Vec::new(),
                out: Vec::new(),
                stage: Stage::Idle,
                retry_at: start,
                backoff: Duration::from_millis(20),
                rows_sent: 0,
                answers: 0,
            })
            .collect();
        let rng = 0x9e37_79b9_7f4a_7c15u64 ^ (clients.first().map_or(1, |c| c.rank) as u64);
        Ranks {
            opts,
            addr,
            start,
            rows,
            poll,
            clients,
            hello_info: vec![b'i'; opts.hello_bytes],
            report: vec![b'r'; opts.report_bytes],
            rng,
            retries: 0,
            last_ready: 0.0,
            last_abort: None,
            scratch: vec![0u8; 64 << 10],
            released_seen: 0,
            parts: Vec::new(),
        }
    }

    /// Fails once the deadline has passed or rank 0's process has been
    /// gone two seconds, saying how many ranks were not done.
    fn still_in_time(&self, now: Instant, deadline: Instant) -> Result<(), String> {
        let root_gone = *self.rows.root_gone.lock().unwrap();
        if now > deadline || root_gone.is_some_and(|t| now > t + Duration::from_secs(2)) {
            let behind = self
                .clients
                .iter()
                .filter(|c| c.stage != Stage::Done)
                .count();
            let why = match root_gone {
                Some(_) => "rank 0's process ended",
                None => "the deadline passed",
            };
            return Err(format!("{why} with {behind} simulated ranks not done"));
        }
        Ok(())
    }

    /// Retries the joins that timed out and starts those due.
    fn connect_due(&mut self, now: Instant) -> Result<(), String> {
        let err = |e: std::io::Error| e.to_string();
        for (i, c) in self.clients.iter_mut().enumerate() {
            if matches!(c.stage, Stage::Connecting | Stage::Hello) && c.retry_at <= now {
                retry(c, &self.poll, &mut self.rng, &mut self.retries);
            } else if c.stage == Stage::Idle && c.retry_at <= now {
                let mut stream = TcpStream::connect(self.addr).map_err(err)?;
                let interest = Interest::READABLE | Interest::WRITABLE;
                self.poll
                    .registry()
                    .register(&mut stream, Token(i), interest)
                    .map_err(err)?;
                c.stream = Some(stream);
                c.stage = Stage::Connecting;
                c.retry_at = now + wire::CONNECT_TIMEOUT;
            }
        }
        Ok(())
    }

    /// A heartbeat from every rank that has joined.
    fn heartbeat(&mut self) -> Result<(), String> {
        let frame = wire::encode(&Msg::Heartbeat, &wire::word_payload(0)).unwrap();
        for c in self.clients.iter_mut() {
            if matches!(c.stage, Stage::Joined | Stage::Ready) {
                c.out.extend_from_slice(&frame);
                flush(c)?;
            }
        }
        Ok(())
    }

    /// The kill: the last rank's connection drops (if this thread has it).
    fn drop_victim(&mut self) {
        let victim = self.opts.world_size - 1;
        if let Some(c) = self
            .clients
            .iter_mut()
            .find(|c| c.rank == victim && c.stream.is_some())
        {
            if let Some(mut stream) = c.stream.take() {
                let _ = self.poll.registry().deregister(&mut stream);
            }
            c.stage = Stage::Done;
            *self.rows.killed_at.lock().unwrap() = Some(Instant::now());
        }
    }

    /// Every rank's parts of the rounds the harness has newly released.
    fn send_released(&mut self) -> Result<(), String> {
        let released = self.rows.released.load(Ordering::SeqCst);
        if released != self.released_seen {
            self.released_seen = released;
            for c in self.clients.iter_mut() {
                let frame = |k| round_frame(self.opts, k, &self.report);
                send_parts(c, self.opts.rows, released, &mut self.parts, &frame)?;
            }
        }
        Ok(())
    }

    /// One readiness event of rank `event.token()`'s connection: the hello
    /// once connected, then writes, reads and answers.
    fn on_event(&mut self, event: &mio::event::Event) -> Result<(), String> {
        let i = event.token().0;
        if self.clients[i].stage == Stage::Connecting && !self.say_hello(i, event) {
            return Ok(());
        }
        let c = &mut self.clients[i];
        if !c.out.is_empty() {
            flush(c)?;
        }
        if !(event.is_readable() || event.is_read_closed()) {
            return Ok(());
        }
        let closed = read_all(c, &mut self.scratch)?;
        let mut used = 0;
        while let Some((msg, _, n)) =
            wire::decode(&c.inbuf[used..]).map_err(|e| format!("rank {}: {e}", c.rank))?
        {
            used += n;
            if msg == Msg::Ready {
                self.last_ready = self.last_ready.max(self.start.elapsed().as_secs_f64());
            }
            if matches!(msg, Msg::Abort { .. }) && self.rows.kill.load(Ordering::SeqCst) {
                // The kill's expected news: this rank is done.
                self.last_abort = Some(Instant::now());
                c.stage = Stage::Done;
                c.out.clear();
                break;
            }
            answer(c, msg)?;
        }
        if c.stage == Stage::Done && self.last_abort.is_some() {
            c.stream = None;
            return Ok(());
        }
        c.inbuf.drain(..used);
        let frame = |k| round_frame(self.opts, k, &self.report);
        send_parts(
            c,
            self.opts.rows,
            self.released_seen,
            &mut self.parts,
            &frame,
        )?;
        if closed {
            match c.stage {
                Stage::Done => c.stream = None,
                // Accepted by the kernel, dropped before a welcome.
                Stage::Hello => retry(c, &self.poll, &mut self.rng, &mut self.retries),
                _ => return Err(format!("rank 0 closed rank {}'s connection", c.rank)),
            }
        }
        Ok(())
    }

    /// Rank `i`'s connection: once connected, queues its hello; false
    /// while the event is not (yet) a connection, retried on failure.
    fn say_hello(&mut self, i: usize, event: &mio::event::Event) -> bool {
        let c = &mut self.clients[i];
        let stream = c.stream.as_ref().expect("connecting has a stream");
        let failed = matches!(stream.take_error(), Ok(Some(_)) | Err(_));
        if failed || event.is_error() || event.is_read_closed() {
            retry(c, &self.poll, &mut self.rng, &mut self.retries);
            return false;
        }
        if stream.peer_addr().is_err() {
            return false; // not connected yet
        }
        c.stage = Stage::Hello;
        c.retry_at = Instant::now() + Duration::from_secs(10);
        let hello = Msg::Hello {
            protocol: PROTOCOL_VERSION,
            token: self.opts.token.clone(),
            rank: c.rank,
            world_size: self.opts.world_size,
            local_rank: c.rank % 8,
            host: format!("sim{}", c.rank / 8),
            pid: c.rank as u32,
            nonce: c.rank as u64,
        };
        c.out = wire::encode(&hello, &self.hello_info).unwrap();
        true
    }
}

/// What a rank sends in round `k`: a row's gather part (rank 0's call
/// `k + 1`), then the agreement rounds' 16 bytes, as an all_max's gather
/// part (call `rows + 2j + 1`; the broadcast after it takes no part) and
/// then as an all_gather part.
fn round_frame(opts: &ScaleOptions, k: usize, report: &[u8]) -> Vec<u8> {
    let rows = opts.rows;
    // Below rank 0's own figures (1, 2), so the maximum is rank 0's.
    let figures: Vec<u8> = [0.5f64, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let (seq, op, data) = match k.checked_sub(rows) {
        None => (k + 1, Op::Gather, report),
        Some(j) => {
            // Calls before round j: an all_max makes two, an all_gather one.
            let rounds = super::agreement(opts);
            let calls: usize = rounds[..j]
                .iter()
                .map(|a| if matches!(a, Agree::Gather) { 1 } else { 2 })
                .sum();
            let op = match rounds[j] {
                Agree::Gather => Op::AllGather,
                Agree::Max { .. } => Op::Gather,
            };
            (rows + calls + 1, op, &figures[..])
        }
    };
    let part = Msg::Contribute {
        seq: seq as u64,
        op,
    };
    wire::encode(&part, data).expect("a small frame encodes")
}

/// Queues (and writes) this rank's parts of the rounds released so far.
/// Every rank's part of a round is the same frame, encoded once
/// (`parts[k]`, by `frame(k)`).
fn send_parts(
    c: &mut Client,
    rows: usize,
    released: usize,
    parts: &mut Vec<Vec<u8>>,
    frame: &dyn Fn(usize) -> Vec<u8>,
) -> Result<(), String> {
    // Rows take no answer; every agreement round takes one, which a real
    // rank reads before it makes its next call.
    let released = released.min(rows + c.answers + 1);
    if c.stage != Stage::Ready || c.rows_sent >= released {
        return Ok(());
    }
    while parts.len() < released {
        parts.push(frame(parts.len()));
    }
    for part in &parts[c.rows_sent..released] {
        c.out.extend_from_slice(part);
    }
    c.rows_sent = released;
    flush(c)
}

/// What a simulated rank does with one frame from rank 0.
fn answer(c: &mut Client, msg: Msg) -> Result<(), String> {
    let rank = c.rank;
    match msg {
        Msg::Welcome => c.stage = Stage::Joined,
        Msg::Ready => c.stage = Stage::Ready,
        Msg::Heartbeat => {}
        // An agreement round's answer (dropped): the next part may go.
        Msg::Result { .. } => c.answers += 1,
        Msg::Bye => {
            c.out.extend(wire::encode(&Msg::Bye, &[]).unwrap());
            c.stage = Stage::Done;
            flush(c)?;
        }
        Msg::Refused { reason } => return Err(format!("rank {rank} refused: {reason}")),
        Msg::Abort { reason } | Msg::Stop { reason, .. } => {
            return Err(format!("rank {rank} told to stop: {reason}"))
        }
        other => return Err(format!("rank {rank} got an unexpected {other:?}")),
    }
    Ok(())
}

/// Reads what is there; true when the peer closed.
fn read_all(c: &mut Client, scratch: &mut [u8]) -> Result<bool, String> {
    let Some(stream) = c.stream.as_mut() else {
        return Ok(true);
    };
    loop {
        match stream.read(scratch) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                c.inbuf.extend_from_slice(&scratch[..n]);
                if n < scratch.len() {
                    return Ok(false); // drained: more data brings a new event
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) if matches!(c.stage, Stage::Hello | Stage::Done) => return Ok(true),
            Err(e) => return Err(format!("rank {}: {e}", c.rank)),
        }
    }
}

/// Writes what is queued until the socket would block.
fn flush(c: &mut Client) -> Result<(), String> {
    let Some(stream) = c.stream.as_mut() else {
        return Ok(());
    };
    while !c.out.is_empty() {
        match stream.write(&c.out) {
            Ok(n) => {
                c.out.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) if c.stage == Stage::Done => c.out.clear(),
            Err(e) => return Err(format!("rank {}: {e}", c.rank)),
        }
    }
    if c.stage == Stage::Done && c.out.is_empty() {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}

/// Drops the connection and schedules another attempt, backing off with
/// jitter so that thousands of ranks do not retry in lockstep.
fn retry(c: &mut Client, poll: &Poll, rng: &mut u64, retries: &mut u64) {
    if let Some(mut stream) = c.stream.take() {
        let _ = poll.registry().deregister(&mut stream);
    }
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let jitter = 0.5 + (*rng % 1000) as f64 / 1000.0;
    c.retry_at = Instant::now() + c.backoff.mul_f64(jitter);
    c.backoff = (c.backoff * 2).min(Duration::from_secs(1));
    c.stage = Stage::Idle;
    c.inbuf.clear();
    c.out.clear();
    *retries += 1;
}
