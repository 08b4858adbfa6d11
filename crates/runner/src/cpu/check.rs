//! Exact result checks on the CPU backend: fill inputs by formula, poison
//! outputs, run once, compare bit for bit (2 ULP for floating avg).

use super::algo::{self, chunk, Ptrs};
use super::barrier::SpinBarrier;
use super::ranks::run_ranks;
use crate::backend::BackendError;
use crate::watch::{Stopped, Watch};
use crate::CaseSpec;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::collective::RedopUse;
use collbench_core::element::Element;
use collbench_core::verify::{is_wrong, Pattern, Source};
use collbench_core::Collective;
use std::sync::Arc;

struct SharedPtr<T>(*mut T);
// SAFETY: the rank threads write disjoint ranges of the reduced vector
// (each computes its own slice) and read it only after a barrier.
unsafe impl<T> Send for SharedPtr<T> {}
// SAFETY: as for Send: disjoint writes, reads after a barrier.
unsafe impl<T> Sync for SharedPtr<T> {}
struct SharedPtrs<'a, T>(&'a Ptrs<T>);
// SAFETY: each rank thread writes only its own rank's buffers and reads
// other ranks' buffers only between barriers, as the algorithms do.
unsafe impl<T> Send for SharedPtrs<'_, T> {}
// SAFETY: as for Send: per-rank writes, cross-rank reads after barriers.
unsafe impl<T> Sync for SharedPtrs<'_, T> {}

/// Runs `case` once on freshly patterned data and returns the number of
/// wrong elements over all ranks (an error when the rank threads cannot
/// be started, or the job stopped while they waited: see `watch`).
pub fn check_case<T: Element>(
    case: &CaseSpec,
    seed: u64,
    corrupt: bool,
    p: &Ptrs<T>,
    scalars: &[T],
    peers: Option<&PeerCounts>,
    watch: Option<Arc<Watch>>,
) -> Result<u64, BackendError> {
    let n = case.world_size;
    let c = case.counts;
    let coll = case.collective;
    let pattern = Pattern {
        seed,
        world_size: n,
        dtype: case.dtype,
        redop: (coll.spec().redop == RedopUse::Reduces).then_some(case.redop),
    };
    // all_reduce and reduce compare many ranks against one long reduced
    // vector: compute it once, in parallel, instead of once per rank.
    let shared_reduced = matches!(coll, Collective::AllReduce | Collective::Reduce);
    let count = c.param_count as usize;
    let mut reduced: Vec<T> = if shared_reduced {
        vec![T::poison(); count]
    } else {
        Vec::new()
    };
    let reduced_ptr = SharedPtr(reduced.as_mut_ptr());
    let reduced_at = shared_reduced.then_some(&reduced_ptr);
    let barrier = SpinBarrier::new(n).watched(watch.clone());
    let ptrs = SharedPtrs(p);
    let wrong: u64 = run_ranks(n, |r| {
        let (barrier, ptrs, pattern) = (&barrier, &ptrs, &pattern);
        // SAFETY: every pointer comes from `p`, whose buffers the
        // caller sized for this case; ranks write only their own
        // buffers and slices, separated by `barrier`.
        unsafe {
            let p = ptrs.0;
            prepare(case, r, p, pattern);
            barrier.wait(r)?;
            algo::run_op(case, r, p, 0, barrier, scalars, peers)?;
            let out = std::slice::from_raw_parts_mut(p.recv[r], c.recv_count as usize);
            if corrupt && r == case.root {
                if let Some(v) = out.first_mut() {
                    *v = T::poison();
                }
            }
            if let Some(reduced) = reduced_at {
                for i in chunk(count, n, r) {
                    *reduced.0.add(i) = T::from_value(pattern.reduced(i as u64));
                }
            }
            barrier.wait(r)?;
            Ok(count_wrong(case, r, out, pattern, peers, reduced_at))
        }
    })?
    .into_iter()
    .sum::<Result<u64, Stopped>>()
    .map_err(|_| crate::watch::stopped_error(watch.as_deref()))?;
    drop(reduced);
    Ok(wrong)
}

/// Runs `case` once on the input of `seed`, as [`check_case`] does, and
/// returns each rank's output as little-endian bytes (the read-back of
/// [`crate::backend::Backend::outputs`]).
pub fn outputs_case<T: Element>(
    case: &CaseSpec,
    seed: u64,
    p: &Ptrs<T>,
    scalars: &[T],
    peers: Option<&PeerCounts>,
    watch: Option<Arc<Watch>>,
) -> Result<Vec<Vec<u8>>, BackendError> {
    let n = case.world_size;
    let pattern = Pattern {
        seed,
        world_size: n,
        dtype: case.dtype,
        redop: (case.collective.spec().redop == RedopUse::Reduces).then_some(case.redop),
    };
    let elt = case.dtype.size_bytes();
    let barrier = SpinBarrier::new(n).watched(watch.clone());
    let ptrs = SharedPtrs(p);
    run_ranks(n, |r| {
        let (barrier, ptrs, pattern) = (&barrier, &ptrs, &pattern);
        // SAFETY: as in check_case: buffers sized for this case, each
        // rank writes its own, cross-rank reads ordered by `barrier`.
        unsafe {
            let p = ptrs.0;
            prepare(case, r, p, pattern);
            barrier.wait(r)?;
            algo::run_op(case, r, p, 0, barrier, scalars, peers)?;
            let out = std::slice::from_raw_parts(p.recv[r], case.counts.recv_count as usize);
            Ok(out
                .iter()
                .flat_map(|v| v.bits().to_le_bytes().into_iter().take(elt))
                .collect())
        }
    })?
    .into_iter()
    .collect::<Result<Vec<Vec<u8>>, Stopped>>()
    .map_err(|_| crate::watch::stopped_error(watch.as_deref()))
}

/// Poisons everything rank `r`'s output can land in, then writes its
/// inputs from `pattern`.
///
/// # Safety
/// `p`'s buffers are sized for `case`, and no other thread touches rank
/// `r`'s buffers meanwhile.
unsafe fn prepare<T: Element>(case: &CaseSpec, r: usize, p: &Ptrs<T>, pattern: &Pattern) {
    let c = case.counts;
    let (base, len) = if case.in_place {
        let base = p.send[r].sub(c.send_inplace_offset as usize * r);
        (base, c.send_count.max(c.recv_count) as usize)
    } else {
        (p.recv[r], c.recv_count as usize)
    };
    std::slice::from_raw_parts_mut(base, len).fill(T::poison());
    let send = std::slice::from_raw_parts_mut(p.send[r], c.send_count as usize);
    for (i, v) in send.iter_mut().enumerate() {
        *v = T::from_value(pattern.input(r, i as u64));
    }
}

/// Rank `r`'s wrong elements in `out`, against `pattern` or, for
/// all_reduce and reduce, the reduced vector the ranks computed together.
///
/// # Safety
/// `reduced`, when given, holds the case's count of elements, all written
/// before a barrier this rank has passed.
unsafe fn count_wrong<T: Element>(
    case: &CaseSpec,
    r: usize,
    out: &[T],
    pattern: &Pattern,
    peers: Option<&PeerCounts>,
    reduced: Option<&SharedPtr<T>>,
) -> u64 {
    let tol = pattern.tolerance_ulps();
    let elt = case.dtype.size_bytes();
    let mut wrong = 0u64;
    for (j, got) in out.iter().enumerate() {
        let source = case.output_source(r, j as u64, peers);
        let want = match (source, reduced) {
            (Source::Unchecked, _) => continue,
            (Source::Reduced { index }, Some(reduced)) => *reduced.0.add(index as usize),
            (src, _) => T::from_value(pattern.expected(src).unwrap_or(f64::NAN)),
        };
        let (g, w) = (got.bits(), want.bits());
        if is_wrong(g, w, tol, elt) {
            wrong += 1;
        }
    }
    wrong
}
