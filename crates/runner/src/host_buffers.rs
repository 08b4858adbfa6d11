//! Host buffers of one rank, shared by the host-memory backends (cpu, mpi):
//! sized once for the sweep, grown on demand, and offset per iteration
//! exactly as nccl-tests offsets its buffers.

use crate::backend::{BackendError, CaseSpec};
use crate::shortfall::Shortfall;

/// One rank's send, receive and staging buffers (8-byte aligned).
#[derive(Default)]
pub struct HostBuffers {
    send: Vec<u64>,
    recv: Vec<u64>,
    scratch: Vec<u64>,
}

fn grow(buf: &mut Vec<u64>, bytes: u64, what: &'static str) -> Result<(), BackendError> {
    let words = usize::try_from(allocated(bytes) / 8).unwrap_or(usize::MAX);
    if buf.len() >= words {
        return Ok(());
    }
    // Free first: the old contents are not needed and memory may be tight.
    *buf = Vec::new();
    buf.try_reserve_exact(words).map_err(|_| {
        BackendError::OutOfMemory(Shortfall::HostBuffer {
            bytes,
            buffer: what,
        })
    })?;
    buf.resize(words, 0);
    Ok(())
}

/// Byte offset of the operation at `iter`: the buffers rotate through the
/// allocation (up to the sweep's largest size) so that caches do not
/// flatter small sizes, plus `unalign` elements (`-u`).
pub fn rotation(case: &CaseSpec, iter: u64, max_bytes: u64, unalign: u64) -> usize {
    let elt = case.dtype.size_bytes() as u64;
    let c = &case.counts;
    let t = c.send_count.max(c.recv_count) * elt;
    let steps = max_bytes.checked_div(t).unwrap_or(1).max(1);
    (t * (iter % steps) + unalign * elt) as usize
}

/// Bytes of (send, receive, staging) buffer one rank needs for `case` at
/// every rotation up to `max_bytes`, misaligned by `unalign` elements.
pub fn buffer_bytes(case: &CaseSpec, max_bytes: u64, unalign: u64) -> [u64; 3] {
    let elt = case.dtype.size_bytes() as u64;
    let c = &case.counts;
    let pad = unalign.saturating_mul(elt);
    let larger = c.send_count.max(c.recv_count).saturating_mul(elt);
    [
        (c.send_count.saturating_mul(elt))
            .max(max_bytes)
            .saturating_add(pad),
        // In place, the receive buffer also holds the send data.
        larger.max(max_bytes).saturating_add(pad),
        larger,
    ]
}

/// What a buffer of `bytes` really takes (whole words plus one).
pub fn allocated(bytes: u64) -> u64 {
    bytes.div_ceil(8).saturating_add(1).saturating_mul(8)
}

/// Elements the operation at `iter` sits past the one at iteration 0: the
/// [`rotation`] without its fixed misalignment, for backends that compute
/// their pointers once and shift them per operation.
pub fn rotation_elements(case: &CaseSpec, iter: u64, max_bytes: u64) -> usize {
    let elt = case.dtype.size_bytes() as u64;
    (rotation(case, iter, max_bytes, 0) as u64 / elt) as usize
}

impl HostBuffers {
    /// Makes the buffers big enough for `case` at every rotation up to
    /// `max_bytes`, misaligned by `unalign` elements.
    pub fn ensure(
        &mut self,
        case: &CaseSpec,
        max_bytes: u64,
        unalign: u64,
    ) -> Result<(), BackendError> {
        let [send, recv, scratch] = buffer_bytes(case, max_bytes, unalign);
        grow(&mut self.send, send, "send")?;
        grow(&mut self.recv, recv, "receive")?;
        grow(&mut self.scratch, scratch, "staging")
    }

    /// Bytes these buffers hold now.
    pub fn held_bytes(&self) -> u64 {
        [&self.send, &self.recv, &self.scratch]
            .iter()
            .map(|b| b.len() as u64 * 8)
            .sum()
    }

    /// Bytes these buffers will hold after `ensure(case, max_bytes,
    /// unalign)` (they only grow).
    pub fn bytes_after(&self, case: &CaseSpec, max_bytes: u64, unalign: u64) -> u64 {
        let held = [&self.send, &self.recv, &self.scratch];
        buffer_bytes(case, max_bytes, unalign)
            .iter()
            .zip(held)
            .map(|(&want, b)| allocated(want).max(b.len() as u64 * 8))
            // Saturating: `-e` near u64::MAX must say "does not fit",
            // not overflow.
            .fold(0, u64::saturating_add)
    }

    /// (send, receive) of `rank` for the operation at `iter`, with
    /// nccl-tests' in-place layout: both inside the receive buffer, at the
    /// collective's per-rank in-place offsets.
    pub fn pointers(
        &mut self,
        case: &CaseSpec,
        rank: usize,
        iter: u64,
        max_bytes: u64,
        unalign: u64,
    ) -> (*mut u8, *mut u8) {
        let elt = case.dtype.size_bytes();
        let c = &case.counts;
        let shift = rotation(case, iter, max_bytes, unalign);
        // SAFETY: for all `add`s, `ensure` sized the buffers for the shift plus
        // the case, and in-place offsets stay within the receive buffer.
        unsafe {
            let recv = (self.recv.as_mut_ptr() as *mut u8).add(shift);
            if case.in_place {
                (
                    recv.add(c.send_inplace_offset as usize * rank * elt),
                    recv.add(c.recv_inplace_offset as usize * rank * elt),
                )
            } else {
                ((self.send.as_mut_ptr() as *mut u8).add(shift), recv)
            }
        }
    }

    /// Private staging space of at least the case's larger buffer.
    pub fn scratch(&mut self) -> *mut u8 {
        self.scratch.as_mut_ptr() as *mut u8
    }
}
