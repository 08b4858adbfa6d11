//! The machinery of one call: a sequence number under the call lock,
//! rank 0 collecting parts and answering, the others contributing and
//! awaiting the answer, every wait bounded by a deadline, and parts that
//! arrive early buffered until their call comes.

use super::liveness::heartbeat_interval;
use super::shared::{lock, Event, Link, Part, State};
use super::Control;
use crate::ranks_phrase;
use crate::wire::{Msg, Op};
use crate::LaunchError;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::MutexGuard;
use std::thread;
use std::time::{Duration, Instant};

impl Control {
    /// Rank 0: waits for every rank's part of call `seq`.
    pub(super) fn collect(
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
    pub(super) fn await_answer(
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

    pub(super) fn contribute(
        &self,
        link: &Link,
        op: Op,
        seq: u64,
        data: &[u8],
    ) -> Result<(), LaunchError> {
        self.send(link, 0, &Msg::Contribute { seq, op }, data)
    }

    pub(super) fn answer_all(
        &self,
        link: &Link,
        op: Op,
        seq: u64,
        data: &[u8],
    ) -> Result<(), LaunchError> {
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

/// Takes the call lock and a sequence number; after a failure every call
/// fails at once with the first failure's message.
pub(super) fn start_call(link: &Link) -> Result<(MutexGuard<'_, State>, u64), LaunchError> {
    if let Some(failure) = link.shared.failure() {
        return Err(LaunchError::Control(failure));
    }
    let mut state = lock(&link.state);
    state.seq += 1;
    let seq = state.seq;
    Ok((state, seq))
}

pub(super) fn absorb(state: &mut State, event: Event) {
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
