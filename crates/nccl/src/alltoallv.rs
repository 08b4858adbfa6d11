//! alltoallv through NCCL, as nccl-tests 2.19.6 issues it: one group of
//! `ncclSend`/`ncclRecv` per rank, peers in rank order, a peer with no
//! elements skipped. Counts and displacements come from the run's traffic
//! ([`collbench_core::alltoallv::PeerCounts`]).
//!
//! The entry points arrive as plain function pointers so that the backend
//! (and tests, with recording fakes) can pass whatever it loaded.

use crate::ffi::{Comm, DataTypeId, NcclResult, Stream, NCCL_SUCCESS};
use collbench_core::alltoallv::PeerCounts;
use std::ffi::{c_int, c_void};

/// `ncclSend`
pub type SendFn =
    unsafe extern "C" fn(*const c_void, usize, DataTypeId, c_int, Comm, Stream) -> NcclResult;
/// `ncclRecv`
pub type RecvFn =
    unsafe extern "C" fn(*mut c_void, usize, DataTypeId, c_int, Comm, Stream) -> NcclResult;
/// `ncclGroupStart` / `ncclGroupEnd`
pub type GroupFn = unsafe extern "C" fn() -> NcclResult;

/// The NCCL calls alltoallv needs.
#[derive(Clone, Copy)]
pub struct P2p {
    pub send: SendFn,
    pub recv: RecvFn,
    pub group_start: GroupFn,
    pub group_end: GroupFn,
}

/// A failed NCCL call: its name and result code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallError {
    pub call: &'static str,
    pub code: NcclResult,
}

/// One alltoallv from `rank`'s side: sends what `peers` says `rank` sends
/// to each peer from `send` (at its send displacement) and receives each
/// peer's segment into `recv` (at its receive displacement), inside one
/// NCCL group. The group is closed even when a call in it fails; the first
/// failure is returned.
///
/// # Safety
/// `send` and `recv` are device buffers of `rank` valid for
/// `peers.send_total(rank)` and `peers.recv_total(rank)` elements of
/// `elt_size` bytes; `comm` and `stream` are live; the function pointers
/// are NCCL's (or behave like them).
#[allow(clippy::too_many_arguments)]
pub unsafe fn issue(
    p2p: &P2p,
    peers: &PeerCounts,
    rank: usize,
    send: *const c_void,
    recv: *mut c_void,
    elt_size: usize,
    dtype: DataTypeId,
    comm: Comm,
    stream: Stream,
) -> Result<(), CallError> {
    let at = |base: usize, elems: u64| base + elems as usize * elt_size;
    let check = |call, code| {
        if code == NCCL_SUCCESS {
            Ok(())
        } else {
            Err(CallError { call, code })
        }
    };
    // A failed call stops the issuing; the group is still closed below.
    let issue_peer = |peer: usize| {
        let out = peers.count(rank, peer);
        if out > 0 {
            let buf = at(send as usize, peers.send_displ(rank, peer)) as *const c_void;
            let r = (p2p.send)(buf, out as usize, dtype, peer as c_int, comm, stream);
            check("ncclSend", r)?;
        }
        let inc = peers.count(peer, rank);
        if inc > 0 {
            let buf = at(recv as usize, peers.recv_displ(rank, peer)) as *mut c_void;
            let r = (p2p.recv)(buf, inc as usize, dtype, peer as c_int, comm, stream);
            check("ncclRecv", r)?;
        }
        Ok(())
    };
    check("ncclGroupStart", (p2p.group_start)())?;
    let first = (0..peers.world_size()).try_for_each(issue_peer);
    let end = check("ncclGroupEnd", (p2p.group_end)());
    first.and(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::alltoallv::{Traffic, TrafficMatrix};
    use std::cell::RefCell;

    thread_local! {
        static CALLS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }
    fn log(s: String) -> NcclResult {
        CALLS.with(|c| c.borrow_mut().push(s));
        NCCL_SUCCESS
    }
    /// # Safety
    /// A stand-in for NCCL's call: it reads nothing through its pointers.
    unsafe extern "C" fn send(
        b: *const c_void,
        n: usize,
        _: DataTypeId,
        p: c_int,
        _: Comm,
        _: Stream,
    ) -> NcclResult {
        log(format!("send {} {n} to {p}", b as usize))
    }
    /// # Safety
    /// A stand-in for NCCL's call: it reads nothing through its pointers.
    unsafe extern "C" fn recv(
        b: *mut c_void,
        n: usize,
        _: DataTypeId,
        p: c_int,
        _: Comm,
        _: Stream,
    ) -> NcclResult {
        if p == 2 {
            return 3;
        }
        log(format!("recv {} {n} from {p}", b as usize))
    }
    /// # Safety
    /// A stand-in for NCCL's call: it reads nothing through its pointers.
    unsafe extern "C" fn start() -> NcclResult {
        log("start".into())
    }
    /// # Safety
    /// A stand-in for NCCL's call: it reads nothing through its pointers.
    unsafe extern "C" fn end() -> NcclResult {
        log("end".into())
    }

    #[test]
    fn grouped_sends_and_receives_at_displacements() {
        // Bytes: rank 1 sends 48 to 0, 0 to itself, 16 to 2; receives 32
        // from 0, 64 from 2 (an error from the fake, closing the group).
        let m = TrafficMatrix::parse("t", "0 32 0\n48 0 16\n0 64 0\n", None).unwrap();
        let peers = Traffic::Matrix(m).peer_counts(0, 4, 3);
        let p2p = P2p {
            send,
            recv,
            group_start: start,
            group_end: end,
        };
        let null = std::ptr::null_mut();
        // SAFETY: the fakes only record their arguments.
        let r = unsafe {
            issue(
                &p2p,
                &peers,
                1,
                1000 as *const c_void,
                5000 as *mut c_void,
                4,
                7,
                null,
                null,
            )
        };
        assert_eq!(
            r,
            Err(CallError {
                call: "ncclRecv",
                code: 3
            })
        );
        let calls = CALLS.with(|c| c.borrow().clone());
        assert_eq!(
            calls,
            vec![
                "start",
                "send 1000 12 to 0",
                "recv 5000 8 from 0",
                "send 1048 4 to 2",
                "end"
            ]
        );
    }
}
