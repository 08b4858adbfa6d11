//! `-D N`: collectives run by collbench's device-API kernels instead of
//! NCCL's own (crate::device_api). Set up once after the communicators (a
//! device communicator and the kernels per GPU), launched in place of the
//! NCCL call, on the `-R 2` symmetric windows.

use super::buffers::{offsets, Offsets};
use super::NcclBackend;
use crate::device_api::{self, DevCommRequirements, DeviceKernels, Operands};
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

impl NcclBackend {
    /// The device-API implementation of this run (`-D N`, N != 0).
    pub(crate) fn device_implementation(&self) -> Option<i32> {
        self.opts
            .nccl_only
            .device_implementation
            .filter(|&d| d != 0)
    }

    /// After the communicators: under `-D N`, one device communicator per
    /// GPU (with one LSA barrier per CTA) and the kernels loaded on it.
    /// `flags::device_api` has already refused what cannot run.
    pub(crate) fn setup_device_api(&mut self) -> Result<(), BackendError> {
        let Some(d) = self.device_implementation() else {
            return Ok(());
        };
        if !self.nccl.has_dev_comm() {
            return Err(BackendError::Unsupported(format!(
                "-D {d} needs ncclDevCommCreate (NCCL >= 2.28.0), which NCCL {} at {} lacks: use NCCL 2.28, or -D 0",
                self.found.version_string(),
                self.found.path.display()
            )));
        }
        let ctas = device_api::cta_count(self.opts.nccl_only.device_cta_count);
        let reqs = DevCommRequirements::lsa_barriers(ctas as i32);
        let comms: Vec<_> = self.gpus.iter().map(|g| &g.comm).collect();
        let dev_comms = self.nccl.dev_comm_create_all(&comms, &reqs)?;
        for (gpu, dc) in self.gpus.iter_mut().zip(dev_comms) {
            gpu.dev_comm = Some(dc);
        }
        if let Some(dc) = self
            .gpus
            .iter()
            .filter_map(|g| g.dev_comm)
            .find(|dc| dc.lsa_size != dc.n_ranks)
        {
            return Err(BackendError::Unsupported(not_all_lsa(
                d,
                dc.n_ranks,
                dc.lsa_size,
            )));
        }
        for gpu in &mut self.gpus {
            gpu.dev.bind()?;
            gpu.dev_kernels = Some(DeviceKernels::load()?);
        }
        Ok(())
    }

    /// Undoes [`NcclBackend::setup_device_api`] (before the communicators
    /// go).
    pub(crate) fn release_device_api(&mut self) {
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            gpu.dev_kernels = None;
            if let Some(dc) = gpu.dev_comm.take() {
                self.nccl.dev_comm_destroy(&gpu.comm, &dc);
            }
        }
    }

    /// Whether `-D N` runs `case` (nccl-tests' choices of collectives,
    /// types and operators).
    pub(crate) fn device_supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        match self.device_implementation() {
            None => Ok(()),
            Some(d) => device_api::check_case(d, case.collective, case.dtype, case.redop)
                .map_err(BackendError::Unsupported),
        }
    }

    /// Enqueues implementation `d` of `case` on every local GPU, `-V` CTAs
    /// each, on the symmetric windows over the send and receive buffers.
    pub(crate) fn launch_device(
        &self,
        case: &CaseSpec,
        d: i32,
        max_bytes: u64,
    ) -> Result<(), BackendError> {
        let ctas = device_api::cta_count(self.opts.nccl_only.device_cta_count);
        for gpu in &self.gpus {
            let (Some(kernels), Some(dev_comm)) = (&gpu.dev_kernels, &gpu.dev_comm) else {
                return Err(BackendError::Library(format!(
                    "-D {d}: the device communicator of GPU {} was not created",
                    gpu.dev.ordinal
                )));
            };
            let [send, recv] = &gpu.win[..] else {
                return Err(BackendError::Library(format!(
                    "-D {d} needs symmetric windows over the send and receive buffers, but NCCL registered {} on GPU {}",
                    gpu.win.len(),
                    gpu.dev.ordinal
                )));
            };
            let o = device_offsets(case, gpu.rank, max_bytes, self.settings.unalign);
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
