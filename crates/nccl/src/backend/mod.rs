//! The NCCL backend: one process drives `g` GPUs (one communicator rank
//! each), timed like nccl-tests (host wall clock around the whole loop,
//! ending when every stream has finished) with per-iteration CUDA events
//! for percentiles, and checked on the GPU by the verification kernels.
//!
//! Split along its seams: `setup` (loading, devices, communicators),
//! `host_group` (communicators of host pairs, for `check`), `arrival`
//! (device timestamps around each timed collective, `--arrival`),
//! `buffers` (allocation, registration, rotation), `issue` (the NCCL
//! calls of each collective), `timing` (timed loop, events, graphs,
//! waiting) and `verify` (the check pass). This file holds the state and
//! the [`Backend`] entry points.

// Backend code is safe Rust: every library call goes through the safe
// layers (crate::api, crate::cuda, crate::kernels, crate::affinity).
#![forbid(unsafe_code)]

mod arrival;
mod buffers;
mod cpu_slot;
mod device;
mod exchange;
mod flags;
mod host_group;
mod issue;
mod memory;
mod setup;
mod timing;
mod verify;

use crate::api::{Communicator, Registration, Window};
use crate::cuda::{Device, DeviceBuffer, Stream};
use crate::device_api::{DevComm, DeviceKernels};
use crate::explain;
use crate::ffi::Nccl;
use crate::kernels::Kernels;
use crate::loader::FoundNccl;
use crate::stamps::Stamps;
use crate::NcclOptions;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::collective::RedopUse;
use collbench_core::{Collective, DeviceInfo, Explanation, ReduceOp};
use collbench_runner::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, Timing};

/// One local GPU: its context, stream, communicator and buffers.
///
/// Fields drop in declaration order: everything that lives in the device's
/// context goes before `dev`, which releases the context.
pub(crate) struct Gpu {
    pub(crate) kernels: Option<Kernels>,
    /// Arrival timing's stamp kernels and slots (loaded on first use).
    pub(crate) stamps: Option<Stamps>,
    /// `-D N`: the device-API kernels loaded on this GPU.
    pub(crate) dev_kernels: Option<DeviceKernels>,
    /// `-D N`: this GPU's device communicator.
    pub(crate) dev_comm: Option<DevComm>,
    pub(crate) send: Option<DeviceBuffer>,
    pub(crate) recv: Option<DeviceBuffer>,
    pub(crate) stream: Stream,
    pub(crate) comm: Communicator,
    /// Rank in this GPU's communicator.
    pub(crate) rank: usize,
    /// Rank among all GPUs of the job (differs from `rank` with
    /// NCCL_TESTS_SPLIT groups).
    pub(crate) global_rank: usize,
    /// NCCL_TESTS_SPLIT colour of this process.
    pub(crate) group: u64,
    /// ncclCommRegister handles of send and receive buffers (`-R 1`).
    pub(crate) reg: Vec<Registration>,
    /// Symmetric windows over send and receive buffers (`-R 2`).
    pub(crate) win: Vec<Window>,
    pub(crate) dev: Device,
}

impl Gpu {
    /// A GPU with its stream, before its communicator (null until NCCL
    /// makes it), buffers and kernels.
    pub(crate) fn new(
        dev: Device,
        stream: Stream,
        rank: usize,
        global_rank: usize,
        group: u64,
    ) -> Gpu {
        Gpu {
            kernels: None,
            stamps: None,
            dev_kernels: None,
            dev_comm: None,
            send: None,
            recv: None,
            stream,
            comm: Communicator::null(),
            rank,
            global_rank,
            group,
            reg: Vec::new(),
            win: Vec::new(),
            dev,
        }
    }
}

/// CUDA GPUs driven through NCCL.
pub struct NcclBackend {
    pub(crate) nccl: Nccl,
    pub(crate) found: FoundNccl,
    pub(crate) gpus: Vec<Gpu>,
    pub(crate) world_size: usize,
    pub(crate) host: String,
    pub(crate) opts: NcclOptions,
    /// What the timed loop learned of the communicators (aborted, graphs
    /// warmed): `timing`'s own part, set there alone.
    pub(crate) loop_state: timing::LoopState,
    /// Rotate buffer offsets between iterations (off with
    /// COLLBENCH_NO_ROTATE=1, for diagnosing cache effects).
    pub(crate) rotate: bool,
    /// NCCL's profiler plugin, when the run asked for explanations.
    pub(crate) explainer: Option<crate::explain::Explainer>,
    /// GPU memory taken by init, buffers and runs (`-M 1`).
    pub(crate) memory: memory::MemoryWatch,
    /// alltoallv's per-peer counts of the case being run (set by
    /// `make_ops`, so the timed loop does not recompute them).
    pub(crate) peers: Option<PeerCounts>,
    /// `-u`, who sends how much to whom in alltoallv, and the watch where
    /// the timed loop publishes progress and learns of a stop, as the
    /// runner set them. New communicators (host groups) start from the
    /// defaults.
    pub(crate) settings: collbench_runner::BackendSettings,
}

/// Progress lines on stderr when COLLBENCH_DEBUG is set, to see where a
/// remote run stops.
pub(crate) fn debug(what: &str) {
    if std::env::var_os("COLLBENCH_DEBUG").is_some() {
        collbench_core::diag::line(&format!("collbench debug: {what}"));
    }
}

/// The collectives `-R 2` (symmetric windows) runs. Verified on H200 x2 /
/// NCCL 2.28.3 with one and two processes for these four; broadcast with
/// two GPUs in one process never finished at 2 MiB.
fn runs_with_windows(c: Collective) -> bool {
    matches!(
        c,
        Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::AllToAll
    )
}

/// Mulsum on a reducing collective: needs a premulsum operator per GPU.
pub(crate) fn needs_pre_mul_sum(case: &CaseSpec) -> bool {
    case.redop == ReduceOp::MulSum && case.collective.spec().redop == RedopUse::Reduces
}

/// fp8 with avg or mulsum on a communicator of one rank: NCCL 2.28.3
/// refuses the call ("invalid argument", all_reduce measured on one H200,
/// bench/results/h200x1/session5) and nccl-tests stops the whole run
/// there; skipping the variant lets `-d all -o all` go on. With two ranks
/// or more, NCCL decides.
pub(crate) fn refused_on_one_rank(case: &CaseSpec) -> bool {
    case.world_size == 1
        && case.dtype.is_f8()
        && matches!(case.redop, ReduceOp::Avg | ReduceOp::MulSum)
        && case.collective.spec().redop == RedopUse::Reduces
}

impl NcclBackend {
    pub(crate) fn ensure_usable(&self) -> Result<(), BackendError> {
        if self.loop_state.aborted() {
            return Err(BackendError::Library(
                "the NCCL communicators were aborted after an earlier error".into(),
            ));
        }
        Ok(())
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        if self.loop_state.aborted() {
            return;
        }
        for gpu in &self.gpus {
            let _ = gpu.dev.bind();
            let _ = gpu.stream.synchronize();
        }
        self.release_device_api();
        self.release_buffers();
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            let _ = self.nccl.comm_destroy(&mut gpu.comm);
        }
    }
}

impl Backend for NcclBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "nccl".into(),
            library: Some(format!("NCCL {}", self.found.version_string())),
            library_path: Some(self.found.path.display().to_string()),
            library_version_code: Some(self.found.version_code as u32),
            devices: self
                .gpus
                .iter()
                .map(|g| DeviceInfo {
                    rank: g.global_rank as u64,
                    group: g.group,
                    pid: std::process::id() as u64,
                    host: self.host.clone(),
                    device: g.dev.ordinal as u64,
                    bus_id: Some(g.dev.pci_bus_id()),
                    name: g.dev.name(),
                })
                .collect(),
        }
    }

    fn nccl_path(&mut self) -> Option<collbench_core::nccl_path::NcclPath> {
        crate::path_capture::read().ok()
    }

    fn memory_usage(&mut self) -> Option<collbench_runner::MemoryUsage> {
        Some(self.memory.usage(&self.free_memory()))
    }

    fn local_ranks(&self) -> usize {
        self.gpus.len()
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        self.device_supports(case)?;
        if self.opts.nccl_only.registration == collbench_core::Registration::Symmetric
            && !runs_with_windows(case.collective)
        {
            return Err(BackendError::Unsupported(
                "-R 2 runs all_reduce, all_gather, reduce_scatter and alltoall only (broadcast hung at 2 MiB with symmetric windows on NCCL 2.28.3): use -R 1 for this collective".into(),
            ));
        }
        if case.dtype.is_f8() {
            if self.found.version_code < 22400 {
                return Err(BackendError::Unsupported(format!(
                    "{} needs NCCL >= 2.24 (found {})",
                    case.dtype,
                    self.found.version_string()
                )));
            }
            if let Some(g) = self.gpus.iter().find(|g| g.dev.compute_capability().0 < 9) {
                return Err(BackendError::Unsupported(format!(
                    "{} needs compute capability >= 9.0 (GPU {} is {:?})",
                    case.dtype,
                    g.dev.ordinal,
                    g.dev.compute_capability()
                )));
            }
        }
        if refused_on_one_rank(case) {
            return Err(BackendError::Unsupported(format!(
                "NCCL {} refuses {} with {} on a one-rank communicator (invalid argument; nccl-tests stops there)",
                self.found.version_string(),
                case.dtype,
                case.redop
            )));
        }
        if needs_pre_mul_sum(case) && !self.nccl.has_pre_mul_sum() {
            return Err(BackendError::Unsupported(
                "mulsum needs NCCL >= 2.11".into(),
            ));
        }
        Ok(())
    }

    /// Keeps `-u`, the traffic and the watch: NCCL applies all three.
    fn settings(&mut self) -> Option<&mut collbench_runner::BackendSettings> {
        Some(&mut self.settings)
    }

    fn group(
        &mut self,
        control: &dyn collbench_core::Bootstrap,
        group: Option<u32>,
    ) -> Result<Option<Box<dyn Backend>>, BackendError> {
        Ok(self
            .for_group(control, group)?
            .map(|b| Box::new(b) as Box<dyn Backend>))
    }

    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        debug(&format!(
            "time {} {} {} in_place={}",
            case.collective,
            case.dtype,
            case.size_bytes(),
            case.in_place
        ));
        self.ensure_usable()?;
        self.ensure_buffers(timing.max_bytes.max(case.size_bytes()))?;
        let ops = self.make_ops(case)?;
        let result = self.time_inner(case, timing, &ops);
        self.free_ops(case, &ops);
        result
    }

    /// One untimed run of the case with NCCL's profiler events on: what
    /// NCCL reported it ran on this process's ranks.
    fn explain(&mut self, case: &CaseSpec) -> Result<Option<Explanation>, BackendError> {
        let Some(explainer) = self.explainer.clone() else {
            return Ok(None);
        };
        if let Some(d) = self.device_implementation() {
            return Ok(Some(Explanation::unavailable(format!(
                "-D {d}: collbench's device-API kernel ran, not an NCCL collective"
            ))));
        }
        if self.world_size == 1 {
            // A communicator of one rank copies locally: NCCL picks no
            // algorithm and reports no kernel, so do not wait for one.
            return Ok(Some(Explanation::unavailable(
                "one rank: NCCL copies locally and runs no collective algorithm",
            )));
        }
        if case.size_bytes() == 0 {
            // NCCL returns from a 0-element call at once: no kernel, no
            // profiler event, no TUNING line to wait for.
            return Ok(Some(Explanation::nothing_launched()));
        }
        self.ensure_usable()?;
        self.ensure_buffers(case.size_bytes())?;
        let ops = self.make_ops(case)?;
        let ranks = explain::backend_hook::expected_ranks(
            self.gpus.iter().map(|g| (g.rank, g.global_rank)),
        );
        let max = case.size_bytes();
        let result = explain::backend_hook::explain_case(&explainer, &ranks, || {
            self.launch(case, 0, max, &ops)?;
            self.wait_all()
        });
        self.free_ops(case, &ops);
        result
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        debug("check");
        self.ensure_usable()?;
        self.ensure_buffers(case.size_bytes())?;
        let ops = self.make_ops(case)?;
        let result = self.check_inner(case, seed, corrupt, &ops);
        self.free_ops(case, &ops);
        result
    }

    fn outputs(&mut self, case: &CaseSpec, seed: u64) -> Result<Vec<Vec<u8>>, BackendError> {
        debug("outputs");
        self.ensure_usable()?;
        self.ensure_buffers(case.size_bytes())?;
        let ops = self.make_ops(case)?;
        let result = self.outputs_inner(case, seed, &ops);
        self.free_ops(case, &ops);
        result
    }
}

/// A case for the unit tests of the backend's pure logic.
#[cfg(test)]
pub(crate) fn test_case(
    collective: Collective,
    dtype: collbench_core::DataType,
    size_bytes: u64,
    world_size: usize,
    in_place: bool,
) -> CaseSpec {
    CaseSpec {
        collective,
        dtype,
        redop: ReduceOp::Sum,
        root: 0,
        counts: collective.counts(size_bytes, dtype.size_bytes(), world_size),
        in_place,
        world_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::DataType;

    #[test]
    fn windows_run_the_four_verified_collectives() {
        let ok: Vec<Collective> = Collective::ALL
            .into_iter()
            .filter(|&c| runs_with_windows(c))
            .collect();
        assert_eq!(
            ok,
            [
                Collective::AllReduce,
                Collective::AllGather,
                Collective::ReduceScatter,
                Collective::AllToAll
            ]
        );
    }

    #[test]
    fn fp8_avg_and_mulsum_are_skipped_on_one_rank_only() {
        let mut c = test_case(Collective::AllReduce, DataType::F8e4m3, 1024, 1, false);
        for (redop, refused) in [
            (ReduceOp::Avg, true),
            (ReduceOp::MulSum, true),
            (ReduceOp::Sum, false),
            (ReduceOp::Max, false),
        ] {
            c.redop = redop;
            assert_eq!(refused_on_one_rank(&c), refused, "{redop:?}");
        }
        c.redop = ReduceOp::Avg;
        c.world_size = 2;
        assert!(!refused_on_one_rank(&c), "two ranks: NCCL decides");
        c.world_size = 1;
        c.dtype = DataType::Bfloat16;
        assert!(!refused_on_one_rank(&c));
    }

    #[test]
    fn premulsum_only_for_mulsum_on_reducing_collectives() {
        let mut c = test_case(Collective::AllReduce, DataType::Float, 1024, 2, false);
        assert!(!needs_pre_mul_sum(&c));
        c.redop = ReduceOp::MulSum;
        assert!(needs_pre_mul_sum(&c));
        c.collective = Collective::AllGather;
        assert!(!needs_pre_mul_sum(&c));
    }
}
