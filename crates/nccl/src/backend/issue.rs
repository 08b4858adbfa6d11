//! Issuing one collective: the NCCL call of each collective, the
//! send/recv pieces of those NCCL lacks (before 2.28, and sendrecv and
//! hypercube always), and the per-GPU reduction operators.

use super::buffers::Buffers;
use super::comms::Comms;
use super::device::DeviceApi;
use super::needs_pre_mul_sum;
use crate::api::NativeOps;
use crate::cuda::{self, DevicePtr};
use crate::ffi::{self, RedOpId};
use crate::group::{self, Group};
use crate::kernels;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::Collective;
use collbench_runner::{BackendError, CaseSpec};

/// How a collective reaches NCCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    /// ncclAlltoAll (NCCL >= 2.28)
    AllToAll,
    /// ncclGather (NCCL >= 2.28)
    Gather,
    /// ncclScatter (NCCL >= 2.28)
    Scatter,
    /// ncclSend/ncclRecv in one group, as [`p2p_steps`] lists them.
    P2p,
    /// The own chunk copied, then [`hypercube_rounds`], each its group.
    HyperCube,
    /// ncclSend/ncclRecv with per-peer counts, in one group
    /// ([`crate::alltoallv::issue`]).
    AllToAllV,
}

/// The route of collective `c` with the collectives this NCCL has.
pub(crate) fn route(c: Collective, native: NativeOps) -> Route {
    match c {
        Collective::AllReduce => Route::AllReduce,
        Collective::AllGather => Route::AllGather,
        Collective::ReduceScatter => Route::ReduceScatter,
        Collective::Broadcast => Route::Broadcast,
        Collective::Reduce => Route::Reduce,
        Collective::AllToAll if native.alltoall => Route::AllToAll,
        Collective::Gather if native.gather => Route::Gather,
        Collective::Scatter if native.scatter => Route::Scatter,
        Collective::AllToAll | Collective::Gather | Collective::Scatter | Collective::SendRecv => {
            Route::P2p
        }
        Collective::HyperCube => Route::HyperCube,
        Collective::AllToAllV => Route::AllToAllV,
    }
}

/// One point-to-point piece: `count` elements to or from `peer`, at
/// element offset `at` of the send (Send) or receive (Recv) buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum P2p {
    Send { peer: usize, at: usize },
    Recv { peer: usize, at: usize },
}

/// A send to `peer` from element offset `at`.
fn send(peer: usize, at: usize) -> P2p {
    P2p::Send { peer, at }
}

/// A receive from `peer` into element offset `at`.
fn recv(peer: usize, at: usize) -> P2p {
    P2p::Recv { peer, at }
}

/// Calls `f` with the pieces of collective `c` on `rank`, in issue order
/// (no allocation: this runs in the timed loop).
pub(crate) fn p2p_steps<E>(
    c: Collective,
    rank: usize,
    world: usize,
    root: usize,
    count: usize,
    mut f: impl FnMut(P2p) -> Result<(), E>,
) -> Result<(), E> {
    match c {
        Collective::AllToAll => {
            for peer in 0..world {
                f(send(peer, peer * count))?;
                f(recv(peer, peer * count))?;
            }
            Ok(())
        }
        Collective::SendRecv => {
            f(send((rank + 1) % world, 0))?;
            f(recv((rank + world - 1) % world, 0))
        }
        Collective::Gather | Collective::Scatter => {
            // The root receives (gather) or sends (scatter) one chunk per
            // rank, itself included; every rank sends or receives its own.
            type Step = fn(usize, usize) -> P2p;
            let (at_root, own): (Step, Step) = if c == Collective::Gather {
                (recv, send)
            } else {
                (send, recv)
            };
            if rank == root {
                for peer in 0..world {
                    f(at_root(peer, peer * count))?;
                }
            }
            f(own(root, 0))
        }
        _ => Ok(()),
    }
}

/// One hypercube round: send what `rank` has gathered so far and receive
/// the peer's, both within the receive buffer (element offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub(crate) peer: usize,
    pub(crate) send_at: usize,
    pub(crate) recv_at: usize,
    pub(crate) count: usize,
}

/// log2(world) pairwise exchanges of everything gathered so far, the
/// block doubling each round.
pub(crate) fn hypercube_rounds(
    rank: usize,
    world: usize,
    count: usize,
) -> impl Iterator<Item = Exchange> {
    std::iter::successors(Some(1usize), |b| b.checked_mul(2))
        .take_while(move |&block| block < world)
        .map(move |block| {
            let peer = rank ^ block;
            Exchange {
                peer,
                send_at: (rank & !(block - 1)) * count,
                recv_at: (peer & !(block - 1)) * count,
                count: block * count,
            }
        })
}

/// What a case's collectives need beyond the buffers: alltoallv's
/// per-peer counts (the operators of [`Issue::make_ops`] are handed back
/// to the caller, who frees them).
#[derive(Default)]
pub(crate) struct Issue {
    /// alltoallv's per-peer counts of the case being run (set by
    /// `make_ops`, so the timed loop does not recompute them).
    pub(crate) peers: Option<PeerCounts>,
}

impl Issue {
    /// Creates the per-GPU reduction operators (premulsum needs one per
    /// communicator); built-ins need nothing.
    /// Also makes alltoallv's per-peer counts for `case` (kept until the
    /// next case), so that no launch recomputes them.
    pub(crate) fn make_ops(
        &mut self,
        comms: &Comms,
        case: &CaseSpec,
    ) -> Result<Vec<RedOpId>, BackendError> {
        self.peers = (case.collective == Collective::AllToAllV).then(|| {
            comms.settings.traffic.peer_counts(
                case.counts.param_count,
                case.dtype.size_bytes(),
                case.world_size,
            )
        });
        let mut ops = Vec::new();
        for gpu in &comms.gpus {
            if needs_pre_mul_sum(case) {
                if !comms.nccl.has_pre_mul_sum() {
                    return Err(BackendError::Unsupported(
                        "mulsum needs NCCL >= 2.11 (ncclRedOpCreatePreMulSum)".into(),
                    ));
                }
                let pat = kernels::pattern(case, 0);
                let scalar = kernels::scalar_bytes(case.dtype, pat.scalar(gpu.rank));
                ops.push(comms.nccl.pre_mul_sum(&scalar, case.dtype, &gpu.comm)?);
            } else {
                ops.push(ffi::redop_id(case.redop));
            }
        }
        Ok(ops)
    }

    /// Destroys the operators [`Issue::make_ops`] created.
    pub(crate) fn free_ops(&self, comms: &Comms, case: &CaseSpec, ops: &[RedOpId]) {
        if case.redop != collbench_core::ReduceOp::MulSum {
            return;
        }
        for (gpu, &op) in comms.gpus.iter().zip(ops) {
            comms.nccl.red_op_destroy(op, &gpu.comm);
        }
    }

    /// The library calls of one collective on local GPU `i`.
    fn issue(
        &self,
        comms: &Comms,
        case: &CaseSpec,
        i: usize,
        (send, recv): (DevicePtr, DevicePtr),
        op: RedOpId,
    ) -> Result<(), BackendError> {
        let n = &comms.nccl;
        let gpu = &comms.gpus[i];
        let (comm, s) = (&gpu.comm, &gpu.stream);
        let dt = case.dtype;
        let elt = dt.size_bytes() as u64;
        let count = case.counts.param_count as usize;
        let (world, rank, root) = (case.world_size, gpu.rank, case.root);
        let at = |p: DevicePtr, elems: usize| p.offset_by(elems as u64 * elt);
        match route(case.collective, n.native()) {
            Route::AllReduce => n.all_reduce(send, recv, count, dt, op, comm, s)?,
            Route::AllGather => n.all_gather(send, recv, count, dt, comm, s)?,
            Route::ReduceScatter => n.reduce_scatter(send, recv, count, dt, op, comm, s)?,
            Route::Broadcast => n.broadcast(send, recv, count, dt, root, comm, s)?,
            Route::Reduce => n.reduce(send, recv, count, dt, op, root, comm, s)?,
            Route::AllToAll => n.alltoall(send, recv, count, dt, comm, s)?,
            Route::Gather => n.gather(send, recv, count, dt, root, comm, s)?,
            Route::Scatter => n.scatter(send, recv, count, dt, root, comm, s)?,
            Route::P2p => {
                let group = Group::start(n)?;
                p2p_steps(
                    case.collective,
                    rank,
                    world,
                    root,
                    count,
                    |step| match step {
                        P2p::Send { peer, at: e } => n.send(at(send, e), count, dt, peer, comm, s),
                        P2p::Recv { peer, at: e } => n.recv(at(recv, e), count, dt, peer, comm, s),
                    },
                )?;
                group.end()?;
            }
            Route::AllToAllV => {
                let peers = self.peers.as_ref().ok_or_else(|| {
                    BackendError::Library("alltoallv launched before its counts were made".into())
                })?;
                n.alltoallv(peers, rank, send, recv, dt, comm, s)?;
            }
            Route::HyperCube => {
                let own = at(recv, rank * count);
                if own != send && count > 0 {
                    gpu.dev.bind()?;
                    cuda::copy_async(own, send, count * elt as usize, s)?;
                }
                for x in hypercube_rounds(rank, world, count) {
                    let group = Group::start(n)?;
                    n.send(at(recv, x.send_at), x.count, dt, x.peer, comm, s)?;
                    n.recv(at(recv, x.recv_at), x.count, dt, x.peer, comm, s)?;
                    group.end()?;
                }
            }
        }
        Ok(())
    }
}

/// The parts a launch reads, borrowed together while the communicators
/// are borrowed on their own (waiting on them may abort them).
#[derive(Clone, Copy)]
pub(crate) struct Launcher<'a> {
    pub(crate) buffers: &'a Buffers,
    pub(crate) device: &'a DeviceApi,
    pub(crate) issue: &'a Issue,
}

impl Launcher<'_> {
    /// Enqueues one operation of `case` on every local GPU (in one group
    /// when there are several).
    pub(crate) fn launch(
        &self,
        comms: &Comms,
        case: &CaseSpec,
        iter: u64,
        max_bytes: u64,
        ops: &[RedOpId],
    ) -> Result<(), BackendError> {
        if let Some(d) = self.device.implementation() {
            return self.device.launch(comms, self.buffers, case, d, max_bytes);
        }
        let group = Group::start_if(comms.gpus.len() > 1, &comms.nccl)?;
        for (i, &op) in ops.iter().enumerate().take(comms.gpus.len()) {
            let ptrs = self.buffers.ptrs(comms, case, i, iter, max_bytes);
            self.issue.issue(comms, case, i, ptrs, op)?;
        }
        group::end_if(group)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: NativeOps = NativeOps {
        alltoall: false,
        gather: false,
        scatter: false,
    };
    const NEW: NativeOps = NativeOps {
        alltoall: true,
        gather: true,
        scatter: true,
    };

    #[test]
    fn each_collective_has_its_route() {
        use Collective::*;
        for (c, old, new) in [
            (AllReduce, Route::AllReduce, Route::AllReduce),
            (AllGather, Route::AllGather, Route::AllGather),
            (ReduceScatter, Route::ReduceScatter, Route::ReduceScatter),
            (Broadcast, Route::Broadcast, Route::Broadcast),
            (Reduce, Route::Reduce, Route::Reduce),
            (AllToAll, Route::P2p, Route::AllToAll),
            (Gather, Route::P2p, Route::Gather),
            (Scatter, Route::P2p, Route::Scatter),
            (SendRecv, Route::P2p, Route::P2p),
            (HyperCube, Route::HyperCube, Route::HyperCube),
            (AllToAllV, Route::AllToAllV, Route::AllToAllV),
        ] {
            assert_eq!(route(c, OLD), old, "{c:?} before 2.28");
            assert_eq!(route(c, NEW), new, "{c:?} from 2.28");
        }
    }

    fn steps(c: Collective, rank: usize, world: usize, root: usize, count: usize) -> Vec<P2p> {
        let mut v = Vec::new();
        p2p_steps::<()>(c, rank, world, root, count, |s| {
            v.push(s);
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn alltoall_sends_and_receives_one_chunk_per_peer() {
        assert_eq!(
            steps(Collective::AllToAll, 1, 3, 0, 10),
            [
                send(0, 0),
                recv(0, 0),
                send(1, 10),
                recv(1, 10),
                send(2, 20),
                recv(2, 20)
            ]
        );
    }

    #[test]
    fn sendrecv_is_a_ring() {
        for (rank, want) in [(0, [send(1, 0), recv(3, 0)]), (3, [send(0, 0), recv(2, 0)])] {
            let got = steps(Collective::SendRecv, rank, 4, 0, 8);
            assert_eq!(got, want, "rank {rank}");
        }
    }

    #[test]
    fn gather_and_scatter_only_the_root_talks_to_everyone() {
        use Collective::{Gather, Scatter};
        // (collective, rank, root, steps) on two ranks, 5 elements each.
        for (c, rank, root, want) in [
            (Gather, 1, 1, vec![recv(0, 0), recv(1, 5), send(1, 0)]),
            (Gather, 0, 1, vec![send(1, 0)]),
            (Scatter, 0, 0, vec![send(0, 0), send(1, 5), recv(0, 0)]),
            (Scatter, 1, 0, vec![recv(0, 0)]),
        ] {
            let got = steps(c, rank, 2, root, 5);
            assert_eq!(got, want, "{c:?} rank {rank} root {root}");
        }
    }

    #[test]
    fn an_error_stops_the_steps() {
        let mut n = 0;
        let r = p2p_steps(Collective::AllToAll, 0, 4, 0, 1, |_| {
            n += 1;
            if n == 3 {
                Err("ncclSend failed")
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err("ncclSend failed"));
        assert_eq!(n, 3);
    }

    #[test]
    fn hypercube_doubles_the_block_each_round() {
        let r: Vec<Exchange> = hypercube_rounds(2, 8, 4).collect();
        assert_eq!(
            r,
            [
                Exchange {
                    peer: 3,
                    send_at: 8,
                    recv_at: 12,
                    count: 4
                },
                Exchange {
                    peer: 0,
                    send_at: 8,
                    recv_at: 0,
                    count: 8
                },
                Exchange {
                    peer: 6,
                    send_at: 0,
                    recv_at: 16,
                    count: 16
                },
            ]
        );
        assert_eq!(hypercube_rounds(0, 1, 4).count(), 0);
        assert_eq!(hypercube_rounds(1, 2, 4).count(), 1);
    }

    #[test]
    fn hypercube_ends_with_every_chunk_on_every_rank() {
        // Follow which chunks each rank holds: after the rounds, all.
        let world = 8;
        let mut have: Vec<Vec<bool>> = (0..world)
            .map(|r| (0..world).map(|c| c == r).collect())
            .collect();
        let rounds: Vec<Vec<Exchange>> = (0..world)
            .map(|r| hypercube_rounds(r, world, 1).collect())
            .collect();
        for round in 0..rounds[0].len() {
            let before = have.clone();
            for (rank, ex) in rounds.iter().enumerate() {
                let x = ex[round];
                // What the peer sends (its send_at window) lands at recv_at.
                let peer_x = rounds[x.peer][round];
                assert_eq!(peer_x.send_at, x.recv_at);
                assert_eq!(peer_x.count, x.count);
                for c in x.recv_at..x.recv_at + x.count {
                    assert!(
                        before[x.peer][c],
                        "rank {} sends chunk {c} it lacks",
                        x.peer
                    );
                    have[rank][c] = true;
                }
            }
        }
        assert!(have.iter().all(|h| h.iter().all(|&b| b)));
    }
}
