//! Does the sweep's largest case fit in host memory? Asked before the
//! first buffer of a collective is allocated, so that a sweep too big for
//! the host is refused with one line naming a size that fits, instead of
//! growing until the kernel kills the process (exit 137, no message).

use crate::backend::{BackendError, CaseSpec};
use crate::host_buffers::{allocated, buffer_bytes, HostBuffers};
use crate::memory::available_bytes;
use crate::shortfall::Shortfall;
use collbench_core::Collective;

/// `case` at `size` bytes, on the same ranks, type and operator.
fn at_size(case: &CaseSpec, size: u64) -> CaseSpec {
    CaseSpec {
        counts: case
            .collective
            .counts(size, case.dtype.size_bytes(), case.world_size),
        ..*case
    }
}

/// Bytes the correctness check adds once per process: the reduced vector
/// all_reduce and reduce compare against (check.rs).
fn check_bytes(case: &CaseSpec) -> u64 {
    match case.collective {
        Collective::AllReduce | Collective::Reduce => case
            .counts
            .param_count
            .saturating_mul(case.dtype.size_bytes() as u64),
        Collective::AllGather
        | Collective::ReduceScatter
        | Collective::AllToAll
        | Collective::AllToAllV
        | Collective::Broadcast
        | Collective::SendRecv
        | Collective::Gather
        | Collective::Scatter
        | Collective::HyperCube => 0,
    }
}

/// Host memory a fresh process needs for a sweep up to `size` bytes of
/// `case`'s collective: every rank's buffers, plus the check's.
pub fn bytes_for_sweep(case: &CaseSpec, size: u64, unalign: u64) -> u64 {
    let largest = at_size(case, size);
    let per_rank: u64 = buffer_bytes(&largest, size, unalign)
        .iter()
        .map(|&b| allocated(b))
        .fold(0, u64::saturating_add);
    per_rank
        .saturating_mul(case.world_size as u64)
        .saturating_add(check_bytes(&largest))
}

/// Refuses, with one line, a sweep whose largest case (`max_bytes`, or
/// the case itself when larger) would not fit in the memory this process
/// may still take; buffers already held count as reusable.
pub fn check_fits(
    buffers: &[HostBuffers],
    case: &CaseSpec,
    max_bytes: u64,
    unalign: u64,
) -> Result<(), BackendError> {
    let size = max_bytes.max(case.size_bytes());
    let largest = at_size(case, size);
    let held: u64 = buffers.iter().map(HostBuffers::held_bytes).sum();
    let need = buffers
        .iter()
        .map(|b| b.bytes_after(&largest, size, unalign))
        .fold(0, u64::saturating_add)
        .saturating_add(check_bytes(&largest));
    if need <= held {
        return Ok(());
    }
    let Some(available) = available_bytes() else {
        return Ok(());
    };
    let usable = available.saturating_add(held);
    if need <= usable {
        return Ok(());
    }
    // A misalignment is added to every buffer: when it is what does not
    // fit, the line names -u rather than the sweep or the ranks.
    let need_aligned = buffers
        .iter()
        .map(|b| b.bytes_after(&largest, size, 0))
        .fold(0, u64::saturating_add)
        .saturating_add(check_bytes(&largest));
    if unalign > 0 && need_aligned <= usable {
        return Err(BackendError::OutOfMemory(Shortfall::HostUnalign {
            op: case.collective,
            size,
            need,
            ranks: case.world_size,
            unalign,
        }));
    }
    let fits = (0..64)
        .rev()
        .map(|k| 1u64 << k)
        .filter(|&s| s < size)
        .find(|&s| bytes_for_sweep(case, s, unalign) <= usable);
    Err(BackendError::OutOfMemory(Shortfall::HostSweep {
        op: case.collective,
        size,
        need,
        available,
        ranks: case.world_size,
        fits,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{DataType, ReduceOp};

    fn all_reduce(size: u64, ranks: usize) -> CaseSpec {
        let c = Collective::AllReduce;
        CaseSpec {
            collective: c,
            dtype: DataType::Float,
            redop: ReduceOp::Sum,
            root: 0,
            counts: c.counts(size, 4, ranks),
            in_place: false,
            world_size: ranks,
        }
    }

    #[test]
    fn estimate_counts_every_rank_and_the_check() {
        // send + receive + staging per rank, 8 ranks, plus the reduced vector.
        let need = bytes_for_sweep(&all_reduce(8, 8), 1 << 30, 0);
        assert_eq!(need, 8 * 3 * ((1 << 30) + 8) + (1 << 30));
    }
}
