//! Setting up: loading NCCL, picking this process's GPUs, splitting the
//! processes into NCCL_TESTS_SPLIT groups and creating the communicators.

use super::buffers::Buffers;
use super::comms::{Comms, Gpu};
use super::device::DeviceApi;
use super::issue::Issue;
use super::memory::MemoryWatch;
use super::timing::Timer;
use super::verify::Verifier;
use super::{debug, NcclBackend};
use crate::affinity;
use crate::api::Communicator;
use crate::cuda::{self, Device, Stream};
use crate::explain::Explainer;
use crate::ffi::{Config as ConfigT, Nccl, UniqueId};
use crate::kernels::Kernels;
use crate::loader::{self, FoundNccl};
use crate::tune::config::CommConfig;
use crate::NcclOptions;
use collbench_core::Bootstrap;
use collbench_runner::BackendError;

/// Which of the visible GPUs this process drives: `g` of them, GPUs
/// 0..g alone, or under a launcher this local rank's share.
fn pick_devices(procs: usize, g: usize, local_rank: usize) -> Vec<usize> {
    if procs == 1 {
        (0..g).collect()
    } else {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        crate::gpu_choice::gpu_for_local_rank(local_rank, g, visible.as_deref())
    }
}

/// `-g` too large for the GPUs there are: one line with the fix.
fn check_devices(
    devices: &[usize],
    g: usize,
    count: usize,
    procs: usize,
    local_rank: usize,
) -> Result<(), BackendError> {
    if devices.len() != g || devices.iter().any(|&d| d >= count) {
        return Err(BackendError::Library(format!(
            "asked for {g} GPU(s) per process{} but only {count} are visible: lower -g or check CUDA_VISIBLE_DEVICES",
            if procs > 1 { format!(" at local rank {local_rank}") } else { String::new() }
        )));
    }
    Ok(())
}

/// The processes of `rank`'s NCCL_TESTS_SPLIT group (same colour), and
/// `rank`'s index among them.
fn split_group(colors: &[u64], color: u64, rank: usize) -> (Vec<usize>, usize) {
    let group: Vec<usize> = (0..colors.len()).filter(|&p| colors[p] == color).collect();
    let index = group.iter().position(|&p| p == rank).unwrap_or(0);
    (group, index)
}

/// Pins the thread that launches collectives to one CPU, as mpirun binds
/// each rank by default: NCCL's host-side launch path is a few
/// microseconds, and migrations between cores show up at small sizes.
/// Done after communicator creation so NCCL's own threads keep the whole
/// mask. `slot` is this process's index among the job's processes on its
/// machine ([`super::cpu_slot`]); `None` leaves the thread alone, as does
/// COLLBENCH_PIN=0.
fn pin_driving_thread(slot: Option<usize>) {
    if std::env::var("COLLBENCH_PIN").as_deref() == Ok("0") {
        return;
    }
    let Some(slot) = slot else {
        debug("launching thread not pinned: this machine's other processes are unknown");
        return;
    };
    if let Some(cpu) = affinity::pin_current_thread(slot) {
        debug(&format!(
            "pinned the launching thread to CPU {cpu} (slot {slot})"
        ));
    }
}

impl NcclBackend {
    /// Loads NCCL, picks this process's GPUs and creates the communicators
    /// (exchanging the NCCL id over `control` when there are several
    /// processes).
    pub fn new(opts: &NcclOptions, control: &dyn Bootstrap) -> Result<NcclBackend, BackendError> {
        NcclBackend::with_config(opts, control, &CommConfig::default())
    }

    /// [`NcclBackend::new`] with `tune` on top of the flags'
    /// configuration: communicators built with `tune`'s channel count and
    /// CTA policy (`collbench tune`'s candidates). A default `tune` builds
    /// them exactly as `new` does.
    pub fn with_config(
        opts: &NcclOptions,
        control: &dyn Bootstrap,
        tune: &CommConfig,
    ) -> Result<NcclBackend, BackendError> {
        let count = cuda::device_count()?;
        if count == 0 {
            return Err(BackendError::Library(
                "no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi); use --backend cpu".into(),
            ));
        }
        // Before NCCL's first call: where its INFO lines go.
        crate::path_capture::install();
        let library = Library::open(opts, control, tune)?;
        let layout = Layout::of(opts, control, count)?;
        let mut gpus = open_gpus(opts, control, &layout)?;
        // NCCL opens its profiler plugin when the first communicator is
        // created, so the plugin goes in now; the first process speaks for
        // all when it cannot be used.
        let explainer = opts.explain.then(|| {
            if control.rank() == 0 {
                Explainer::install()
            } else {
                Explainer::install_quiet()
            }
        });
        let free =
            |gpus: &[Gpu]| -> Vec<i64> { gpus.iter().map(|g| g.dev.mem_info().0 as i64).collect() };
        let free_before_init = free(&gpus);
        let handles = create_comms(&library, control, &layout, &gpus)?;
        let memory = MemoryWatch::after_init(&free_before_init, &free(&gpus));
        for (gpu, c) in gpus.iter_mut().zip(handles) {
            gpu.comm = c;
        }
        let kernels = load_kernels(&gpus)?;
        // Every process takes part, whatever its COLLBENCH_PIN says.
        let slot = if layout.procs > 1 {
            super::cpu_slot::agree(control, super::cpu_slot::machine_id(), opts.local_rank)?
        } else {
            Some(opts.local_rank)
        };
        pin_driving_thread(slot);
        let Library { nccl, found, .. } = library;
        let comms = Comms {
            nccl,
            found,
            gpus,
            world_size: layout.world_size,
            host: opts.host.clone(),
            opts: opts.clone(),
            settings: Default::default(),
            aborted: false,
        };
        let rotate = std::env::var_os("COLLBENCH_NO_ROTATE").is_none();
        let mut backend = NcclBackend::assemble(comms, kernels, rotate, memory, explainer);
        // On failure the backend drops, which destroys the communicators.
        backend.device.setup(&backend.comms)?;
        Ok(backend)
    }

    /// The backend over `comms`, each part with nothing in it yet but the
    /// verification `kernels` (one per GPU), the rotation and the memory
    /// `comms`' creation took.
    pub(super) fn assemble(
        comms: Comms,
        kernels: Vec<Option<Kernels>>,
        rotate: bool,
        memory: MemoryWatch,
        explainer: Option<Explainer>,
    ) -> NcclBackend {
        let n = comms.gpus.len();
        NcclBackend {
            verify: Verifier { kernels },
            timer: Timer::new(n),
            device: DeviceApi::new(&comms.opts, n),
            buffers: Buffers::new(n, rotate, memory),
            issue: Issue::default(),
            comms,
            explainer,
        }
    }
}

/// NCCL as loaded, and the configuration its communicators are built with.
struct Library {
    nccl: Nccl,
    found: FoundNccl,
    /// `None`: NCCL's defaults (and ncclCommInitAll in one process).
    config: Option<ConfigT>,
}

impl Library {
    /// Loads NCCL and settles the communicators' configuration: the flags'
    /// CTA policy, then `tune` on top. Says (the first process for all)
    /// which of nccl-tests' flags hang on the NCCL found (-x, -D, -V).
    fn open(
        opts: &NcclOptions,
        control: &dyn Bootstrap,
        tune: &CommConfig,
    ) -> Result<Library, BackendError> {
        let (lib, found) = loader::open(opts.lib_path.as_deref())
            .map_err(|e| BackendError::Library(e.to_string()))?;
        let nccl = Nccl::from_library(lib, found.version_code)?;
        let say = |line: &str| {
            if control.rank() == 0 {
                collbench_core::diag::line(line);
            }
        };
        let (cta_policy, note) =
            super::flags::cta_policy(found.version_code, opts.nccl_only.cta_policy);
        note.iter().for_each(|l| say(l));
        super::flags::device_api(found.version_code, opts)
            .map_err(BackendError::Unsupported)?
            .iter()
            .for_each(|l| say(l));
        let mut config = cta_policy.map(|p| {
            let mut c = ConfigT::new(found.version_code);
            c.cta_policy = p;
            c
        });
        if !tune.is_default() {
            tune.apply(config.get_or_insert_with(|| ConfigT::new(found.version_code)));
        }
        Ok(Library {
            nccl,
            found,
            config,
        })
    }
}

/// Where this process's GPUs sit: which devices, and its place among the
/// ranks of its communicator's group (NCCL_TESTS_SPLIT).
struct Layout {
    /// Processes in the job.
    procs: usize,
    /// GPUs per process.
    g: usize,
    /// The device ordinals this process drives.
    devices: Vec<usize>,
    /// This process's split color (0 without a split).
    color: u64,
    /// The processes of this process's group, by rank.
    group: Vec<usize>,
    /// This process's index in `group`.
    index_in_group: usize,
    /// Ranks in this process's communicator.
    world_size: usize,
}

impl Layout {
    /// Picks the devices (`count` visible) and agrees on the groups with
    /// the other processes.
    fn of(
        opts: &NcclOptions,
        control: &dyn Bootstrap,
        count: usize,
    ) -> Result<Layout, BackendError> {
        let procs = control.world_size();
        let g = opts
            .gpus_per_process
            .unwrap_or(if procs == 1 { count } else { 1 });
        let devices = pick_devices(procs, g, opts.local_rank);
        check_devices(&devices, g, count, procs, opts.local_rank)?;
        // NCCL_TESTS_SPLIT(_MASK) splits the processes into groups that run
        // side by side, each with its own communicator (as nccl-tests does).
        let color = if procs > 1 {
            crate::split::split_color(control.rank(), |k| std::env::var(k).ok())
        } else {
            0
        };
        let colors: Vec<u64> = if procs > 1 {
            super::exchange::colors(control, color)?
        } else {
            vec![0]
        };
        let (group, index_in_group) = split_group(&colors, color, control.rank());
        Ok(Layout {
            procs,
            g,
            devices,
            color,
            world_size: group.len() * g,
            group,
            index_in_group,
        })
    }
}

/// Opens this process's devices, a stream on each.
fn open_gpus(
    opts: &NcclOptions,
    control: &dyn Bootstrap,
    layout: &Layout,
) -> Result<Vec<Gpu>, BackendError> {
    let g = layout.g;
    let first_rank = layout.index_in_group * g;
    let mut gpus = Vec::with_capacity(g);
    for (i, &ordinal) in layout.devices.iter().enumerate() {
        let dev = Device::open(ordinal)?;
        let stream = Stream::new(opts.stream_null)?;
        gpus.push(Gpu::new(
            dev,
            stream,
            first_rank + i,
            control.rank() * g + i,
            layout.color,
        ));
    }
    Ok(gpus)
}

/// Creates one communicator per GPU, in GPU order.
fn create_comms(
    library: &Library,
    control: &dyn Bootstrap,
    layout: &Layout,
    gpus: &[Gpu],
) -> Result<Vec<Communicator>, BackendError> {
    let (nccl, config) = (&library.nccl, library.config);
    let bind = |i: usize| -> Result<(), BackendError> { Ok(gpus[i].dev.bind()?) };
    let ranks: Vec<usize> = gpus.iter().map(|x| x.rank).collect();
    let world_size = layout.world_size;
    // NCCL's proxy and network threads take the mask of the thread
    // that creates the communicator: a second backend of this process
    // (tune's candidates) is created from the launching thread, pinned
    // by the first to one CPU. On two emulated hosts its socket threads
    // then shared that CPU, and tune measured channels=8 at 2.9-3.0x
    // the default's time and -R 1 at 5.4-7.0x, where the same settings
    // set for a whole process took 1.2-1.3x and 1.0x in collbench run
    // and nccl-tests alike (bench/results/tune.md, commprobe).
    crate::affinity::unpinned(|| -> Result<_, BackendError> {
        Ok(if layout.procs == 1 && config.is_none() {
            let devs: Vec<i32> = gpus.iter().map(|x| x.dev.ordinal as i32).collect();
            nccl.comm_init_all(&devs)?
        } else if layout.procs == 1 {
            // ncclCommInitAll takes no config: one id and
            // ncclCommInitRankConfig per GPU in a group, as nccl-tests does.
            let id = nccl.get_unique_id()?;
            nccl.comm_init_ranks(world_size, id, &ranks, config, bind)?
        } else {
            // The first process of each group makes its group's NCCL id.
            let make = || Ok(nccl.get_unique_id()?.to_bytes());
            let id = super::exchange::group_id(
                control,
                layout.group.len() == layout.procs,
                layout.index_in_group == 0,
                layout.group[0],
                make,
            )?;
            let id = UniqueId::from_bytes(&id).ok_or_else(|| {
                BackendError::Library("malformed NCCL id from the group's first rank".into())
            })?;
            nccl.comm_init_ranks(world_size, id, &ranks, config, bind)?
        })
    })
}

/// Loads the verification kernels on each GPU; without them the check
/// runs on the host (said once).
fn load_kernels(gpus: &[Gpu]) -> Result<Vec<Option<Kernels>>, BackendError> {
    let mut warned = false;
    let mut kernels = Vec::with_capacity(gpus.len());
    for gpu in gpus {
        gpu.dev.bind()?;
        match Kernels::load() {
            Ok(k) => kernels.push(Some(k)),
            Err(e) => {
                if !warned {
                    collbench_core::diag::line(&format!("collbench: warning: GPU verification kernels unavailable ({e}); checking on the host instead, which is slower"));
                    warned = true;
                }
                kernels.push(None);
            }
        }
    }
    Ok(kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_takes_the_first_g_gpus() {
        assert_eq!(pick_devices(1, 3, 0), [0, 1, 2]);
    }

    #[test]
    fn too_many_gpus_is_one_line_with_the_fix() {
        assert!(check_devices(&[0, 1], 2, 2, 1, 0).is_ok());
        let e = check_devices(&[0, 1, 2], 3, 2, 1, 0)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "asked for 3 GPU(s) per process but only 2 are visible: lower -g or check CUDA_VISIBLE_DEVICES"
        );
        let e = check_devices(&[4], 1, 2, 4, 3).unwrap_err().to_string();
        assert!(e.contains("at local rank 3"), "{e}");
    }

    #[test]
    fn split_groups_by_colour() {
        // Ranks 0 and 2 share colour 0; 1 and 3 colour 1.
        let colors = [0, 1, 0, 1];
        assert_eq!(split_group(&colors, 0, 0), (vec![0, 2], 0));
        assert_eq!(split_group(&colors, 1, 3), (vec![1, 3], 1));
        assert_eq!(split_group(&[0], 0, 0), (vec![0], 0));
    }
}
