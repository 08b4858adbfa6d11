//! The communicators and the library they came from: each local GPU's
//! device, stream and communicator ([`Gpu`]), and [`Comms`], which owns
//! them with what the run set for NCCL (`-u`, the traffic, the watch) and
//! whether they were aborted. Its methods keep them alive or end them:
//! waiting for the streams while watching NCCL's async errors, the job's
//! stop (the watchdog's, see `collbench_runner::watch`) and the `-T`
//! timeout, publishing progress, aborting. Built in `setup` (and
//! `host_group`); the other parts (buffers, device API, issue, timing,
//! verification) own their state and borrow these.

use crate::api::Communicator;
use crate::cuda::{Device, Stream};
use crate::ffi::Nccl;
use crate::loader::FoundNccl;
use crate::NcclOptions;
use collbench_runner::{BackendError, BackendSettings};
use std::time::{Duration, Instant};

/// One local GPU: its context, stream and communicator.
///
/// Fields drop in declaration order: everything that lives in the device's
/// context goes before `dev`, which releases the context. (The buffers,
/// kernels and stamps that also live there belong to the backend's other
/// parts, which it declares, and so drops, before its [`Comms`].)
pub(crate) struct Gpu {
    pub(crate) stream: Stream,
    pub(crate) comm: Communicator,
    /// Rank in this GPU's communicator.
    pub(crate) rank: usize,
    /// Rank among all GPUs of the job (differs from `rank` with
    /// NCCL_TESTS_SPLIT groups).
    pub(crate) global_rank: usize,
    /// NCCL_TESTS_SPLIT colour of this process.
    pub(crate) group: u64,
    pub(crate) dev: Device,
}

impl Gpu {
    /// A GPU with its stream, before its communicator (null until NCCL
    /// makes it).
    pub(crate) fn new(
        dev: Device,
        stream: Stream,
        rank: usize,
        global_rank: usize,
        group: u64,
    ) -> Gpu {
        Gpu {
            stream,
            comm: Communicator::null(),
            rank,
            global_rank,
            group,
            dev,
        }
    }
}

/// With a watchdog, `-T` here is only the fallback for a watchdog that
/// cannot decide (its own deadline is `-T` too, counted from the last
/// rank's last move, so it names the ranks behind first).
const WATCHED_FALLBACK: Duration = Duration::from_secs(15);

/// NCCL as loaded and this process's communicators, one per local GPU.
pub(crate) struct Comms {
    pub(crate) nccl: Nccl,
    pub(crate) found: FoundNccl,
    pub(crate) gpus: Vec<Gpu>,
    pub(crate) world_size: usize,
    pub(crate) host: String,
    pub(crate) opts: NcclOptions,
    /// `-u`, who sends how much to whom in alltoallv, and the watch where
    /// the timed loop publishes progress and learns of a stop, as the
    /// runner set them. New communicators (host groups) start from the
    /// defaults.
    pub(crate) settings: BackendSettings,
    /// Set after a timeout or async error: communicators were aborted.
    pub(crate) aborted: bool,
}

impl Comms {
    /// Fails once the communicators were aborted: nothing more runs on
    /// them.
    pub(crate) fn ensure_usable(&self) -> Result<(), BackendError> {
        if self.aborted {
            return Err(BackendError::Library(
                "the NCCL communicators were aborted after an earlier error".into(),
            ));
        }
        Ok(())
    }

    /// Free bytes on each local GPU.
    pub(crate) fn free_memory(&self) -> Vec<i64> {
        self.gpus
            .iter()
            .map(|g| g.dev.mem_info().0 as i64)
            .collect()
    }

    /// Waits for every stream, polling NCCL's async errors and the `-T`
    /// timeout so a broken peer aborts the communicators instead of hanging.
    pub(crate) fn wait_all(&mut self) -> Result<(), BackendError> {
        let start = Instant::now();
        let fallback = if self.settings.watch.is_some() {
            WATCHED_FALLBACK
        } else {
            Duration::ZERO
        };
        let timeout =
            (self.opts.timeout_s > 0).then(|| Duration::from_secs(self.opts.timeout_s) + fallback);
        if let Some(w) = &self.settings.watch {
            w.completing_all();
        }
        let mut polls = 0u64;
        for i in 0..self.gpus.len() {
            if self.gpus.len() > 1 {
                self.gpus[i].dev.bind()?;
            }
            loop {
                if self.gpus[i].stream.query()? {
                    break;
                }
                polls += 1;
                if polls.is_multiple_of(1024) {
                    self.check_async()?;
                    if self.settings.watch.as_ref().is_some_and(|w| w.is_stopped()) {
                        self.abort();
                        return Err(self.stopped());
                    }
                    if let Some(t) = timeout {
                        if start.elapsed() > t {
                            self.abort();
                            return Err(BackendError::Timeout(format!(
                                "a collective did not finish within -T {} s: communicators aborted (a peer may be stuck or dead)",
                                (t - fallback).as_secs()
                            )));
                        }
                    }
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Publishes that every GPU has returned from the calls before
    /// `iteration` (and lets a fault hook act); once the job stops there,
    /// aborts the communicators (their streams hold calls that will never
    /// complete) and fails.
    pub(crate) fn at(&mut self, iteration: u64) -> Result<(), BackendError> {
        let stopped = match &self.settings.watch {
            Some(w) => w.at_all(iteration as u32).is_err(),
            None => false,
        };
        self.abort_if(stopped)
    }

    /// Publishes that every GPU enters the call of `iteration` (a stall
    /// hook acts here); as [`Comms::at`] once the job stops.
    pub(crate) fn calling(&mut self, iteration: u64) -> Result<(), BackendError> {
        let stopped = match &self.settings.watch {
            Some(w) => w.calling_all(iteration as u32).is_err(),
            None => false,
        };
        self.abort_if(stopped)
    }

    fn abort_if(&mut self, stopped: bool) -> Result<(), BackendError> {
        if stopped {
            self.abort();
            return Err(self.stopped());
        }
        Ok(())
    }

    /// The error for a wait the job's stop ended (the runner reports the
    /// stop's reason).
    fn stopped(&self) -> BackendError {
        let why = self.settings.watch.as_ref().and_then(|w| w.reason());
        let why = why.map_or("the job stopped", |s| s.message());
        BackendError::Timeout(format!("{why}: communicators aborted"))
    }

    /// NCCL's asynchronous errors (a failed peer or network): abort the
    /// communicators and say so.
    fn check_async(&mut self) -> Result<(), BackendError> {
        let failed = self
            .gpus
            .iter()
            .find_map(|gpu| self.nccl.async_error(&gpu.comm).err());
        if let Some(e) = failed {
            self.abort();
            return Err(BackendError::Library(format!("{e}: communicators aborted")));
        }
        Ok(())
    }

    /// ncclCommAbort on every communicator, once.
    fn abort(&mut self) {
        if self.aborted {
            return;
        }
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            let _ = self.nccl.comm_abort(&mut gpu.comm);
        }
        self.aborted = true;
    }

    /// Binds each GPU and synchronises its stream (the backend's drop,
    /// before it releases the other parts).
    pub(crate) fn synchronize_all(&self) {
        for gpu in &self.gpus {
            let _ = gpu.dev.bind();
            let _ = gpu.stream.synchronize();
        }
    }

    /// ncclCommDestroy on every communicator (after every part that used
    /// them was released).
    pub(crate) fn destroy(&mut self) {
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            let _ = self.nccl.comm_destroy(&mut gpu.comm);
        }
    }
}
