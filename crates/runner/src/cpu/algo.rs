//! Collective algorithms over shared memory, one rank's side of each.
//!
//! Every rank thread calls [`run_op`] with the buffer pointers of all ranks
//! for this iteration. The algorithms are the standard ones for shared
//! memory: all_reduce as a reduce-scatter (each rank reduces its 1/n chunk
//! reading every peer) followed by an all-gather; alltoall as a pairwise
//! exchange starting at the next rank; hypercube as log2(n) pairwise
//! exchange steps; alltoallv as alltoall with per-peer counts and
//! displacements. Each op ends with a barrier, so a rank never overwrites
//! data a peer is still reading. Data moves in whole chunks through
//! `copy_nonoverlapping` and reductions are tight loops over slices that
//! the compiler vectorises.

use super::barrier::SpinBarrier;
use crate::watch::Stopped;
use crate::CaseSpec;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::element::Element;
use collbench_core::{Collective, ReduceOp};
use std::ops::Range;

/// Pointers of every rank's buffers for one operation.
pub struct Ptrs<T> {
    pub send: Vec<*mut T>,
    pub recv: Vec<*mut T>,
    /// Private staging space per rank (in-place alltoall and sendrecv).
    pub scratch: Vec<*mut T>,
}

/// The `k`-th of `n` near-equal chunks of `0..len`.
pub fn chunk(len: usize, n: usize, k: usize) -> Range<usize> {
    (len * k / n)..(len * (k + 1) / n)
}

/// # Safety
/// `dst` and `src` must be valid for `len` elements; if they overlap they
/// must be identical (then nothing is copied).
unsafe fn copy<T>(dst: *mut T, src: *const T, len: usize) {
    if len > 0 && !std::ptr::eq(dst, src) {
        std::ptr::copy_nonoverlapping(src, dst, len);
    }
}

/// Reduces `inputs[..]` (each `len` elements) into `out`. `out` may be the
/// same pointer as `inputs[first]`, which is taken first, and must not
/// overlap any other input.
///
/// # Safety
/// All pointers valid for `len` elements, aliasing as described.
pub unsafe fn reduce_into<T: Element>(
    out: *mut T,
    inputs: &[*const T],
    first: usize,
    len: usize,
    op: ReduceOp,
    scalars: &[T],
) {
    if len == 0 {
        return;
    }
    let n = inputs.len();
    let out_s = std::slice::from_raw_parts_mut(out, len);
    if !std::ptr::eq(out, inputs[first]) {
        copy(out, inputs[first], len);
    }
    if op == ReduceOp::MulSum {
        let s = scalars[first];
        out_s.iter_mut().for_each(|o| *o = o.mul(s));
    }
    for k in (0..n).filter(|&k| k != first) {
        let x = std::slice::from_raw_parts(inputs[k], len);
        match op {
            ReduceOp::Sum | ReduceOp::Avg => zip_apply(out_s, x, |a, b| a.add(b)),
            ReduceOp::Prod => zip_apply(out_s, x, |a, b| a.mul(b)),
            ReduceOp::Min => zip_apply(out_s, x, |a, b| a.min_with(b)),
            ReduceOp::Max => zip_apply(out_s, x, |a, b| a.max_with(b)),
            ReduceOp::MulSum => {
                let s = scalars[k];
                zip_apply(out_s, x, |a, b| a.add(b.mul(s)))
            }
        }
    }
    if op == ReduceOp::Avg {
        let n = n as f64;
        if T::DTYPE.is_float() {
            out_s
                .iter_mut()
                .for_each(|o| *o = T::from_value(o.value() / n));
        } else {
            out_s
                .iter_mut()
                .for_each(|o| *o = T::from_value((o.value() / n).trunc()));
        }
    }
}

#[inline(always)]
fn zip_apply<T: Copy>(out: &mut [T], x: &[T], f: impl Fn(T, T) -> T) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(*o, v);
    }
}

/// Runs one operation of `case` as rank `r`, on every send and receive
/// buffer of `p` moved on by `shift` elements (the rotation of this
/// iteration; staging buffers do not move). `peers` holds alltoallv's
/// per-peer counts (other collectives ignore it). `Err` when the job
/// stopped while this rank waited at a barrier: it returns at once, and
/// since no rank passes a barrier that did not release, nobody reads what
/// it left half-written.
///
/// # Safety
/// `p` holds valid buffers for every rank, sized for `case` at `shift`,
/// and every rank of the case calls this with the same `p` layout and
/// `shift` at the same time; for alltoallv, `peers` is the case's layout.
pub unsafe fn run_op<T: Element>(
    case: &CaseSpec,
    r: usize,
    p: &Ptrs<T>,
    shift: usize,
    barrier: &SpinBarrier,
    scalars: &[T],
    peers: Option<&PeerCounts>,
) -> Result<(), Stopped> {
    let n = case.world_size;
    let c = &case.counts;
    let base = c.param_count as usize;
    let root = case.root;
    let send = |k: usize| p.send[k].add(shift) as *const T;
    let recv = |k: usize| p.recv[k].add(shift);
    // Reduces this rank's chunk of every rank's input into rank `to`'s
    // receive buffer.
    let reduce_my_chunk = |to: usize| {
        let mine = chunk(c.param_count as usize, n, r);
        let inputs: Vec<*const T> = (0..n).map(|k| send(k).add(mine.start)).collect();
        reduce_into(
            recv(to).add(mine.start),
            &inputs,
            to,
            mine.len(),
            case.redop,
            scalars,
        );
    };
    // What every rank's `len` input elements are read from. In place, the
    // peers would read our buffer while we overwrite it: stage it first.
    let sources = |len: usize| -> Result<Vec<*const T>, Stopped> {
        if case.in_place {
            copy(p.scratch[r], send(r), len);
            barrier.wait(r)?;
            Ok(p.scratch.iter().map(|&s| s as *const T).collect())
        } else {
            Ok((0..n).map(send).collect())
        }
    };
    match case.collective {
        Collective::AllReduce => {
            let count = c.param_count as usize;
            reduce_my_chunk(r);
            barrier.wait(r)?;
            for k in (0..n).filter(|&k| k != r) {
                let ck = chunk(count, n, k);
                copy(recv(r).add(ck.start), recv(k).add(ck.start), ck.len());
            }
        }
        Collective::ReduceScatter => {
            let inputs: Vec<*const T> = (0..n).map(|k| send(k).add(r * base)).collect();
            reduce_into(recv(r), &inputs, r, base, case.redop, scalars);
        }
        Collective::AllGather => {
            for step in 0..n {
                let k = (r + step) % n;
                copy(recv(r).add(k * base), send(k), base);
            }
        }
        Collective::AllToAll => {
            let src = sources(base * n)?;
            for step in 0..n {
                let k = (r + step) % n;
                copy(recv(r).add(k * base), src[k].add(r * base), base);
            }
        }
        Collective::AllToAllV => {
            let Some(peers) = peers else {
                // No layout, no traffic: keep in step with the peers.
                barrier.wait(r)?;
                return Ok(());
            };
            let src = sources(peers.send_total(r) as usize)?;
            for step in 0..n {
                let k = (r + step) % n;
                copy(
                    recv(r).add(peers.recv_displ(r, k) as usize),
                    src[k].add(peers.send_displ(k, r) as usize),
                    peers.count(k, r) as usize,
                );
            }
        }
        Collective::Broadcast => {
            copy(recv(r), send(root), c.param_count as usize);
        }
        Collective::Reduce => reduce_my_chunk(root),
        Collective::SendRecv => {
            let count = c.param_count as usize;
            let prev = (r + n - 1) % n;
            if case.in_place && n > 1 {
                copy(p.scratch[r], send(r), count);
                barrier.wait(r)?;
                copy(recv(r), p.scratch[prev], count);
            } else {
                copy(recv(r), send(prev), count);
            }
        }
        Collective::Gather => {
            copy(recv(root).add(r * base), send(r), base);
        }
        Collective::Scatter => {
            copy(recv(r), send(root).add(r * base), base);
        }
        Collective::HyperCube => {
            copy(recv(r).add(r * base), send(r), base);
            let mut block = 1;
            while block < n {
                barrier.wait(r)?;
                let partner = r ^ block;
                let start = (partner & !(block - 1)) * base;
                copy(recv(r).add(start), recv(partner).add(start), block * base);
                block <<= 1;
            }
        }
    }
    barrier.wait(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_partition() {
        for n in 1..9 {
            let mut next = 0;
            for k in 0..n {
                let c = chunk(1000, n, k);
                assert_eq!(c.start, next);
                next = c.end;
            }
            assert_eq!(next, 1000);
        }
    }

    #[test]
    fn reduce_in_place_and_out_of_place() {
        let mut a = vec![1.0f32, 2.0, 3.0];
        let b = [10.0f32, 20.0, 30.0];
        let mut out = vec![0.0f32; 3];
        let ins = [a.as_ptr(), b.as_ptr()];
        // SAFETY: all three vectors hold 3 elements; out does not alias the inputs.
        unsafe { reduce_into(out.as_mut_ptr(), &ins, 0, 3, ReduceOp::Sum, &[1.0, 1.0]) };
        assert_eq!(out, vec![11.0, 22.0, 33.0]);
        let ins = [a.as_ptr(), b.as_ptr()];
        // SAFETY: 3 elements each; writing into an input is reduce_into's in-place case.
        unsafe { reduce_into(a.as_mut_ptr(), &ins, 0, 3, ReduceOp::MulSum, &[1.0, 2.0]) };
        assert_eq!(a, vec![21.0, 42.0, 63.0]);
    }
}
