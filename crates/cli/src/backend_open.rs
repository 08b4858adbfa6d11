//! Opening a backend for `run` and `check`: the MPI session (under
//! `--backend mpi`), world discovery, the control plane, then the backend
//! the flags name with its NCCL tuning. One way in, so every command that
//! measures starts the same job the same way.

use crate::args::{BackendArgs, BackendName, Mode};
use crate::exit::{Failure, Outcome};
use crate::launch_args::LaunchArgs;
use collbench_launch::{Control, LaunchOptions, World};
use collbench_nccl::NcclOptions;
use collbench_runner::cpu::CpuBackend;
use collbench_runner::{Backend, Watchdog};
use std::sync::Arc;

/// A backend ready to measure, with what it runs on. Fields drop in
/// order: the backend before the control plane, MPI last (dropping the
/// session finalises MPI).
pub struct Opened {
    pub backend: Box<dyn Backend>,
    pub control: Arc<Control>,
    _mpi: MpiSession,
}

/// Starts MPI when asked, discovers the world, connects the control plane
/// (its heartbeats paced for the stuck-collective `watchdog`, if any) and
/// opens the backend (NCCL with `nccl`, the options
/// [`BackendArgs::nccl_options`] makes and the command adds to; a backend
/// without NCCL says which of its NCCL-only flags it ignores).
pub fn open(
    b: &BackendArgs,
    launch: &LaunchArgs,
    nccl: &NcclOptions,
    mode: Mode,
    watchdog: &Watchdog,
) -> Result<Opened, Failure> {
    let (mpi, mut launch) = launch_args(b, launch)?;
    launch.watchdog_s = watchdog.deadline.map(|d| d.as_secs().max(1));
    refuse_lone_rank_variable(&launch)?;
    // Refused at once, before rank 0 listens or a rank waits for it.
    if uses_cpu(b) {
        if let Some(world) = world_before_rendezvous(&launch) {
            refuse_cpu_across_processes(&world)?;
        }
    }
    let world = World::discover(&launch)?;
    say_unstarted_slurm_tasks(&world);
    let control = Arc::new(Control::connect(&world, &launch)?);
    // A peer stopped or gone while the backend sets up (NCCL's
    // communicators) is named within the watchdog's deadline, not at
    // --timeout-s, and a setup held by it cannot hang the process.
    let guard = collbench_runner::setup_guard::SetupGuard::start(control.clone(), watchdog);
    let backend = open_backend(b, nccl, mode, &world, &control);
    drop(guard);
    let backend = backend.map_err(|f| peer_failure_first(f, control.as_ref()))?;
    Ok(Opened {
        backend,
        control,
        _mpi: mpi,
    })
}

/// A setup that failed because the job had (a peer stopped, died or
/// aborted): the job's failure and its code (3), not the backend's
/// consequence of it (4).
fn peer_failure_first(backend_failure: Failure, control: &Control) -> Failure {
    if backend_failure.outcome != Outcome::Backend {
        return backend_failure;
    }
    match collbench_core::Bootstrap::failure(control) {
        Some(f) => {
            let outcome = match f.kind {
                collbench_core::FailureKind::Stuck => Outcome::Timeout,
                collbench_core::FailureKind::Peer => Outcome::Launch,
            };
            Failure::new(outcome, f.message)
        }
        None => backend_failure,
    }
}

/// Whether the flags pick the CPU backend (`auto` on a host without GPUs).
fn uses_cpu(b: &BackendArgs) -> bool {
    match b.name {
        BackendName::Cpu => true,
        BackendName::Auto => !matches!(collbench_nccl::gpu_count(), Ok(n) if n > 0),
        BackendName::Nccl | BackendName::Mpi => false,
    }
}

/// The world a launcher's variables describe, read before rank 0
/// listens: a stand-in rendezvous tells the rank and world size without
/// rank 0's address, which a rank > 0 lacks here. `None` where they do
/// not make a world (discovery proper then says why).
fn world_before_rendezvous(launch: &LaunchOptions) -> Option<World> {
    let env = |k: &str| match k {
        "COLLBENCH_RENDEZVOUS" => Some("127.0.0.1".to_string()),
        _ => std::env::var(k).ok(),
    };
    World::discover_from(launch, &env, "").ok()
}

/// A batch script's `collbench` in a Slurm job of N > 1 tasks runs alone
/// (no `srun`, no step id): one line says so, as the user meant N ranks.
fn say_unstarted_slurm_tasks(world: &World) {
    let env = |k: &str| std::env::var(k).ok();
    if world.world_size > 1 {
        return;
    }
    if let Some(tasks) = collbench_launch::env::slurm_tasks_without_step(&env) {
        crate::stdout::say(format!(
            "collbench: this Slurm job has {tasks} tasks (SLURM_NTASKS) but srun did not start this process (no SLURM_STEP_ID), so it runs alone as 1 process: start it with `srun collbench ...` to run {tasks} ranks"
        ));
    }
}

/// The CPU backend runs every rank as a thread of one process, so a
/// launcher's second process (mpirun, srun, COLLBENCH_RANK...) is refused,
/// in one line with what to run instead.
fn refuse_cpu_across_processes(world: &World) -> Result<(), Failure> {
    if world.world_size <= 1 || cpu_per_process_for_tests() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "this is rank {} of {} processes, but the CPU backend runs ranks as threads of one process: \
         start one process with --ranks {} instead, or use --backend nccl (GPUs) or --backend mpi (a build with `cargo build --release --features collbench-cli/mpi`)",
        world.rank, world.world_size, world.world_size
    )))
}

/// What a backend without NCCL does with the NCCL-only flags given, said
/// once: a line on stderr per flag in `ignored` (the backend's `IGNORES`),
/// or the usage error of one it cannot run without (`-D` > 0).
fn say_ignored(
    nccl: &NcclOptions,
    ignored: &[collbench_core::NcclOnly],
    backend: &str,
) -> Result<(), Failure> {
    for line in nccl
        .nccl_only
        .ignored(ignored, backend)
        .map_err(Failure::usage)?
    {
        crate::stdout::say(line);
    }
    Ok(())
}

/// Test hook (`COLLBENCH_TEST_CPU_PER_PROCESS=1`): every process of a
/// multi-process job runs rank threads of its own, so that CI without GPUs
/// can test what spans processes (the control plane, the watchdog, a
/// killed rank). Each process's collectives stay inside it: the figures
/// mean nothing.
fn cpu_per_process_for_tests() -> bool {
    std::env::var("COLLBENCH_TEST_CPU_PER_PROCESS").as_deref() == Ok("1")
}

/// `RANK` without `WORLD_SIZE` (torchrun style, half set) would silently
/// run as rank 0 of 1.
fn refuse_lone_rank_variable(launch: &LaunchOptions) -> Result<(), Failure> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("RANK"), var("WORLD_SIZE")) {
        (Some(rank), None) if rank != "0" && launch.world_size.is_none() => Err(Failure::usage(format!(
            "RANK={rank} is set but WORLD_SIZE is not: set WORLD_SIZE (and MASTER_ADDR) for a multi-process run, or unset RANK"
        ))),
        _ => Ok(()),
    }
}

fn default_cpu_ranks(a: &BackendArgs, mode: Mode) -> usize {
    if let Some(g) = a.ngpus {
        return g.saturating_mul(a.nthreads.max(1));
    }
    match mode {
        Mode::Alias => a.nthreads.max(1),
        Mode::Native => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(2, 8),
    }
}

/// Opens the NCCL backend over this process's GPUs: `nccl` with this
/// process's place on its host.
fn open_nccl(
    nccl: &NcclOptions,
    world: &World,
    control: &Arc<Control>,
) -> Result<Box<dyn Backend>, Failure> {
    let opts = NcclOptions {
        local_rank: world.local_rank,
        host: world.hostname.clone(),
        ..nccl.clone()
    };
    // A flag this NCCL cannot honour is a usage error (exit 2), as
    // in nccl-tests; other failures are the backend's.
    collbench_nccl::NcclBackend::new(&opts, control.as_ref())
        .map(|b| Box::new(b) as Box<dyn Backend>)
        .map_err(|e| match e {
            collbench_runner::BackendError::Unsupported(m) => Failure::usage(m),
            e => Failure::new(Outcome::Backend, e.to_string()),
        })
}

/// Chooses and opens the backend.
fn open_backend(
    a: &BackendArgs,
    nccl: &NcclOptions,
    mode: Mode,
    world: &World,
    control: &Arc<Control>,
) -> Result<Box<dyn Backend>, Failure> {
    if a.ranks == Some(0) {
        return Err(Failure::usage("--ranks must be at least 1"));
    }
    if a.ngpus == Some(0) {
        return Err(Failure::usage("-g/--ngpus must be at least 1"));
    }
    let cpu = |note: Option<String>| -> Result<Box<dyn Backend>, Failure> {
        refuse_cpu_across_processes(world)?;
        say_ignored(nccl, CpuBackend::IGNORES, "cpu")?;
        let ranks = a.ranks.unwrap_or_else(|| default_cpu_ranks(a, mode));
        collbench_runner::cpu::ranks::check_ranks(ranks).map_err(Failure::usage)?;
        if let Some(n) = note {
            let threads = if ranks == 1 { "thread" } else { "threads" };
            crate::stdout::say(format!(
                "collbench: {n}: using the built-in CPU backend with {ranks} rank {threads}"
            ));
        }
        // The test hook's processes meet after every operation.
        let across = (world.world_size > 1).then(|| {
            let control = control.clone();
            Arc::new(move || {
                control
                    .all_gather(Vec::new())
                    .map(drop)
                    .map_err(|e| e.to_string())
            }) as collbench_runner::cpu::ProcessBarrier
        });
        Ok(Box::new(
            CpuBackend::new(ranks, &world.hostname)
                .with_slow_rank(a.test_slow_rank)
                .with_late_entry(a.test_late_entry)
                .with_process_barrier(across),
        ))
    };
    let nccl_backend = || open_nccl(nccl, world, control);
    match a.name {
        BackendName::Cpu => cpu(None),
        BackendName::Nccl => nccl_backend(),
        BackendName::Auto => match collbench_nccl::gpu_count() {
            Ok(n) if n > 0 => nccl_backend(),
            Ok(_) => cpu(Some("no GPU found".into())),
            Err(why) => cpu(Some(format!("no GPU found ({why})"))),
        },
        #[cfg(feature = "mpi")]
        BackendName::Mpi => {
            say_ignored(nccl, collbench_mpi::MpiBackend::IGNORES, "mpi")?;
            collbench_mpi::MpiBackend::new(control.as_ref(), &world.hostname)
                .map(|b| Box::new(b.with_late_entry(a.test_late_entry)) as Box<dyn Backend>)
                .map_err(|e| Failure::new(Outcome::Backend, e.to_string()))
        }
        #[cfg(not(feature = "mpi"))]
        BackendName::Mpi => Err(no_mpi()),
    }
}

/// `--backend mpi` in a build without the `mpi` feature.
#[cfg(not(feature = "mpi"))]
fn no_mpi() -> Failure {
    Failure::new(
        Outcome::Backend,
        "this collbench was built without MPI support: rebuild with `cargo build --release --features collbench-cli/mpi` (needs an MPI library such as OpenMPI), or use --backend nccl/cpu",
    )
}

/// MPI, while running (finalised on drop); nothing without the feature.
#[cfg(feature = "mpi")]
type MpiSession = Option<collbench_mpi::Session>;
/// MPI, while running (finalised on drop); nothing without the feature.
#[cfg(not(feature = "mpi"))]
type MpiSession = ();

/// The launch flags to discover the world with. Under `--backend mpi`, MPI
/// starts first and supplies rank, size and rank 0's address, which plain
/// `mpirun` does not publish; keep the session until the run ends.
fn launch_args(
    b: &BackendArgs,
    launch: &LaunchArgs,
) -> Result<(MpiSession, LaunchOptions), Failure> {
    let launch = launch.options();
    #[cfg(feature = "mpi")]
    if b.name == BackendName::Mpi {
        let (session, launch) = collbench_mpi::bootstrap(&launch)?;
        return Ok((Some(session), launch));
    }
    // Say so before world discovery, which would fail first under mpirun.
    #[cfg(not(feature = "mpi"))]
    if b.name == BackendName::Mpi {
        return Err(no_mpi());
    }
    Ok((Default::default(), launch))
}
