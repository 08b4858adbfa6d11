//! The machinery of one call: a sequence number under the call lock,
//! rank 0 collecting parts and answering, the others contributing and
//! awaiting the answer, every wait bounded by a deadline, and parts that
//! arrive early buffered until their call comes.

use super::hub::handle::Command;
use super::shared::{Event, Link, Outbox, Part, State};
use super::{lock, Control};
use crate::ranks_phrase;
use crate::wire::{self, Msg, Op};
use crate::LaunchError;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::MutexGuard;
use std::thread;
use std::time::{Duration, Instant};

impl Control {
    /// Rank 0: waits for every rank's part of call `step`.
    pub(super) fn collect(
        &self,
        link: &Link,
        state: &mut State,
        step: Step,
        own: Vec<u8>,
    ) -> Result<Vec<Vec<u8>>, LaunchError> {
        let n = self.world.world_size;
        let deadline = self.call_deadline();
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; n];
        parts[0] = Some(own);
        let mut remaining = n - 1;
        // Ranks to look at: all at first (parts that came early), then
        // only those the last events were about, so a gather of W parts
        // costs O(W), not O(W) per arriving part.
        let mut touched: Vec<usize> = (1..n).collect();
        loop {
            for rank in touched.drain(..) {
                if rank == 0 || parts[rank].is_some() {
                    continue;
                }
                if let Some(part) = state.pending[rank].pop_front() {
                    parts[rank] = Some(self.check_step(link, rank, part, step)?);
                    remaining -= 1;
                } else if state.left[rank] {
                    let who = link.hellos[rank].host.as_str();
                    return Err(link.shared.fail(
                        format!("rank {rank} on host {who} left before {step}: every rank must make the same control-plane calls"),
                        Some(rank),
                    ));
                }
            }
            if remaining == 0 {
                return Ok(parts.into_iter().flatten().collect());
            }
            if !self.wait(link, state, deadline, &mut touched)? {
                let missing: Vec<usize> = (1..n).filter(|&r| parts[r].is_none()).collect();
                let hosts: Vec<&str> = missing
                    .iter()
                    .map(|&r| link.hellos[r].host.as_str())
                    .collect();
                return Err(link.shared.fail(
                    format!(
                        "{step} timed out after {} s waiting for {} (on {}): they are alive but did not make the call",
                        self.timeout.as_secs(),
                        ranks_phrase(&missing),
                        dedup(hosts).join(", ")
                    ),
                    None,
                ));
            }
        }
    }

    /// Other ranks: waits for rank 0's answer to call `step`.
    pub(super) fn await_answer(
        &self,
        link: &Link,
        state: &mut State,
        step: Step,
    ) -> Result<Vec<u8>, LaunchError> {
        let deadline = self.call_deadline();
        let root = self.root_host();
        loop {
            if let Some(part) = state.pending[0].pop_front() {
                return self.check_step(link, 0, part, step);
            }
            if state.left[0] {
                return Err(LaunchError::Control(format!(
                    "rank 0 on host {root} closed the control plane before {step}: it finished or failed first (see its output)"
                )));
            }
            if !self.wait(link, state, deadline, &mut Vec::new())? {
                return Err(link.shared.fail(
                    format!(
                        "{step}: rank 0 on host {root} did not answer within {} s",
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
        part: Part,
        step: Step,
    ) -> Result<Vec<u8>, LaunchError> {
        let Step { op, seq } = step;
        if part.seq == seq && part.op == op {
            return Ok(part.data);
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

    /// Other ranks: this rank's part of call `step`, to rank 0.
    pub(super) fn contribute(
        &self,
        link: &Link,
        step: Step,
        data: &[u8],
    ) -> Result<(), LaunchError> {
        let Step { op, seq } = step;
        self.send(link, &Msg::Contribute { seq, op }, data)
    }

    /// Rank 0: the same answer to every other rank (one buffer, queued
    /// for each by the event loop).
    pub(super) fn answer_all(
        &self,
        link: &Link,
        step: Step,
        data: &[u8],
    ) -> Result<(), LaunchError> {
        if let Some(failure) = link.shared.failure() {
            return Err(LaunchError::Control(failure));
        }
        if let Some(rank) = (1..self.world.world_size).find(|&r| link.shared.left(r)) {
            return Err(self.left_before(link, rank));
        }
        let Step { op, seq } = step;
        let frame = wire::encode(&Msg::Result { seq, op }, data)
            .map_err(|e| link.shared.fail(format!("cannot send {step}: {e}"), None))?;
        link.shared.hub().command(Command::SendAll {
            except: None,
            frame: frame.into(),
            written: None,
        });
        Ok(())
    }

    fn left_before(&self, link: &Link, rank: usize) -> LaunchError {
        let host = link
            .hellos
            .get(rank)
            .map_or_else(|| self.root_host(), |h| h.host.clone());
        LaunchError::Control(format!(
            "rank {rank} on host {host} closed the control plane before this call: it finished or failed first (see its output)"
        ))
    }

    /// Other ranks: a frame to rank 0, written here (one connection).
    fn send(&self, link: &Link, msg: &Msg, data: &[u8]) -> Result<(), LaunchError> {
        if let Some(failure) = link.shared.failure() {
            return Err(LaunchError::Control(failure));
        }
        let Outbox::Root(peer) = &link.shared.out else {
            return Err(LaunchError::Control(
                "only ranks other than 0 send to rank 0 (a bug)".into(),
            ));
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
            return Err(self.left_before(link, 0));
        }
        Err(link
            .shared
            .fail(format!("{} disconnected ({e})", peer.name()), Some(0)))
    }

    /// Waits for events until `deadline`; `Ok(false)` when it passed.
    /// What already arrived is taken before a failure is reported, so a call
    /// whose answer came before a peer died still completes. The ranks the
    /// events were about go into `touched`.
    fn wait(
        &self,
        link: &Link,
        state: &mut State,
        deadline: Instant,
        touched: &mut Vec<usize>,
    ) -> Result<bool, LaunchError> {
        let mut got_any = false;
        while let Ok(event) = state.events.try_recv() {
            absorb(state, event, touched);
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
                absorb(state, event, touched);
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
        Instant::now() + self.timeout + self.board.beat()
    }

    fn root_host(&self) -> String {
        self.world
            .rendezvous_host
            .clone()
            .unwrap_or_else(|| "?".into())
    }
}

/// One control-plane call: its kind and its number. Every rank makes the
/// same calls in the same order, so a part must match both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Step {
    pub op: Op,
    pub seq: u64,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} #{}", self.op, self.seq)
    }
}

/// Takes the call lock and the next call's number; after a failure every
/// call fails at once with the first failure's message.
pub(super) fn start_call(
    link: &Link,
    op: Op,
) -> Result<(MutexGuard<'_, State>, Step), LaunchError> {
    if let Some(failure) = link.shared.failure() {
        return Err(LaunchError::Control(failure));
    }
    let mut state = lock(&link.state);
    state.seq += 1;
    let seq = state.seq;
    Ok((state, Step { op, seq }))
}

/// Buffers what an event brought; the ranks it was about go into
/// `touched`.
pub(super) fn absorb(state: &mut State, event: Event, touched: &mut Vec<usize>) {
    let rank = match event {
        Event::Frame {
            from,
            msg: Msg::Contribute { seq, op } | Msg::Result { seq, op },
            payload,
        } => {
            state.pending[from].push_back(Part {
                seq,
                op,
                data: payload,
            });
            from
        }
        Event::Left(rank) => {
            state.left[rank] = true;
            rank
        }
        Event::Batch(events) => {
            for event in events {
                absorb(state, event, touched);
            }
            return;
        }
        Event::Frame { .. } | Event::Failed | Event::Joined => return,
    };
    touched.push(rank);
}

fn dedup(mut items: Vec<&str>) -> Vec<&str> {
    items.sort_unstable();
    items.dedup();
    items
}
