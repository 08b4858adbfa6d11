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
    let op = RankOp {
        case,
        r,
        p,
        shift,
        barrier,
        scalars,
    };
    match case.collective {
        Collective::AllReduce => {
            op.reduce_my_chunk(r);
            barrier.wait(r)?;
            for k in (0..n).filter(|&k| k != r) {
                let ck = chunk(base, n, k);
                copy(op.recv(r).add(ck.start), op.recv(k).add(ck.start), ck.len());
            }
        }
        Collective::ReduceScatter => {
            let inputs: Vec<*const T> = (0..n).map(|k| op.send(k).add(r * base)).collect();
            reduce_into(op.recv(r), &inputs, r, base, case.redop, scalars);
        }
        Collective::AllGather => {
            for step in 0..n {
                let k = (r + step) % n;
                copy(op.recv(r).add(k * base), op.send(k), base);
            }
        }
        Collective::AllToAll => {
            let src = op.sources(base * n)?;
            for step in 0..n {
                let k = (r + step) % n;
                copy(op.recv(r).add(k * base), src[k].add(r * base), base);
            }
        }
        Collective::AllToAllV => {
            let Some(peers) = peers else {
                // No layout, no traffic: keep in step with the peers.
                barrier.wait(r)?;
                return Ok(());
            };
            op.all_to_all_v(peers)?;
        }
        Collective::Broadcast => copy(op.recv(r), op.send(root), base),
        Collective::Reduce => op.reduce_my_chunk(root),
        Collective::SendRecv => op.send_recv()?,
        Collective::Gather => copy(op.recv(root).add(r * base), op.send(r), base),
        Collective::Scatter => copy(op.recv(r), op.send(root).add(r * base), base),
        Collective::HyperCube => op.hyper_cube()?,
    }
    barrier.wait(r)
}

/// Rank `r`'s view of one operation: every rank's send and receive
/// buffers moved on by the rotation `shift`, and what the steps of
/// [`run_op`] share. Its methods carry run_op's safety contract.
struct RankOp<'a, T> {
    case: &'a CaseSpec,
    r: usize,
    p: &'a Ptrs<T>,
    shift: usize,
    barrier: &'a SpinBarrier,
    scalars: &'a [T],
}

impl<T: Element> RankOp<'_, T> {
    /// Rank `k`'s send buffer at this rotation.
    #[inline(always)]
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn send(&self, k: usize) -> *const T {
        self.p.send[k].add(self.shift) as *const T
    }

    /// Rank `k`'s receive buffer at this rotation.
    #[inline(always)]
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn recv(&self, k: usize) -> *mut T {
        self.p.recv[k].add(self.shift)
    }

    /// Reduces this rank's chunk of every rank's input into rank `to`'s
    /// receive buffer.
    ///
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn reduce_my_chunk(&self, to: usize) {
        let (n, r) = (self.case.world_size, self.r);
        let mine = chunk(self.case.counts.param_count as usize, n, r);
        let inputs: Vec<*const T> = (0..n).map(|k| self.send(k).add(mine.start)).collect();
        reduce_into(
            self.recv(to).add(mine.start),
            &inputs,
            to,
            mine.len(),
            self.case.redop,
            self.scalars,
        );
    }

    /// What every rank's `len` input elements are read from. In place, the
    /// peers would read our buffer while we overwrite it: stage it first.
    ///
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn sources(&self, len: usize) -> Result<Vec<*const T>, Stopped> {
        let r = self.r;
        if self.case.in_place {
            copy(self.p.scratch[r], self.send(r), len);
            self.barrier.wait(r)?;
            Ok(self.p.scratch.iter().map(|&s| s as *const T).collect())
        } else {
            Ok((0..self.case.world_size).map(|k| self.send(k)).collect())
        }
    }

    /// alltoallv with `peers`' counts and displacements.
    ///
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn all_to_all_v(&self, peers: &PeerCounts) -> Result<(), Stopped> {
        let (n, r) = (self.case.world_size, self.r);
        let src = self.sources(peers.send_total(r) as usize)?;
        for step in 0..n {
            let k = (r + step) % n;
            copy(
                self.recv(r).add(peers.recv_displ(r, k) as usize),
                src[k].add(peers.send_displ(k, r) as usize),
                peers.count(k, r) as usize,
            );
        }
        Ok(())
    }

    /// sendrecv around the ring: each rank receives its predecessor's
    /// buffer (staged first in place, as the predecessor overwrites it).
    ///
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn send_recv(&self) -> Result<(), Stopped> {
        let (n, r) = (self.case.world_size, self.r);
        let count = self.case.counts.param_count as usize;
        let prev = (r + n - 1) % n;
        if self.case.in_place && n > 1 {
            copy(self.p.scratch[r], self.send(r), count);
            self.barrier.wait(r)?;
            copy(self.recv(r), self.p.scratch[prev], count);
        } else {
            copy(self.recv(r), self.send(prev), count);
        }
        Ok(())
    }

    /// hypercube: blocks doubling with the partner across each dimension.
    ///
    /// # Safety
    /// [`run_op`]'s: every rank's buffers valid for the case at this
    /// rotation, and every rank in the same step at the same time.
    unsafe fn hyper_cube(&self) -> Result<(), Stopped> {
        let (n, r) = (self.case.world_size, self.r);
        let base = self.case.counts.param_count as usize;
        copy(self.recv(r).add(r * base), self.send(r), base);
        let mut block = 1;
        while block < n {
            self.barrier.wait(r)?;
            let partner = r ^ block;
            let start = (partner & !(block - 1)) * base;
            copy(
                self.recv(r).add(start),
                self.recv(partner).add(start),
                block * base,
            );
            block <<= 1;
        }
        Ok(())
    }
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
