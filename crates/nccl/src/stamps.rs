//! Device timestamps for arrival timing (issue #53): a one-thread kernel
//! that writes the GPU's `%globaltimer` into a slot of a device buffer
//! when the stream reaches it, launched just before and just after each
//! timed collective on the collective's stream; the GPU clock put on the
//! host's ([`collbench_runner::arrival::now_ns`]) with a stated error;
//! and the late-entry hook's device form, a kernel that holds the stream
//! for a given time.
//!
//! The kernels are hand-written PTX (kernels/stamp.ptx), loaded like the
//! verification kernels. `%globaltimer` counts nanoseconds (its update
//! step is 32 ns to 1 us by GPU); the stamp before a collective reads it
//! when the stream has finished everything before, one kernel launch
//! gap (about 1-3 us back to back) before NCCL's kernel starts.

use crate::cuda::{self, DeviceBuffer, Function, Module, Stream};
use crate::error::CudaError;
use collbench_runner::arrival::clock::{estimate, ClockOffset};
use collbench_runner::arrival::now_ns;
use std::ffi::c_void;

/// The hand-written PTX of `collbench_stamp` and `collbench_spin`.
pub const PTX: &str = include_str!("../kernels/stamp.ptx");

/// Alignment rounds per estimate: the least round trip decides.
pub const ALIGN_ROUNDS: usize = 8;

/// The stamp kernels loaded on one device, with room for `slots`
/// timestamps.
pub struct Stamps {
    _module: Module,
    stamp: Function,
    spin: Function,
    slots: DeviceBuffer,
    capacity: usize,
}

impl Stamps {
    /// Loads the kernels in the current context with room for `slots`
    /// timestamps.
    pub fn load(slots: usize) -> Result<Stamps, CudaError> {
        let module = Module::load_ptx(PTX)?;
        Ok(Stamps {
            stamp: module.function("collbench_stamp")?,
            spin: module.function("collbench_spin")?,
            slots: DeviceBuffer::alloc(slots.max(1) * 8)?,
            capacity: slots,
            _module: module,
        })
    }

    /// Timestamps this buffer holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes the GPU's timer into slot `slot` when `s` reaches it.
    pub fn stamp(&self, slot: usize, s: &Stream) -> Result<(), CudaError> {
        assert!(
            slot < self.capacity,
            "stamp slot {slot} of {}",
            self.capacity
        );
        let mut base = self.slots.at(0).addr();
        let mut index = slot as u32;
        let mut args = [
            &mut base as *mut _ as *mut c_void,
            &mut index as *mut _ as *mut c_void,
        ];
        // SAFETY: collbench_stamp(u64* slots, u32 slot) in stamp.ptx: a
        // device address (u64) and a u32, each pointed to by `args` and
        // alive for the call (the driver copies argument values at
        // launch). `slot` is within the buffer (asserted above), which
        // lives as long as `self`; `_module` keeps the kernel loaded.
        unsafe { self.stamp.launch(1, 1, &mut args, s) }
    }

    /// Holds `s` for `ns` nanoseconds of the GPU's timer (the late-entry
    /// hook: the stream reaches what follows that much later).
    pub fn spin(&self, ns: u64, s: &Stream) -> Result<(), CudaError> {
        let mut ns = ns;
        let mut args = [&mut ns as *mut _ as *mut c_void];
        // SAFETY: collbench_spin(u64 ns) in stamp.ptx: one u64 pointed to
        // by `args`, alive for the call; `_module` keeps it loaded.
        unsafe { self.spin.launch(1, 1, &mut args, s) }
    }

    /// The first `n` slots, copied back (the stream must have finished).
    pub fn read(&self, n: usize) -> Result<Vec<u64>, CudaError> {
        let n = n.min(self.capacity);
        let mut bytes = vec![0u8; n * 8];
        if n > 0 {
            cuda::copy_to_host(&mut bytes, self.slots.at(0))?;
        }
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// This GPU's timer on the host clock: [`ALIGN_ROUNDS`] synchronous
    /// stamps into slot 0 (overwritten later), each read between two host
    /// readings. Call with `s` idle, before the slots are used.
    pub fn align(&self, s: &Stream) -> Result<DeviceClock, CudaError> {
        let mut rounds = [Round::default(); ALIGN_ROUNDS];
        for r in &mut rounds {
            let before = now_ns();
            self.stamp(0, s)?;
            s.synchronize()?;
            let after = now_ns();
            let gpu = self.read(1)?[0];
            *r = Round { before, gpu, after };
        }
        Ok(DeviceClock::from_rounds(&rounds))
    }
}

/// One alignment round: the GPU read its timer (`gpu`) at some moment
/// between the host's `before` and `after`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Round {
    pub before: u64,
    pub gpu: u64,
    pub after: u64,
}

/// A GPU timer on the host clock: `host = gpu + offset_ns`, within
/// `error_ns` either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceClock(pub ClockOffset);

impl DeviceClock {
    /// From rounds: each bounds the offset to `[before - gpu, after -
    /// gpu]`; the bounds intersected give the offset (their middle) and
    /// its error (half their width, at most half the shortest round).
    pub fn from_rounds(rounds: &[Round]) -> DeviceClock {
        let bounds: Vec<(i64, i64)> = rounds
            .iter()
            .map(|r| {
                let gpu = r.gpu as i64;
                (r.before as i64 - gpu, r.after as i64 - gpu)
            })
            .collect();
        DeviceClock(estimate(&bounds))
    }

    /// A GPU timer reading on the host clock ([`now_ns`]'s nanoseconds).
    pub fn to_host_ns(&self, gpu: u64) -> u64 {
        (gpu as i64).saturating_add(self.0.offset_ns).max(0) as u64
    }

    /// The bound on a converted reading's error.
    pub fn error_ns(&self) -> u64 {
        self.0.error_ns
    }
}

#[cfg(test)]
#[path = "stamps_tests.rs"]
mod tests;
