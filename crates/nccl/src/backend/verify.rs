//! The check pass: poison the outputs, write the inputs (GPU kernels, or
//! a copy from the host when they are unavailable), run the case once and
//! count wrong elements. [`Verifier`] owns the verification kernels.

use super::comms::Comms;
use super::issue::Launcher;
use crate::cuda::{self, DevicePtr};
use crate::ffi::RedOpId;
use crate::kernels::{self, KernelParams, Kernels};
use collbench_runner::{BackendError, CaseSpec};

/// Everything the result of `case` on `rank` can land in, as (start,
/// bytes): the receive slice, or in place the whole shared buffer, which
/// starts `send_inplace_offset` elements per rank before the input.
fn poison_region(
    case: &CaseSpec,
    rank: usize,
    send: DevicePtr,
    recv: DevicePtr,
) -> (DevicePtr, usize) {
    let elt = case.dtype.size_bytes();
    let c = &case.counts;
    if case.in_place {
        let base = send.back_by(c.send_inplace_offset * rank as u64 * elt as u64);
        (base, c.send_count.max(c.recv_count) as usize * elt)
    } else {
        (recv, c.recv_count as usize * elt)
    }
}

/// The check's part of the backend: the verification kernels loaded on
/// each local GPU (in GPU order); without them a GPU's check runs on the
/// host.
pub(crate) struct Verifier {
    pub(crate) kernels: Vec<Option<Kernels>>,
}

impl Verifier {
    /// Poisons the outputs, writes the inputs of `seed` on every GPU and
    /// runs the case once: the first half of the check, and all of
    /// [`collbench_runner::Backend::outputs`] before its read-back.
    fn fill_and_run(
        &self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        seed: u64,
        ops: &[RedOpId],
    ) -> Result<(), BackendError> {
        let max = case.size_bytes();
        for i in 0..comms.gpus.len() {
            let (send, recv) = run.buffers.ptrs(comms, case, i, 0, max);
            let gpu = &comms.gpus[i];
            gpu.dev.bind()?;
            let params = KernelParams::new(case, gpu.rank, seed);
            // Poison everything the result can land in, then write inputs.
            let (base, bytes) = poison_region(case, gpu.rank, send, recv);
            cuda::memset_async(base, 0xff, bytes, &gpu.stream)?;
            match &self.kernels[i] {
                Some(k) => k.fill(send, &params, case.dtype, &gpu.stream)?,
                None => {
                    gpu.stream.synchronize()?;
                    cuda::copy_to_device(send, &kernels::host_input(case, gpu.rank, seed))?;
                }
            }
        }
        comms.wait_all()?;
        run.launch(comms, case, 0, max, ops)?;
        comms.wait_all()
    }

    /// The check pass: wrong elements over every local GPU (`corrupt`
    /// spoils one output element on the root first, for the tests of the
    /// check itself).
    pub(crate) fn check(
        &self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        seed: u64,
        corrupt: bool,
        ops: &[RedOpId],
    ) -> Result<u64, BackendError> {
        let elt = case.dtype.size_bytes();
        let c = case.counts;
        let max = case.size_bytes();
        self.fill_and_run(comms, run, case, seed, ops)?;
        let mut wrong = 0;
        for i in 0..comms.gpus.len() {
            let (_, recv) = run.buffers.ptrs(comms, case, i, 0, max);
            let gpu = &comms.gpus[i];
            gpu.dev.bind()?;
            if corrupt && gpu.rank == case.root && c.recv_count > 0 {
                cuda::memset_async(recv, 0xff, elt, &gpu.stream)?;
            }
            let params = KernelParams::new(case, gpu.rank, seed);
            let peers = run.issue.peers.as_ref();
            wrong += match (&self.kernels[i], peers) {
                (Some(k), None) => k.check(recv, &params, case.dtype, &gpu.stream)?,
                (Some(k), Some(peers)) => {
                    let segs = kernels::alltoallv_segments(peers, gpu.rank);
                    k.check_alltoallv(recv, &params, case.dtype, &segs, &gpu.stream)?
                }
                (None, _) => {
                    gpu.stream.synchronize()?;
                    let mut host = vec![0u8; c.recv_count as usize * elt];
                    cuda::copy_to_host(&mut host, recv)?;
                    kernels::host_check(case, gpu.rank, seed, peers, &host)
                }
            };
        }
        Ok(wrong)
    }

    /// Runs the case once on the input of `seed` and reads every GPU's
    /// output back to the host, as the check does without its kernels
    /// (the general read-back, [`collbench_runner::Backend::outputs`]).
    pub(crate) fn outputs(
        &self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        seed: u64,
        ops: &[RedOpId],
    ) -> Result<Vec<Vec<u8>>, BackendError> {
        self.fill_and_run(comms, run, case, seed, ops)?;
        let bytes = case.counts.recv_count as usize * case.dtype.size_bytes();
        let mut outputs = Vec::with_capacity(comms.gpus.len());
        for i in 0..comms.gpus.len() {
            let (_, recv) = run.buffers.ptrs(comms, case, i, 0, case.size_bytes());
            let gpu = &comms.gpus[i];
            gpu.dev.bind()?;
            let mut host = vec![0u8; bytes];
            cuda::copy_to_host(&mut host, recv)?;
            outputs.push(host);
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_case;
    use collbench_core::{Collective, DataType};

    #[test]
    fn out_of_place_poisons_the_receive_slice() {
        let c = test_case(Collective::AllGather, DataType::Float, 4096, 4, false);
        let (send, recv) = (DevicePtr::from_addr(0x10000), DevicePtr::from_addr(0x20000));
        assert_eq!(poison_region(&c, 2, send, recv), (recv, 4096));
    }

    #[test]
    fn in_place_poisons_the_whole_shared_buffer() {
        // In place, rank 2's all_gather input is its slice of the output:
        // the poisoned region starts two slices before it.
        let c = test_case(Collective::AllGather, DataType::Float, 4096, 4, true);
        let base = DevicePtr::from_addr(0x20000);
        let send = base.offset_by(2 * 1024);
        assert_eq!(poison_region(&c, 2, send, base), (base, 4096));
    }
}
