//! `-D N`: collectives run by collbench's device-API kernels instead of
//! NCCL's own (crate::device_api). Set up once after the communicators (a
//! device communicator and the kernels per GPU), launched in place of the
//! NCCL call, on the `-R 2` symmetric windows.

use super::buffers::{offsets, Buffers, Offsets};
use super::comms::Comms;
use crate::device_api::{self, DevComm, DevCommRequirements, DeviceKernels, Operands};
use crate::NcclOptions;
use collbench_runner::{BackendError, CaseSpec};

/// Where a device kernel reads and writes: like nccl-tests, which hands
/// its device kernels the window offsets of the first iteration whatever
/// the iteration (no rotation through the buffers), shifted by `-u`.
pub(crate) fn device_offsets(
    case: &CaseSpec,
    rank: usize,
    max_bytes: u64,
    unalign: u64,
) -> Offsets {
    offsets(case, rank, 0, max_bytes, false, unalign)
}

/// The line when the device communicators do not span every rank over
/// NVLink (nccl-tests' words for the same check).
fn not_all_lsa(d: i32, n_ranks: i32, lsa_size: i32) -> String {
    format!(
        "DeviceImplementation {d} requires CUDA P2P connectivity across all ranks. Not all ranks of this communicator have P2P connectivity ({lsa_size} of {n_ranks} ranks share NVLink): run within one NVLink domain, or -D 0"
    )
}

/// `-D N`'s part of the backend: which implementation runs, and on each
/// local GPU (in GPU order) its device communicator and the kernels
/// loaded on it.
pub(crate) struct DeviceApi {
    /// `-D N`, N != 0; `None` runs NCCL's own collectives.
    implementation: Option<i32>,
    /// The kernels loaded on each GPU.
    kernels: Vec<Option<DeviceKernels>>,
    /// Each GPU's device communicator.
    dev_comms: Vec<Option<DevComm>>,
}

impl DeviceApi {
    /// Nothing set up yet on `gpus` GPUs, for the implementation `opts`
    /// ask for.
    pub(crate) fn new(opts: &NcclOptions, gpus: usize) -> DeviceApi {
        DeviceApi {
            implementation: opts.nccl_only.device_implementation.filter(|&d| d != 0),
            kernels: (0..gpus).map(|_| None).collect(),
            dev_comms: vec![None; gpus],
        }
    }

    /// The device-API implementation of this run (`-D N`, N != 0).
    pub(crate) fn implementation(&self) -> Option<i32> {
        self.implementation
    }

    /// After the communicators: under `-D N`, one device communicator per
    /// GPU (with one LSA barrier per CTA) and the kernels loaded on it.
    /// `flags::device_api` has already refused what cannot run.
    pub(crate) fn setup(&mut self, comms: &Comms) -> Result<(), BackendError> {
        let Some(d) = self.implementation else {
            return Ok(());
        };
        if !comms.nccl.has_dev_comm() {
            return Err(BackendError::Unsupported(format!(
                "-D {d} needs ncclDevCommCreate (NCCL >= 2.28.0), which NCCL {} at {} lacks: use NCCL 2.28, or -D 0",
                comms.found.version_string(),
                comms.found.path.display()
            )));
        }
        let ctas = device_api::cta_count(comms.opts.nccl_only.device_cta_count);
        let reqs = DevCommRequirements::lsa_barriers(ctas as i32);
        let handles: Vec<_> = comms.gpus.iter().map(|g| &g.comm).collect();
        let dev_comms = comms.nccl.dev_comm_create_all(&handles, &reqs)?;
        for (slot, dc) in self.dev_comms.iter_mut().zip(dev_comms) {
            *slot = Some(dc);
        }
        if let Some(dc) = self
            .dev_comms
            .iter()
            .filter_map(|dc| *dc)
            .find(|dc| dc.lsa_size != dc.n_ranks)
        {
            return Err(BackendError::Unsupported(not_all_lsa(
                d,
                dc.n_ranks,
                dc.lsa_size,
            )));
        }
        for (gpu, k) in comms.gpus.iter().zip(&mut self.kernels) {
            gpu.dev.bind()?;
            *k = Some(DeviceKernels::load()?);
        }
        Ok(())
    }

    /// Undoes [`DeviceApi::setup`] (before the communicators go).
    pub(crate) fn release(&mut self, comms: &Comms) {
        for (i, gpu) in comms.gpus.iter().enumerate() {
            let _ = gpu.dev.bind();
            self.kernels[i] = None;
            if let Some(dc) = self.dev_comms[i].take() {
                comms.nccl.dev_comm_destroy(&gpu.comm, &dc);
            }
        }
    }

    /// Whether `-D N` runs `case` (nccl-tests' choices of collectives,
    /// types and operators).
    pub(crate) fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        match self.implementation {
            None => Ok(()),
            Some(d) => device_api::check_case(d, case.collective, case.dtype, case.redop)
                .map_err(BackendError::Unsupported),
        }
    }

    /// Enqueues implementation `d` of `case` on every local GPU, `-V` CTAs
    /// each, on the symmetric windows over the send and receive buffers.
    pub(crate) fn launch(
        &self,
        comms: &Comms,
        buffers: &Buffers,
        case: &CaseSpec,
        d: i32,
        max_bytes: u64,
    ) -> Result<(), BackendError> {
        let ctas = device_api::cta_count(comms.opts.nccl_only.device_cta_count);
        for (i, gpu) in comms.gpus.iter().enumerate() {
            let (Some(kernels), Some(dev_comm)) = (&self.kernels[i], &self.dev_comms[i]) else {
                return Err(BackendError::Library(format!(
                    "-D {d}: the device communicator of GPU {} was not created",
                    gpu.dev.ordinal
                )));
            };
            let win = &buffers.gpus[i].win;
            let [send, recv] = &win[..] else {
                return Err(BackendError::Library(format!(
                    "-D {d} needs symmetric windows over the send and receive buffers, but NCCL registered {} on GPU {}",
                    win.len(),
                    gpu.dev.ordinal
                )));
            };
            let o = device_offsets(case, gpu.rank, max_bytes, comms.settings.unalign);
            let ops = Operands {
                send: if o.in_place { recv } else { send },
                send_offset: o.send,
                recv,
                recv_offset: o.recv,
                count: case.counts.param_count,
                root: case.root as i32,
            };
            gpu.dev.bind()?;
            kernels.launch(
                case.collective,
                d,
                case.dtype,
                ctas,
                &ops,
                dev_comm,
                &gpu.stream,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_case;
    use collbench_core::{Collective, DataType};

    #[test]
    fn device_kernels_work_at_the_start_of_the_windows() {
        // Any iteration: offset 0 (nccl-tests passes no rotation), -u
        // shifts by whole elements.
        let c = test_case(Collective::AllReduce, DataType::Float, 1024, 2, false);
        let o = device_offsets(&c, 1, 1 << 20, 0);
        assert_eq!((o.send, o.recv, o.in_place), (0, 0, false));
        let o = device_offsets(&c, 1, 1 << 20, 3);
        assert_eq!((o.send, o.recv), (12, 12));
        // In place, alltoall and all_reduce read and write one window at 0.
        let c = test_case(Collective::AllToAll, DataType::Double, 4096, 4, true);
        let o = device_offsets(&c, 3, 1 << 20, 0);
        assert_eq!((o.send, o.recv, o.in_place), (0, 0, true));
    }

    #[test]
    fn lsa_refusal_names_the_ranks_and_the_fix() {
        assert_eq!(
            not_all_lsa(1, 16, 8),
            "DeviceImplementation 1 requires CUDA P2P connectivity across all ranks. Not all ranks of this communicator have P2P connectivity (8 of 16 ranks share NVLink): run within one NVLink domain, or -D 0"
        );
    }
}
