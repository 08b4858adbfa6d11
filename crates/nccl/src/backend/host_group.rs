//! A backend over a group of the job's processes: the communicators of
//! `check`'s host tests, where each host pair of a round gets its own
//! NCCL communicator and all pairs run at the same time.
//!
//! Made like the NCCL_TESTS_SPLIT groups of setup (every process's group
//! over the control plane, one NCCL id per group from its first process),
//! but on demand, on the GPUs and streams' devices this backend already
//! drives, and with NCCL's default configuration: a pair test measures the
//! hosts and the link between them, not the flags of the run.

use super::comms::{Comms, Gpu};
use super::memory::MemoryWatch;
use super::NcclBackend;
use crate::cuda::{Device, Stream};
use crate::ffi::{Nccl, UniqueId};
use crate::kernels::Kernels;
use crate::loader;
use collbench_core::Bootstrap;
use collbench_runner::BackendError;

/// The colour of a process that sits the round out: it takes part in the
/// exchange of colours and ids, but creates no communicator.
const IDLE: u64 = u64::MAX;

/// See [`collbench_runner::Backend::group`]: the backend of this
/// process's group over `own`'s GPUs (buffers placed as `own`'s, rotating
/// when `rotate`). Every process calls this at the same step; the
/// exchange goes through `control`, and the communicators of one group
/// are created together by its processes.
pub(super) fn for_group(
    own: &Comms,
    rotate: bool,
    control: &dyn Bootstrap,
    group: Option<u32>,
) -> Result<Option<NcclBackend>, BackendError> {
    own.ensure_usable()?;
    let color = group.map_or(IDLE, u64::from);
    let colors = super::exchange::colors(control, color)?;
    let members: Vec<usize> = (0..colors.len()).filter(|&p| colors[p] == color).collect();
    let index = members
        .iter()
        .position(|&p| p == control.rank())
        .unwrap_or(0);
    let first_in_group = group.is_some() && index == 0;
    // Every process takes part in the exchange of ids, idle ones with
    // nothing to give, so that the control plane's steps stay matched.
    let make = || Ok(own.nccl.get_unique_id()?.to_bytes());
    let id = super::exchange::group_id(control, false, first_in_group, members[0], make)?;
    if group.is_none() {
        return Ok(None);
    }
    let id = UniqueId::from_bytes(&id).ok_or_else(|| {
        BackendError::Library("malformed NCCL id from the group's first process".into())
    })?;
    let g = own.gpus.len();
    let (lib, found) = loader::open(own.opts.lib_path.as_deref())
        .map_err(|e| BackendError::Library(e.to_string()))?;
    let nccl = Nccl::from_library(lib, found.version_code)?;
    let mut gpus = Vec::with_capacity(g);
    for (i, mine) in own.gpus.iter().enumerate() {
        let dev = Device::open(mine.dev.ordinal)?;
        let stream = Stream::new(own.opts.stream_null)?;
        gpus.push(Gpu::new(
            dev,
            stream,
            index * g + i,
            mine.global_rank,
            color,
        ));
    }
    let ranks: Vec<usize> = gpus.iter().map(|x| x.rank).collect();
    let bind = |i: usize| -> Result<(), BackendError> { Ok(gpus[i].dev.bind()?) };
    let handles = crate::affinity::unpinned(|| {
        nccl.comm_init_ranks(members.len() * g, id, &ranks, None, bind)
    })?;
    let mut kernels = Vec::with_capacity(g);
    for (gpu, c) in gpus.iter_mut().zip(handles) {
        gpu.comm = c;
        gpu.dev.bind()?;
        // Without the kernels the check runs on the host: slower, as
        // correct.
        kernels.push(Kernels::load().ok());
    }
    let mut opts = own.opts.clone();
    opts.explain = false;
    opts.nccl_only.device_implementation = None;
    let comms = Comms {
        nccl,
        found,
        gpus,
        world_size: members.len() * g,
        host: own.host.clone(),
        opts,
        settings: Default::default(),
        aborted: false,
    };
    let memory = MemoryWatch::after_init(&[], &[]);
    Ok(Some(NcclBackend::assemble(
        comms, kernels, rotate, memory, None,
    )))
}
