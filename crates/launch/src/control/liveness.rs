//! Liveness on ranks other than 0: they hold one connection (to rank 0),
//! so a reader thread and a heartbeat thread. Rank 0 does the same for
//! every rank in its event loop (`hub`). A peer that closes without a
//! goodbye or sends nothing for the timeout becomes the job's failure,
//! named by rank and host.

use super::shared::{Event, Peer, Shared};
use crate::wire::{self, Msg, ReadError};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Heartbeat period: four beats per timeout, so one late beat is no alarm,
/// and four per watchdog deadline (`watchdog`), so a rank is known silent
/// (three beats missed, [`collbench_core::Heard`]) before the deadline
/// passes; at most 2 s, at least 20 ms.
pub(super) fn heartbeat_interval(timeout: Duration, watchdog: Option<Duration>) -> Duration {
    let within = watchdog.map_or(timeout, |w| w.min(timeout));
    (within / 4).clamp(Duration::from_millis(20), Duration::from_secs(2))
}

/// Reads one connection until it closes; turns every way it can end
/// badly into a job failure naming the peer.
pub(super) fn spawn_reader(shared: Arc<Shared>, peer: Arc<Peer>, mut stream: TcpStream) {
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
            Ok((Msg::Heartbeat, payload)) => {
                shared.board.record(peer.rank, wire::payload_word(&payload));
                continue;
            }
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
            // `abort_job`: verbatim everywhere; rank 0 passes it on.
            Ok((Msg::Stop { reason, kind }, _)) => {
                let failure = collbench_core::PeerFailure {
                    kind,
                    message: reason,
                };
                shared.stop(failure, Some(peer.rank));
                return;
            }
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

/// Sends heartbeats (with this rank's progress word) to rank 0 until
/// closing.
pub(super) fn spawn_heartbeat(shared: Arc<Shared>, root: Arc<Peer>) {
    let interval = shared.board.beat();
    let _ = thread::Builder::new()
        .name("collbench-heartbeat".into())
        .spawn(move || {
            let mut next = Instant::now();
            while !shared.closing.load(Ordering::SeqCst) {
                if Instant::now() >= next {
                    if !root.left.load(Ordering::SeqCst) {
                        // A failed write is the reader's to report.
                        let word = wire::word_payload(shared.board.own());
                        let _ = root.send(&Msg::Heartbeat, &word);
                    }
                    next = Instant::now() + interval;
                }
                thread::sleep(interval.min(Duration::from_millis(20)));
            }
        });
}
