//! Send and receive buffers: allocation (cuMemAlloc, or ncclMemAlloc under
//! `-R 2`), registration (`-R 1` ncclCommRegister, `-R 2` symmetric
//! windows), and the offsets each operation uses (rotation through the
//! allocation, `-u` misalignment, in-place layouts).

use super::comms::Comms;
use super::memory::MemoryWatch;
use crate::api::{Registration as RegHandle, Window};
use crate::cuda::{DeviceBuffer, DevicePtr};
use crate::group::Group;
use collbench_core::Registration;
use collbench_runner::{BackendError, CaseSpec, Shortfall};

/// Bytes each buffer needs for sizes up to `largest`: exactly what the
/// largest case touches (nccl-tests allocates the same); `-u` needs one
/// element more at most (8 bytes covers every type).
pub(crate) fn buffer_bytes(largest: u64, unalign: u64) -> usize {
    largest as usize + unalign as usize * 8
}

/// Byte offsets of one rank's operands for the operation at `iter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offsets {
    /// Into the send buffer, or into the receive buffer when in place.
    pub(crate) send: u64,
    /// Into the receive buffer.
    pub(crate) recv: u64,
    /// In place: the input lies in the receive buffer.
    pub(crate) in_place: bool,
}

/// Offsets rotate through the allocation like nccl-tests' (each operation
/// one slice further, within `max_bytes`), so caches do not flatter small
/// sizes; every offset is shifted by `unalign` elements (`-u`). In place,
/// the input and output sit at the collective's in-place offsets for
/// `rank` within the receive buffer.
pub(crate) fn offsets(
    case: &CaseSpec,
    rank: usize,
    iter: u64,
    max_bytes: u64,
    rotate: bool,
    unalign: u64,
) -> Offsets {
    let elt = case.dtype.size_bytes() as u64;
    let c = &case.counts;
    let t = c.send_count.max(c.recv_count) * elt;
    let steps = if t > 0 && rotate {
        (max_bytes / t).max(1)
    } else {
        1
    };
    let shift = t * (iter % steps) + unalign * elt;
    let r = rank as u64;
    if case.in_place {
        Offsets {
            send: shift + c.send_inplace_offset * r * elt,
            recv: shift + c.recv_inplace_offset * r * elt,
            in_place: true,
        }
    } else {
        Offsets {
            send: shift,
            recv: shift,
            in_place: false,
        }
    }
}

/// One local GPU's send and receive buffers and their registrations.
#[derive(Default)]
pub(crate) struct GpuBuffers {
    pub(crate) send: Option<DeviceBuffer>,
    pub(crate) recv: Option<DeviceBuffer>,
    /// ncclCommRegister handles of send and receive buffers (`-R 1`).
    pub(crate) reg: Vec<RegHandle>,
    /// Symmetric windows over send and receive buffers (`-R 2`).
    pub(crate) win: Vec<Window>,
}

/// Every local GPU's buffers (in GPU order), how operations place their
/// operands in them, and the GPU memory they and the run took (`-M 1`).
pub(crate) struct Buffers {
    pub(crate) gpus: Vec<GpuBuffers>,
    /// Rotate buffer offsets between iterations (off with
    /// COLLBENCH_NO_ROTATE=1, for diagnosing cache effects).
    pub(crate) rotate: bool,
    /// GPU memory taken by init, buffers and runs (`-M 1`).
    pub(crate) memory: MemoryWatch,
}

impl Buffers {
    /// No buffers yet on `gpus` GPUs; `memory` as the communicators left it.
    pub(crate) fn new(gpus: usize, rotate: bool, memory: MemoryWatch) -> Buffers {
        Buffers {
            gpus: (0..gpus).map(|_| GpuBuffers::default()).collect(),
            rotate,
            memory,
        }
    }

    /// Makes sure each GPU has send and receive buffers for `bytes`. All
    /// GPUs' buffers are the same size, so they are (re)allocated together:
    /// `-R 2` registers them collectively.
    pub(crate) fn ensure(&mut self, comms: &Comms, bytes: u64) -> Result<(), BackendError> {
        let bytes = buffer_bytes(bytes, comms.settings.unalign);
        let have = self.gpus[0].recv.as_ref().map(|b| b.bytes).unwrap_or(0);
        if have >= bytes {
            return Ok(());
        }
        self.release(comms);
        let free_before = comms.free_memory();
        for i in 0..comms.gpus.len() {
            comms.gpus[i].dev.bind()?;
            let send = alloc_buffer(comms, i, bytes)?;
            let recv = alloc_buffer(comms, i, bytes)?;
            (self.gpus[i].send, self.gpus[i].recv) = (Some(send), Some(recv));
        }
        match comms.opts.nccl_only.registration {
            Registration::Local => self.register_buffers(comms)?,
            Registration::Symmetric => self.register_windows(comms)?,
            Registration::None => {}
        }
        let free_after = comms.free_memory();
        self.memory.buffers(&free_before, &free_after);
        Ok(())
    }

    /// `-R 1`: ncclCommRegister on every buffer (local, not collective).
    fn register_buffers(&mut self, comms: &Comms) -> Result<(), BackendError> {
        if !comms.nccl.has_comm_register() {
            return Err(BackendError::Unsupported(
                "-R 1 needs NCCL >= 2.19 (ncclCommRegister)".into(),
            ));
        }
        for (gpu, b) in comms.gpus.iter().zip(&mut self.gpus) {
            gpu.dev.bind()?;
            for buf in [b.send.as_ref(), b.recv.as_ref()].into_iter().flatten() {
                let handle = comms.nccl.comm_register(&gpu.comm, buf)?;
                b.reg.push(handle);
            }
        }
        Ok(())
    }

    /// `-R 2`: symmetric windows over every buffer. Registration is
    /// collective over each communicator, so the GPUs of this process
    /// register inside one group.
    fn register_windows(&mut self, comms: &Comms) -> Result<(), BackendError> {
        if !comms.nccl.has_window_register() {
            return Err(BackendError::Unsupported(
                "-R 2 needs NCCL >= 2.27 (ncclCommWindowRegister): use -R 1".into(),
            ));
        }
        let mut owners = Vec::new();
        let mut bufs = Vec::new();
        for (i, (gpu, b)) in comms.gpus.iter().zip(&self.gpus).enumerate() {
            for buf in [b.send.as_ref(), b.recv.as_ref()].into_iter().flatten() {
                owners.push(i);
                bufs.push((&gpu.comm, buf));
            }
        }
        let wins = comms.nccl.window_register_all(&bufs)?;
        for (i, w) in owners.into_iter().zip(wins) {
            self.gpus[i].win.extend(w);
        }
        Ok(())
    }

    /// Undoes `-R 1`/`-R 2` registration and frees every buffer.
    pub(crate) fn release(&mut self, comms: &Comms) {
        let n = &comms.nccl;
        if self.gpus.iter().any(|g| !g.win.is_empty()) {
            // Deregistering a window is collective too: one group. Errors
            // are ignored, as the buffers go anyway.
            let group = Group::start(n);
            for (gpu, b) in comms.gpus.iter().zip(&mut self.gpus) {
                for w in b.win.drain(..) {
                    n.window_deregister(&gpu.comm, w);
                }
            }
            if let Ok(g) = group {
                let _ = g.end();
            }
        }
        for (gpu, b) in comms.gpus.iter().zip(&mut self.gpus) {
            let _ = gpu.dev.bind();
            for h in b.reg.drain(..) {
                n.comm_deregister(&gpu.comm, h);
            }
            b.send = None;
            b.recv = None;
        }
    }

    /// Buffer addresses (send, receive) of local GPU `i` for the operation
    /// at `iter` (see [`offsets`]).
    pub(crate) fn ptrs(
        &self,
        comms: &Comms,
        case: &CaseSpec,
        i: usize,
        iter: u64,
        max_bytes: u64,
    ) -> (DevicePtr, DevicePtr) {
        let b = &self.gpus[i];
        let o = offsets(
            case,
            comms.gpus[i].rank,
            iter,
            max_bytes,
            self.rotate,
            comms.settings.unalign,
        );
        let recv = b.recv.as_ref().expect("buffers allocated");
        let send = if o.in_place {
            recv
        } else {
            b.send.as_ref().expect("buffers allocated")
        };
        (send.at(o.send), recv.at(o.recv))
    }
}

/// One buffer on local GPU `i`: cuMemAlloc, or ncclMemAlloc under `-R 2`
/// (window registration needs memory NCCL can map into other ranks).
fn alloc_buffer(comms: &Comms, i: usize, bytes: usize) -> Result<DeviceBuffer, BackendError> {
    let gpu = &comms.gpus[i];
    let oom = |e: &dyn std::fmt::Display| {
        let (free, total) = gpu.dev.mem_info();
        BackendError::OutOfMemory(Shortfall::Gpu {
            cause: e.to_string(),
            bytes,
            ordinal: gpu.dev.ordinal,
            free,
            total,
        })
    };
    if comms.opts.nccl_only.registration != Registration::Symmetric {
        return DeviceBuffer::alloc(bytes).map_err(|e| oom(&e));
    }
    if !comms.nccl.has_mem_alloc() {
        return Err(BackendError::Unsupported(
            "-R 2 needs NCCL >= 2.27 (ncclMemAlloc, ncclCommWindowRegister): use -R 1".into(),
        ));
    }
    comms.nccl.mem_alloc(bytes).map_err(|e| oom(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_case;
    use collbench_core::{Collective, DataType};

    #[test]
    fn buffers_hold_the_largest_case_plus_the_misalignment() {
        assert_eq!(buffer_bytes(1 << 20, 0), 1 << 20);
        assert_eq!(buffer_bytes(1 << 20, 3), (1 << 20) + 24);
    }

    #[test]
    fn offsets_rotate_within_the_largest_size() {
        // 1 KiB float all_reduce in a 4 KiB sweep: four slices, then wrap.
        let c = test_case(Collective::AllReduce, DataType::Float, 1024, 2, false);
        let at = |iter| offsets(&c, 1, iter, 4096, true, 0);
        let seen: Vec<u64> = (0..6).map(|i| at(i).send).collect();
        assert_eq!(seen, [0, 1024, 2048, 3072, 0, 1024]);
        assert_eq!(at(2).recv, 2048);
        assert!(!at(2).in_place);
        // Without rotation (COLLBENCH_NO_ROTATE) every operation is at 0.
        assert_eq!(offsets(&c, 1, 3, 4096, false, 0).send, 0);
    }

    #[test]
    fn a_size_larger_than_the_sweep_does_not_rotate() {
        let c = test_case(Collective::AllReduce, DataType::Float, 8192, 2, false);
        assert_eq!(offsets(&c, 0, 5, 4096, true, 0).send, 0);
    }

    #[test]
    fn unalign_shifts_by_whole_elements() {
        let c = test_case(Collective::AllReduce, DataType::Double, 1024, 2, false);
        let o = offsets(&c, 0, 0, 1024, true, 1);
        assert_eq!((o.send, o.recv), (8, 8));
    }

    #[test]
    fn in_place_all_gather_input_sits_at_the_rank_slice_of_the_output() {
        // all_gather, 4 ranks, 4 KiB output: each rank sends 1 KiB, and in
        // place its input is its own slice of the receive buffer.
        let c = test_case(Collective::AllGather, DataType::Float, 4096, 4, true);
        let o = offsets(&c, 2, 0, 4096, true, 0);
        assert!(o.in_place);
        assert_eq!(o.send, 2 * 1024);
        assert_eq!(o.recv, 0);
    }

    #[test]
    fn in_place_reduce_scatter_output_sits_at_the_rank_slice_of_the_input() {
        let c = test_case(Collective::ReduceScatter, DataType::Float, 4096, 4, true);
        let o = offsets(&c, 3, 0, 4096, true, 0);
        assert_eq!((o.send, o.recv), (0, 3 * 1024));
    }
}
