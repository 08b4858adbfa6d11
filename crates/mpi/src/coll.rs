//! One operation of each collective through MPI, on this rank's buffers.
//!
//! Buffers follow nccl-tests' layout, in-place included: the in-place send
//! buffer of rank r starts `send_inplace_offset * r` elements into its
//! receive buffer (and the result `recv_inplace_offset * r` in). Where that
//! layout is MPI's own in-place form, MPI gets MPI_IN_PLACE; broadcast,
//! sendrecv and reduce_scatter need a local copy to fit (see each arm).

use crate::ops::{self, check, count, Op};
use collbench_core::alltoallv::PeerCounts;
use collbench_core::element::Element;
use collbench_core::{Collective, ReduceOp};
use collbench_runner::{BackendError, CaseSpec};
use mpi::ffi;
use std::os::raw::{c_int, c_void};

/// The signature MPI_Allgather and MPI_Alltoall share.
type Exchange = unsafe extern "C" fn(
    *const c_void,
    c_int,
    ffi::MPI_Datatype,
    *mut c_void,
    c_int,
    ffi::MPI_Datatype,
    ffi::MPI_Comm,
) -> c_int;

/// This rank's pointers for one operation.
pub struct Ptrs<T> {
    pub send: *mut T,
    pub recv: *mut T,
    /// Private space of `send_count` elements (mulsum's premultiplied input).
    pub scratch: *mut T,
}

/// What stays the same for every operation of a case.
pub struct Ctx<'a, T> {
    pub comm: ffi::MPI_Comm,
    pub rank: usize,
    pub world_size: usize,
    /// The reduction (reducing collectives only).
    pub op: Option<&'a Op>,
    /// mulsum's factor for this rank (`Pattern::scalar(rank)`).
    pub scalar: T,
    /// alltoallv's per-peer counts (alltoallv only).
    pub peers: Option<PeerCounts>,
}

const TAG: c_int = 0x5eed;

fn ptr<T>(p: *const T) -> *const c_void {
    p as *const c_void
}

fn mptr<T>(p: *mut T) -> *mut c_void {
    p as *mut c_void
}

/// Runs one operation of `case` as this rank.
///
/// # Safety
/// `p` points into buffers sized for `case` (as [`crate::MpiBackend`]
/// allocates them), and every rank of the communicator calls this for the
/// same case at the same time.
pub unsafe fn run_op<T: Element>(
    ctx: &Ctx<'_, T>,
    case: &CaseSpec,
    p: &Ptrs<T>,
) -> Result<(), BackendError> {
    let c = &case.counts;
    let (r, n) = (ctx.rank, ctx.world_size);
    let dt = ops::datatype(T::DTYPE);
    let comm = ctx.comm;
    let base = c.param_count as usize;
    let cnt = count(c.param_count)?;
    let root = case.root as c_int;
    let is_root = r == case.root;
    let op = || {
        ctx.op.map(Op::raw).ok_or_else(|| {
            BackendError::Library(format!("{} needs a reduction operator", case.collective))
        })
    };
    // mulsum reduces a premultiplied copy, as ncclRedOpCreatePreMulSum
    // scales each input; the copy makes the call out-of-place.
    let premultiplied = case.redop == ReduceOp::MulSum && ctx.op.is_some();
    let input: *const T = if premultiplied {
        let len = c.send_count as usize;
        let src = std::slice::from_raw_parts(p.send, len);
        let dst = std::slice::from_raw_parts_mut(p.scratch, len);
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.mul(ctx.scalar);
        }
        p.scratch
    } else {
        p.send
    };
    // MPI_IN_PLACE where this rank's input already sits where MPI reads it.
    let aliased = std::ptr::eq(input, p.recv);
    let ip = ops::in_place();
    match case.collective {
        Collective::AllReduce => {
            let send = if aliased { ip } else { ptr(input) };
            check(
                ffi::MPI_Allreduce(send, mptr(p.recv), cnt, dt, op()?, comm),
                "MPI_Allreduce",
            )?;
            average(case, p.recv, base, n);
        }
        Collective::ReduceScatter => {
            if case.in_place && !premultiplied {
                // MPI's in-place form reads the whole buffer and leaves the
                // result at its start; nccl-tests expects it at chunk r.
                check(
                    ffi::MPI_Reduce_scatter_block(ip, mptr(p.send), cnt, dt, op()?, comm),
                    "MPI_Reduce_scatter_block",
                )?;
                std::ptr::copy(p.send, p.recv, base);
            } else {
                check(
                    ffi::MPI_Reduce_scatter_block(ptr(input), mptr(p.recv), cnt, dt, op()?, comm),
                    "MPI_Reduce_scatter_block",
                )?;
            }
            average(case, p.recv, base, n);
        }
        Collective::Reduce => {
            let send = if aliased && is_root { ip } else { ptr(input) };
            check(
                ffi::MPI_Reduce(send, mptr(p.recv), cnt, dt, op()?, root, comm),
                "MPI_Reduce",
            )?;
            if is_root {
                average(case, p.recv, base, n);
            }
        }
        Collective::AllGather | Collective::AllToAll => {
            // The same arguments: `cnt` elements to or from every rank.
            let (call, name) = if case.collective == Collective::AllGather {
                (ffi::MPI_Allgather as Exchange, "MPI_Allgather")
            } else {
                (ffi::MPI_Alltoall as Exchange, "MPI_Alltoall")
            };
            let send = if case.in_place { ip } else { ptr(input) };
            check(call(send, cnt, dt, mptr(p.recv), cnt, dt, comm), name)?;
        }
        Collective::Broadcast => {
            // MPI_Bcast has one buffer: out of place, the root first copies
            // its input to where every rank receives.
            if is_root && !aliased {
                std::ptr::copy_nonoverlapping(input, p.recv, base);
            }
            check(
                ffi::MPI_Bcast(mptr(p.recv), cnt, dt, root, comm),
                "MPI_Bcast",
            )?;
        }
        Collective::Gather => {
            let send = if case.in_place && is_root {
                ip
            } else {
                ptr(input)
            };
            check(
                ffi::MPI_Gather(send, cnt, dt, mptr(p.recv), cnt, dt, root, comm),
                "MPI_Gather",
            )?;
        }
        Collective::Scatter => {
            let recv = if case.in_place && is_root {
                ip
            } else {
                mptr(p.recv)
            };
            check(
                ffi::MPI_Scatter(ptr(input), cnt, dt, recv, cnt, dt, root, comm),
                "MPI_Scatter",
            )?;
        }
        Collective::SendRecv => {
            let (next, prev) = (((r + 1) % n) as c_int, ((r + n - 1) % n) as c_int);
            if aliased {
                check(
                    ffi::MPI_Sendrecv_replace(
                        mptr(p.recv),
                        cnt,
                        dt,
                        next,
                        TAG,
                        prev,
                        TAG,
                        comm,
                        ffi::RSMPI_STATUS_IGNORE,
                    ),
                    "MPI_Sendrecv_replace",
                )?;
            } else {
                check(
                    ffi::MPI_Sendrecv(
                        ptr(input),
                        cnt,
                        dt,
                        next,
                        TAG,
                        mptr(p.recv),
                        cnt,
                        dt,
                        prev,
                        TAG,
                        comm,
                        ffi::RSMPI_STATUS_IGNORE,
                    ),
                    "MPI_Sendrecv",
                )?;
            }
        }
        Collective::AllToAllV => {
            let peers = ctx
                .peers
                .as_ref()
                .ok_or_else(|| BackendError::Library("alltoallv without per-peer counts".into()))?;
            alltoallv(ctx, peers, p, case.in_place)?;
        }
        Collective::HyperCube => {
            // log2(n) pairwise exchanges; after the step with partner
            // r ^ block each rank holds the 2 * block chunks of its group.
            let own = p.recv.add(r * base);
            if !std::ptr::eq(own, input) {
                std::ptr::copy_nonoverlapping(input, own, base);
            }
            let mut block = 1;
            while block < n {
                let partner = r ^ block;
                let mine = p.recv.add((r & !(block - 1)) * base);
                let theirs = p.recv.add((partner & !(block - 1)) * base);
                let len = count((block * base) as u64)?;
                check(
                    ffi::MPI_Sendrecv(
                        ptr(mine),
                        len,
                        dt,
                        partner as c_int,
                        TAG,
                        mptr(theirs),
                        len,
                        dt,
                        partner as c_int,
                        TAG,
                        comm,
                        ffi::RSMPI_STATUS_IGNORE,
                    ),
                    "MPI_Sendrecv",
                )?;
                block <<= 1;
            }
        }
    }
    Ok(())
}

/// One alltoallv as this rank through `MPI_Alltoallv`, with the per-peer
/// counts and displacements of `peers`. In place (send data inside the
/// receive buffer, laid out as the send side) the send data is staged in
/// `p.scratch` first: MPI's in-place form assumes one layout for both.
///
/// # Safety
/// As [`run_op`]; `p.scratch` holds `peers.send_total(rank)` elements.
pub unsafe fn alltoallv<T: Element>(
    ctx: &Ctx<'_, T>,
    peers: &PeerCounts,
    p: &Ptrs<T>,
    in_place: bool,
) -> Result<(), BackendError> {
    let (r, n) = (ctx.rank, ctx.world_size);
    let ints = |f: &dyn Fn(usize) -> u64| -> Result<Vec<c_int>, BackendError> {
        (0..n).map(|k| count(f(k))).collect()
    };
    let send_counts = ints(&|k| peers.count(r, k))?;
    let send_displs = ints(&|k| peers.send_displ(r, k))?;
    let recv_counts = ints(&|k| peers.count(k, r))?;
    let recv_displs = ints(&|k| peers.recv_displ(r, k))?;
    let input: *const T = if in_place {
        std::ptr::copy_nonoverlapping(p.send, p.scratch, peers.send_total(r) as usize);
        p.scratch
    } else {
        p.send
    };
    let dt = ops::datatype(T::DTYPE);
    check(
        ffi::MPI_Alltoallv(
            ptr(input),
            send_counts.as_ptr(),
            send_displs.as_ptr(),
            dt,
            mptr(p.recv),
            recv_counts.as_ptr(),
            recv_displs.as_ptr(),
            dt,
            ctx.comm,
        ),
        "MPI_Alltoallv",
    )
}

/// avg is a sum divided by the number of ranks afterwards (truncating for
/// integers), as core's `Pattern::reduced` defines it.
unsafe fn average<T: Element>(case: &CaseSpec, out: *mut T, len: usize, n: usize) {
    if case.redop != ReduceOp::Avg {
        return;
    }
    let n = n as f64;
    let out = std::slice::from_raw_parts_mut(out, len);
    if T::DTYPE.is_float() {
        out.iter_mut()
            .for_each(|o| *o = T::from_value(o.value() / n));
    } else {
        out.iter_mut()
            .for_each(|o| *o = T::from_value((o.value() / n).trunc()));
    }
}
