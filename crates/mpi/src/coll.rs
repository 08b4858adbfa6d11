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
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let call = Call::new(ctx, case, p)?;
        match case.collective {
            Collective::AllReduce => all_reduce(&call),
            Collective::ReduceScatter => reduce_scatter(&call),
            Collective::Reduce => reduce(&call),
            Collective::AllGather => exchange(&call, ffi::MPI_Allgather, "MPI_Allgather"),
            Collective::AllToAll => exchange(&call, ffi::MPI_Alltoall, "MPI_Alltoall"),
            Collective::Broadcast => broadcast(&call),
            Collective::Gather => gather(&call),
            Collective::Scatter => scatter(&call),
            Collective::SendRecv => send_recv(&call),
            Collective::AllToAllV => {
                let peers = ctx.peers.as_ref().ok_or_else(|| {
                    BackendError::Library("alltoallv without per-peer counts".into())
                })?;
                alltoallv(ctx, peers, p, case.in_place)
            }
            Collective::HyperCube => hypercube(&call),
        }
    }
}

/// What every collective's MPI call takes, worked out once per operation
/// (mulsum's premultiplied input included), so each collective's function
/// holds only its own call.
struct Call<'a, 'c, T> {
    ctx: &'a Ctx<'c, T>,
    case: &'a CaseSpec,
    p: &'a Ptrs<T>,
    /// Where this rank's input is read: the send buffer, or mulsum's
    /// premultiplied copy in `p.scratch`.
    input: *const T,
    /// The input is mulsum's premultiplied copy (so the call is out of place).
    premultiplied: bool,
    /// The input already sits where MPI reads it: MPI_IN_PLACE.
    aliased: bool,
    dt: ffi::MPI_Datatype,
    /// `param_count`, as MPI takes it and as a length.
    cnt: c_int,
    base: usize,
    root: c_int,
    is_root: bool,
}

impl<'a, 'c, T: Element> Call<'a, 'c, T> {
    /// The call's arguments; premultiplies the input for mulsum.
    ///
    /// # Safety
    /// As [`run_op`]: `p` points into buffers sized for `case`.
    unsafe fn new(
        ctx: &'a Ctx<'c, T>,
        case: &'a CaseSpec,
        p: &'a Ptrs<T>,
    ) -> Result<Self, BackendError> {
        // SAFETY: this function's contract (# Safety above) is the caller's.
        unsafe {
            let c = &case.counts;
            // Counted before the copy below, so a count MPI cannot take fails
            // with nothing written.
            let cnt = count(c.param_count)?;
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
            Ok(Call {
                ctx,
                case,
                p,
                input,
                premultiplied,
                aliased: std::ptr::eq(input, p.recv),
                dt: ops::datatype(T::DTYPE),
                cnt,
                base: c.param_count as usize,
                root: case.root as c_int,
                is_root: ctx.rank == case.root,
            })
        }
    }

    /// The reduction, which only reducing collectives have.
    fn op(&self) -> Result<ffi::MPI_Op, BackendError> {
        self.ctx.op.map(Op::raw).ok_or_else(|| {
            BackendError::Library(format!(
                "{} needs a reduction operator",
                self.case.collective
            ))
        })
    }

    /// MPI_IN_PLACE where the input already sits where MPI reads it.
    fn send(&self) -> *const c_void {
        if self.aliased {
            ops::in_place()
        } else {
            ptr(self.input)
        }
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn all_reduce<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let comm = c.ctx.comm;
        check(
            ffi::MPI_Allreduce(c.send(), mptr(c.p.recv), c.cnt, c.dt, c.op()?, comm),
            "MPI_Allreduce",
        )?;
        average(c.case, c.p.recv, c.base, c.ctx.world_size);
        Ok(())
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn reduce_scatter<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let (p, comm) = (c.p, c.ctx.comm);
        if c.case.in_place && !c.premultiplied {
            // MPI's in-place form reads the whole buffer and leaves the
            // result at its start; nccl-tests expects it at chunk r.
            check(
                ffi::MPI_Reduce_scatter_block(
                    ops::in_place(),
                    mptr(p.send),
                    c.cnt,
                    c.dt,
                    c.op()?,
                    comm,
                ),
                "MPI_Reduce_scatter_block",
            )?;
            std::ptr::copy(p.send, p.recv, c.base);
        } else {
            check(
                ffi::MPI_Reduce_scatter_block(
                    ptr(c.input),
                    mptr(p.recv),
                    c.cnt,
                    c.dt,
                    c.op()?,
                    comm,
                ),
                "MPI_Reduce_scatter_block",
            )?;
        }
        average(c.case, p.recv, c.base, c.ctx.world_size);
        Ok(())
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn reduce<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let send = if c.aliased && c.is_root {
            ops::in_place()
        } else {
            ptr(c.input)
        };
        check(
            ffi::MPI_Reduce(
                send,
                mptr(c.p.recv),
                c.cnt,
                c.dt,
                c.op()?,
                c.root,
                c.ctx.comm,
            ),
            "MPI_Reduce",
        )?;
        if c.is_root {
            average(c.case, c.p.recv, c.base, c.ctx.world_size);
        }
        Ok(())
    }
}

/// All-gather and all-to-all: the same arguments, `cnt` elements to or
/// from every rank.
///
/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn exchange<T: Element>(
    c: &Call<'_, '_, T>,
    call: Exchange,
    name: &str,
) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let send = if c.case.in_place {
            ops::in_place()
        } else {
            ptr(c.input)
        };
        check(
            call(send, c.cnt, c.dt, mptr(c.p.recv), c.cnt, c.dt, c.ctx.comm),
            name,
        )
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn broadcast<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        // MPI_Bcast has one buffer: out of place, the root first copies
        // its input to where every rank receives.
        if c.is_root && !c.aliased {
            std::ptr::copy_nonoverlapping(c.input, c.p.recv, c.base);
        }
        check(
            ffi::MPI_Bcast(mptr(c.p.recv), c.cnt, c.dt, c.root, c.ctx.comm),
            "MPI_Bcast",
        )
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn gather<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let send = if c.case.in_place && c.is_root {
            ops::in_place()
        } else {
            ptr(c.input)
        };
        check(
            ffi::MPI_Gather(
                send,
                c.cnt,
                c.dt,
                mptr(c.p.recv),
                c.cnt,
                c.dt,
                c.root,
                c.ctx.comm,
            ),
            "MPI_Gather",
        )
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn scatter<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let recv = if c.case.in_place && c.is_root {
            ops::in_place()
        } else {
            mptr(c.p.recv)
        };
        check(
            ffi::MPI_Scatter(
                ptr(c.input),
                c.cnt,
                c.dt,
                recv,
                c.cnt,
                c.dt,
                c.root,
                c.ctx.comm,
            ),
            "MPI_Scatter",
        )
    }
}

/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn send_recv<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let (r, n) = (c.ctx.rank, c.ctx.world_size);
        let (next, prev) = (((r + 1) % n) as c_int, ((r + n - 1) % n) as c_int);
        let (cnt, dt, comm, recv) = (c.cnt, c.dt, c.ctx.comm, mptr(c.p.recv));
        if c.aliased {
            check(
                ffi::MPI_Sendrecv_replace(
                    recv,
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
            )
        } else {
            check(
                ffi::MPI_Sendrecv(
                    ptr(c.input),
                    cnt,
                    dt,
                    next,
                    TAG,
                    recv,
                    cnt,
                    dt,
                    prev,
                    TAG,
                    comm,
                    ffi::RSMPI_STATUS_IGNORE,
                ),
                "MPI_Sendrecv",
            )
        }
    }
}

/// log2(n) pairwise exchanges; after the step with partner r ^ block each
/// rank holds the 2 * block chunks of its group.
///
/// # Safety
/// As [`run_op`]: `c` was made by [`Call::new`] from buffers sized for
/// its case, and every rank of the communicator makes the same call.
unsafe fn hypercube<T: Element>(c: &Call<'_, '_, T>) -> Result<(), BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let (r, n, base, recv) = (c.ctx.rank, c.ctx.world_size, c.base, c.p.recv);
        let own = recv.add(r * base);
        if !std::ptr::eq(own, c.input) {
            std::ptr::copy_nonoverlapping(c.input, own, base);
        }
        let mut block = 1;
        while block < n {
            let partner = r ^ block;
            let mine = recv.add((r & !(block - 1)) * base);
            let theirs = recv.add((partner & !(block - 1)) * base);
            let len = count((block * base) as u64)?;
            check(
                ffi::MPI_Sendrecv(
                    ptr(mine),
                    len,
                    c.dt,
                    partner as c_int,
                    TAG,
                    mptr(theirs),
                    len,
                    c.dt,
                    partner as c_int,
                    TAG,
                    c.ctx.comm,
                    ffi::RSMPI_STATUS_IGNORE,
                ),
                "MPI_Sendrecv",
            )?;
            block <<= 1;
        }
        Ok(())
    }
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
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
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
}

/// avg is a sum divided by the number of ranks afterwards (truncating for
/// integers), as core's `Pattern::reduced` defines it.
///
/// # Safety
/// `out` is valid for `len` elements of `T`, which no one else touches
/// during the call.
unsafe fn average<T: Element>(case: &CaseSpec, out: *mut T, len: usize, n: usize) {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
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
}
