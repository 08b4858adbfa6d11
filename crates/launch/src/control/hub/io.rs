//! Rank 0's event loop, the socket side: accepting, reading whole frames
//! off non-blocking sockets, writing queued frames, and what a connection
//! that closes or sends garbage means.

use super::{Ending, Hub, Outcome, FIRST};
use crate::wire::{self, ReadError};
use mio::net::TcpStream;
use mio::{Interest, Token};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One connection: a rank once its hello is admitted.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) addr: SocketAddr,
    /// `None` until its hello is admitted.
    pub(super) rank: Option<usize>,
    pub(super) host: String,
    pub(super) inbuf: Vec<u8>,
    pub(super) out: VecDeque<Arc<[u8]>>,
    /// Bytes of `out.front()` already written.
    pub(super) written: usize,
    pub(super) last_heard: Instant,
    /// When the oldest unwritten frame was queued (a rank that stops
    /// reading is as stuck as one that stops writing).
    pub(super) stalled_since: Option<Instant>,
    /// Before admission: when to give up on its hello.
    pub(super) hello_deadline: Instant,
    /// Refused, or said goodbye: close once written / once it closes.
    pub(super) finished: bool,
}

impl Conn {
    pub(super) fn name(&self) -> String {
        match self.rank {
            Some(rank) => format!("rank {rank} on host {}", self.host),
            None => format!("a connection from {}", self.addr),
        }
    }

    pub(super) fn queue(&mut self, frame: Arc<[u8]>) {
        if self.out.is_empty() {
            self.stalled_since = Some(Instant::now());
        }
        self.out.push_back(frame);
    }
}

impl Hub {
    pub(super) fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, addr)) => {
                    if self.ending.is_some() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let i = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(i + FIRST), interest)
                        .is_err()
                    {
                        self.free.push(i);
                        continue;
                    }
                    let now = Instant::now();
                    self.conns[i] = Some(Conn {
                        stream,
                        addr,
                        rank: None,
                        host: "?".into(),
                        inbuf: Vec::new(),
                        out: VecDeque::new(),
                        written: 0,
                        last_heard: now,
                        stalled_since: None,
                        hello_deadline: now + self.shared.timeout.min(Duration::from_secs(10)),
                        finished: false,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // Out of descriptors or a connection reset before accept:
                // the peer retries; try again on the next readiness.
                Err(_) => return,
            }
        }
    }

    /// Reads (when there is something to read) and writes what is queued
    /// for connection `i`: a socket is writable after nearly every ACK, and
    /// a read that can only say WouldBlock is a wasted syscall per rank.
    pub(super) fn service(&mut self, i: usize, readable: bool) {
        let outcome = match readable {
            true => self.read(i),
            false => Outcome::Open,
        };
        let queued = self.conns[i].as_ref().is_some_and(|c| !c.out.is_empty());
        let outcome = match outcome {
            Outcome::Open if queued => self.write(i),
            other => other,
        };
        self.settle(i, outcome);
    }

    pub(super) fn read(&mut self, i: usize) -> Outcome {
        let Some(conn) = self.conns[i].as_mut() else {
            return Outcome::Open;
        };
        let closed = loop {
            match conn.stream.read(&mut self.scratch) {
                Ok(0) => break Some(ReadError::Closed),
                Ok(n) => {
                    conn.inbuf.extend_from_slice(&self.scratch[..n]);
                    // A short read drained the socket: more data makes a
                    // new readiness event, so skip the read that would
                    // only say WouldBlock (a syscall per rank per row).
                    if n < self.scratch.len() {
                        break None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Some(ReadError::from(e)),
            }
        };
        let mut used = 0;
        loop {
            let Some(conn) = self.conns[i].as_mut() else {
                return Outcome::Open;
            };
            match wire::decode(&conn.inbuf[used..]) {
                Ok(Some((msg, payload, n))) => {
                    used += n;
                    conn.last_heard = Instant::now();
                    match self.frame(i, msg, payload) {
                        Outcome::Open => {}
                        other => return other,
                    }
                }
                Ok(None) => break,
                Err(e) => return self.broken(i, e),
            }
        }
        let Some(conn) = self.conns[i].as_mut() else {
            return Outcome::Open;
        };
        conn.inbuf.drain(..used);
        // Bounded memory per rank: a hello (a few KiB) or a large answer
        // leaves no large buffer behind (16384 ranks x 4 KiB = 64 MiB).
        if conn.inbuf.is_empty() && conn.inbuf.capacity() > 1024 {
            conn.inbuf = Vec::new();
        }
        match closed {
            Some(e) => self.broken(i, e),
            None => Outcome::Open,
        }
    }

    /// A connection that closed or sent garbage.
    pub(super) fn broken(&mut self, i: usize, e: ReadError) -> Outcome {
        let Some(conn) = self.conns[i].as_ref() else {
            return Outcome::Open;
        };
        let who = conn.name();
        if conn.finished || self.ending.is_some() {
            return Outcome::Drop;
        }
        let Some(rank) = conn.rank else {
            self.note(format!(
                "dropped {who}: {e} before a hello (not a collbench rank?)"
            ));
            return Outcome::Drop;
        };
        if self.joined < self.shared.world_size && matches!(e, ReadError::Closed) {
            // Before Ready a rank may give up on a slow welcome and try
            // again (a connect storm): it is not a failure, it rejoins (or
            // is named at the deadline if it died).
            self.note(format!(
                "lost {who} before the job started (it exited, or retries a slow join): waiting for it to join again"
            ));
            self.unadmit(rank);
            return Outcome::Drop;
        }
        Outcome::Fail(match e {
            ReadError::Closed => {
                format!("{who} disconnected (its process exited, crashed or was killed)")
            }
            e => format!("{who}: {e}"),
        })
    }

    /// Writes what is queued for connection `i` until it would block.
    pub(super) fn write(&mut self, i: usize) -> Outcome {
        let Some(conn) = self.conns[i].as_mut() else {
            return Outcome::Open;
        };
        while let Some(front) = conn.out.front() {
            match conn.stream.write(&front[conn.written..]) {
                Ok(n) => {
                    conn.written += n;
                    conn.stalled_since = Some(Instant::now());
                    if conn.written == front.len() {
                        conn.out.pop_front();
                        conn.written = 0;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Outcome::Open,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Reading will tell why (a goodbye, an abort, a reset).
                Err(_) => {
                    conn.out.clear();
                    break;
                }
            }
        }
        conn.stalled_since = None;
        if conn.finished && conn.rank.is_none() {
            // A refusal is written: close.
            return Outcome::Drop;
        }
        if matches!(self.ending, Some(Ending::Goodbye(_))) {
            let _ = conn.stream.shutdown(Shutdown::Write);
        }
        Outcome::Open
    }
}
