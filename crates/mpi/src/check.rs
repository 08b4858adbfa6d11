//! Exact result checks on this rank, with the same patterns as every other
//! backend: poison the outputs (all-ones bytes), fill the inputs by
//! formula, run once, compare bit for bit (2 ULP for floating avg).

use crate::coll::{self, Ctx, Ptrs};
use collbench_core::alltoallv::PeerCounts;
use collbench_core::collective::RedopUse;
use collbench_core::element::Element;
use collbench_core::verify::{is_wrong, Pattern, Source};
use collbench_runner::{BackendError, CaseSpec};

/// Runs `case` once on freshly patterned data and returns the number of
/// wrong elements on this rank. `corrupt` (test hook) overwrites the
/// root's first output element so the check must count exactly one.
///
/// # Safety
/// As [`coll::run_op`]: buffers sized for `case`, every rank calling.
pub unsafe fn check_case<T: Element>(
    ctx: &Ctx<'_, T>,
    case: &CaseSpec,
    seed: u64,
    corrupt: bool,
    p: &Ptrs<T>,
) -> Result<u64, BackendError> {
    // SAFETY: this function's contract (# Safety above) is the caller's.
    unsafe {
        let c = &case.counts;
        let r = ctx.rank;
        let pattern = Pattern {
            seed,
            world_size: case.world_size,
            dtype: case.dtype,
            redop: (case.collective.spec().redop == RedopUse::Reduces).then_some(case.redop),
        };
        // Poison everything the output can land in, then write the inputs.
        let (poisoned, len) = if case.in_place {
            let base = p.send.sub(c.send_inplace_offset as usize * r);
            (base, c.send_count.max(c.recv_count) as usize)
        } else {
            (p.recv, c.recv_count as usize)
        };
        std::slice::from_raw_parts_mut(poisoned, len).fill(T::poison());
        let send = std::slice::from_raw_parts_mut(p.send, c.send_count as usize);
        for (i, v) in send.iter_mut().enumerate() {
            *v = T::from_value(pattern.input(r, i as u64));
        }
        coll::run_op(ctx, case, p)?;
        let out = std::slice::from_raw_parts_mut(p.recv, c.recv_count as usize);
        if corrupt && r == case.root {
            if let Some(v) = out.first_mut() {
                *v = T::poison();
            }
        }
        Ok(count_wrong(case, &pattern, r, out, ctx.peers.as_ref()))
    }
}

/// Output elements of rank `rank` that differ from what the pattern says.
/// `peers` is alltoallv's layout.
fn count_wrong<T: Element>(
    case: &CaseSpec,
    pattern: &Pattern,
    rank: usize,
    out: &[T],
    peers: Option<&PeerCounts>,
) -> u64 {
    let tol = pattern.tolerance_ulps();
    let elt = case.dtype.size_bytes();
    let mut wrong = 0;
    for (j, got) in out.iter().enumerate() {
        let src = case.output_source(rank, j as u64, peers);
        if src == Source::Unchecked {
            continue;
        }
        let want = T::from_value(pattern.expected(src).unwrap_or(f64::NAN));
        let (g, w) = (got.bits(), want.bits());
        if is_wrong(g, w, tol, elt) {
            wrong += 1;
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Collective, DataType, ReduceOp};

    fn case(coll: Collective, redop: ReduceOp) -> CaseSpec {
        CaseSpec {
            collective: coll,
            dtype: DataType::Float,
            redop,
            root: 0,
            counts: coll.counts(64, 4, 2),
            in_place: false,
            world_size: 2,
        }
    }

    /// The data pattern of 2 float ranks.
    fn pattern(seed: u64, redop: Option<ReduceOp>) -> Pattern {
        Pattern {
            seed,
            world_size: 2,
            dtype: DataType::Float,
            redop,
        }
    }

    #[test]
    fn counts_only_elements_that_differ() {
        let c = case(Collective::AllGather, ReduceOp::Sum);
        let pattern = pattern(3, None);
        let base = c.counts.param_count;
        let mut out: Vec<f32> = (0..c.counts.recv_count)
            .map(|j| pattern.input((j / base) as usize, j % base) as f32)
            .collect();
        assert_eq!(count_wrong(&c, &pattern, 1, &out, None), 0);
        out[3] = f32::poison();
        out[base as usize] += 1.0;
        assert_eq!(count_wrong(&c, &pattern, 1, &out, None), 2);
    }

    #[test]
    fn float_avg_allows_two_ulps() {
        let c = case(Collective::AllReduce, ReduceOp::Avg);
        let pattern = pattern(5, Some(ReduceOp::Avg));
        let exact: Vec<f32> = (0..c.counts.recv_count)
            .map(|j| pattern.reduced(j) as f32)
            .collect();
        let mut out = exact.clone();
        out[0] = f32::from_bits(out[0].to_bits() + 2);
        assert_eq!(count_wrong(&c, &pattern, 0, &out, None), 0);
        out[1] = f32::from_bits(out[1].to_bits() + 3);
        assert_eq!(count_wrong(&c, &pattern, 0, &out, None), 1);
    }
}
