//! The NCCL backend: one process drives `g` GPUs (one communicator rank
//! each), timed like nccl-tests (host wall clock around the whole loop,
//! ending when every stream has finished) with per-iteration CUDA events
//! for percentiles, and checked on the GPU by the verification kernels.
//!
//! Split into owned parts, each a type with its state and its methods:
//! `comms::Comms` (NCCL as loaded, each GPU's device, stream and
//! communicator; waiting on them, aborting them), built in `setup` (and
//! `host_group`: communicators of host pairs, for `check`);
//! `buffers::Buffers` (allocation, registration, rotation, `-M`'s memory);
//! `device::DeviceApi` (`-D N`'s device communicators and kernels);
//! `issue::Issue` (the NCCL calls of each collective, alltoallv's counts);
//! `timing::Timer` (timed loop, events, graphs; and in `arrival` the
//! device timestamps of `--arrival`); `verify::Verifier` (the check pass
//! and its kernels). This file holds the parts and the [`Backend`] entry
//! points, which hand each part what it borrows.

// Backend code is safe Rust: every library call goes through the safe
// layers (crate::api, crate::cuda, crate::kernels, crate::affinity).
#![forbid(unsafe_code)]

mod arrival;
mod buffers;
mod comms;
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

use crate::explain;
use crate::ffi::RedOpId;
use buffers::Buffers;
use collbench_core::collective::RedopUse;
use collbench_core::{Collective, DeviceInfo, Explanation, ReduceOp};
use collbench_runner::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, Timing};
use comms::Comms;
use device::DeviceApi;
use issue::{Issue, Launcher};
use timing::Timer;
use verify::Verifier;

/// CUDA GPUs driven through NCCL.
///
/// Fields drop in declaration order: the parts whose state lives in the
/// GPUs' contexts (kernels, stamps, device communicators, buffers) go
/// before `comms`, whose devices release the contexts.
pub struct NcclBackend {
    verify: Verifier,
    timer: Timer,
    device: DeviceApi,
    buffers: Buffers,
    issue: Issue,
    comms: Comms,
    /// NCCL's profiler plugin, when the run asked for explanations.
    explainer: Option<crate::explain::Explainer>,
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
    /// Seconds per operation of `iters` back-to-back iterations of `case`
    /// after `warmup` untimed ones: the timed loop alone, without the
    /// per-iteration pass (`collbench tune`'s repeats, which need only
    /// the mean). Buffers hold `span` bytes (at least `case`'s size), and
    /// operations rotate through them as in a sweep up to `span`.
    pub fn time_bare(
        &mut self,
        case: &CaseSpec,
        warmup: u32,
        iters: u32,
        span: u64,
    ) -> Result<f64, BackendError> {
        self.comms.ensure_usable()?;
        self.supports(case)?;
        let max = span.max(case.size_bytes());
        let ops = self.prepare(case, max)?;
        let (comms, timer, _, run) = self.parts();
        let result = timer.bare(comms, run, case, (warmup, iters), max, &ops);
        self.issue.free_ops(&self.comms, case, &ops);
        result
    }

    /// Buffers for `bytes` and the case's operators (free them with
    /// `Issue::free_ops`).
    fn prepare(&mut self, case: &CaseSpec, bytes: u64) -> Result<Vec<RedOpId>, BackendError> {
        self.buffers.ensure(&self.comms, bytes)?;
        self.issue.make_ops(&self.comms, case)
    }

    /// The parts borrowed apart: the communicators and the timer to
    /// change, the verifier and what a launch reads to read.
    fn parts(&mut self) -> (&mut Comms, &mut Timer, &Verifier, Launcher<'_>) {
        let run = Launcher {
            buffers: &self.buffers,
            device: &self.device,
            issue: &self.issue,
        };
        (&mut self.comms, &mut self.timer, &self.verify, run)
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        if self.comms.aborted {
            return;
        }
        self.comms.synchronize_all();
        self.device.release(&self.comms);
        self.buffers.release(&self.comms);
        self.comms.destroy();
    }
}

impl Backend for NcclBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "nccl".into(),
            library: Some(format!("NCCL {}", self.comms.found.version_string())),
            library_path: Some(self.comms.found.path.display().to_string()),
            library_version_code: Some(self.comms.found.version_code as u32),
            devices: self
                .comms
                .gpus
                .iter()
                .map(|g| DeviceInfo {
                    rank: g.global_rank as u64,
                    group: g.group,
                    pid: std::process::id() as u64,
                    host: self.comms.host.clone(),
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
        Some(self.buffers.memory.usage(&self.comms.free_memory()))
    }

    fn local_ranks(&self) -> usize {
        self.comms.gpus.len()
    }

    fn world_size(&self) -> usize {
        self.comms.world_size
    }

    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        self.device.supports(case)?;
        if self.comms.opts.nccl_only.registration == collbench_core::Registration::Symmetric
            && !runs_with_windows(case.collective)
        {
            return Err(BackendError::Unsupported(
                "-R 2 runs all_reduce, all_gather, reduce_scatter and alltoall only (broadcast hung at 2 MiB with symmetric windows on NCCL 2.28.3): use -R 1 for this collective".into(),
            ));
        }
        if case.dtype.is_f8() {
            if self.comms.found.version_code < 22400 {
                return Err(BackendError::Unsupported(format!(
                    "{} needs NCCL >= 2.24 (found {})",
                    case.dtype,
                    self.comms.found.version_string()
                )));
            }
            if let Some(g) = self
                .comms
                .gpus
                .iter()
                .find(|g| g.dev.compute_capability().0 < 9)
            {
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
                self.comms.found.version_string(),
                case.dtype,
                case.redop
            )));
        }
        if needs_pre_mul_sum(case) && !self.comms.nccl.has_pre_mul_sum() {
            return Err(BackendError::Unsupported(
                "mulsum needs NCCL >= 2.11".into(),
            ));
        }
        Ok(())
    }

    /// Keeps `-u`, the traffic and the watch: NCCL applies all three.
    fn settings(&mut self) -> Option<&mut collbench_runner::BackendSettings> {
        Some(&mut self.comms.settings)
    }

    fn group(
        &mut self,
        control: &dyn collbench_core::Bootstrap,
        group: Option<u32>,
    ) -> Result<Option<Box<dyn Backend>>, BackendError> {
        Ok(
            host_group::for_group(&self.comms, self.buffers.rotate, control, group)?
                .map(|b| Box::new(b) as Box<dyn Backend>),
        )
    }

    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        debug(&format!(
            "time {} {} {} in_place={}",
            case.collective,
            case.dtype,
            case.size_bytes(),
            case.in_place
        ));
        self.comms.ensure_usable()?;
        let ops = self.prepare(case, timing.max_bytes.max(case.size_bytes()))?;
        let (comms, timer, _, run) = self.parts();
        let result = timer.time(comms, run, case, timing, &ops);
        self.issue.free_ops(&self.comms, case, &ops);
        result
    }

    /// One untimed run of the case with NCCL's profiler events on: what
    /// NCCL reported it ran on this process's ranks.
    fn explain(&mut self, case: &CaseSpec) -> Result<Option<Explanation>, BackendError> {
        let Some(explainer) = self.explainer.clone() else {
            return Ok(None);
        };
        if let Some(d) = self.device.implementation() {
            return Ok(Some(Explanation::unavailable(format!(
                "-D {d}: collbench's device-API kernel ran, not an NCCL collective"
            ))));
        }
        if self.comms.world_size == 1 {
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
        self.comms.ensure_usable()?;
        let ops = self.prepare(case, case.size_bytes())?;
        let ranks = explain::backend_hook::expected_ranks(
            self.comms.gpus.iter().map(|g| (g.rank, g.global_rank)),
        );
        let max = case.size_bytes();
        let (comms, _, _, run) = self.parts();
        let result = explain::backend_hook::explain_case(&explainer, &ranks, || {
            run.launch(comms, case, 0, max, &ops)?;
            comms.wait_all()
        });
        self.issue.free_ops(&self.comms, case, &ops);
        result
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        debug("check");
        self.comms.ensure_usable()?;
        let ops = self.prepare(case, case.size_bytes())?;
        let (comms, _, verify, run) = self.parts();
        let result = verify.check(comms, run, case, seed, corrupt, &ops);
        self.issue.free_ops(&self.comms, case, &ops);
        result
    }

    fn outputs(&mut self, case: &CaseSpec, seed: u64) -> Result<Vec<Vec<u8>>, BackendError> {
        debug("outputs");
        self.comms.ensure_usable()?;
        let ops = self.prepare(case, case.size_bytes())?;
        let (comms, _, verify, run) = self.parts();
        let result = verify.outputs(comms, run, case, seed, &ops);
        self.issue.free_ops(&self.comms, case, &ops);
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
