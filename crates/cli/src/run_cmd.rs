//! `collbench run` and the `<op>_perf` aliases: flags -> plan -> backend ->
//! runner -> printers and files.

use crate::args::{BackendArgs, RunArgs};
use crate::exit::{code, Failure};
use crate::observer::TextObserver;
use collbench_core::size::Step;
use collbench_launch::{Control, LaunchArgs, World};
use collbench_output::{text::TextOptions, Format};
use collbench_runner::cpu::CpuBackend;
use collbench_runner::{Average, Backend, Plan, RootSel, Runner};
use std::path::PathBuf;

/// How `run` was invoked: the aliases keep nccl-tests' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Native,
    Alias,
}

/// Builds the plan from the flags; every mistake is a usage failure.
pub fn plan_from_args(a: &RunArgs, mode: Mode) -> Result<Plan, Failure> {
    let u = |m: String| Failure::usage(m);
    let collectives = a.collectives().map_err(u)?;
    let dtypes = a.dtypes().map_err(u)?;
    let redops = a.redops().map_err(u)?;
    let (def_min, def_max, def_factor) = match mode {
        Mode::Alias => (32 << 20, 32 << 20, None),
        Mode::Native => (8, 128 << 20, Some(2)),
    };
    let min_bytes = a.minbytes.unwrap_or(def_min);
    let max_bytes = a
        .maxbytes
        .unwrap_or(if a.minbytes.is_some() && a.maxbytes.is_none() {
            min_bytes.max(def_max)
        } else {
            def_max
        });
    let step = match (a.stepfactor, a.stepbytes) {
        (Some(f), _) if f < 2 => {
            return Err(u(format!(
                "-f/--stepfactor must be 2 or more (got {f}): use -f 2 for doubling sizes, or -i BYTES for a linear sweep"
            )))
        }
        (Some(f), _) => Step::Factor(f),
        (None, Some(0)) => return Err(u("-i/--stepbytes must be at least 1".into())),
        (None, Some(b)) => Step::Bytes(b),
        (None, None) => def_factor.map(Step::Factor).unwrap_or(Step::Bytes(1 << 20)),
    };
    if min_bytes > max_bytes {
        return Err(u(format!(
            "-b/--minbytes ({min_bytes}) is larger than -e/--maxbytes ({max_bytes}): make -b <= -e"
        )));
    }
    let average = Average::from_flag(a.average).ok_or_else(|| {
        u(format!(
            "-a/--average must be 0, 1, 2 or 3 (got {})",
            a.average
        ))
    })?;
    if a.local_register > 2 {
        return Err(u(format!(
            "-R/--local_register must be 0 (off), 1 (ncclCommRegister) or 2 (symmetric windows) (got {})",
            a.local_register
        )));
    }
    if a.iters == 0 {
        return Err(u("-n/--iters must be at least 1".into()));
    }
    if a.agg_iters == 0 {
        return Err(u("-m/--agg_iters must be at least 1".into()));
    }
    if a.blocking > 2 {
        return Err(u(format!(
            "-z/--blocking must be 0, 1 or 2 (got {})",
            a.blocking
        )));
    }
    let roots = match a.root {
        -1 => RootSel::All,
        r if r >= 0 => RootSel::Fixed(r as usize),
        r => {
            return Err(u(format!(
                "-r/--root must be a rank or -1 for every root (got {r})"
            )))
        }
    };
    Ok(Plan {
        collectives,
        dtypes,
        redops,
        roots,
        min_bytes,
        max_bytes,
        step,
        warmup_iters: a.warmup_iters,
        iters: a.iters,
        agg_iters: a.agg_iters,
        cycles: a.run_cycles.max(1),
        check: a.check,
        graph: a.cudagraph,
        blocking: a.blocking,
        average,
        cputime: a.report_cputime > 0,
        timestamps: a.report_timestamps > 0,
        unalign: a.unalign,
        test_corrupt: a.test_corrupt,
    })
}

/// An output file, checked for writability before anything runs so a long
/// run never ends in "cannot write".
struct OutputFile {
    path: PathBuf,
    format: Format,
}

fn output_file(path: &PathBuf, format: Option<Format>) -> Result<OutputFile, Failure> {
    let format = format.or_else(|| Format::from_path(path)).ok_or_else(|| {
        Failure::usage(format!(
            "cannot tell the format of --output {}: use a .txt, .json, .csv or .md file name",
            path.display()
        ))
    })?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            Failure::usage(format!(
                "cannot write output file {}: {e}; choose a writable path",
                path.display()
            ))
        })?;
    Ok(OutputFile {
        path: path.clone(),
        format,
    })
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

/// NCCL tuning flags that live among the run flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tuning {
    pub local_register: u32,
    pub timeout: u64,
    pub stream_null: u32,
}

/// Chooses and opens the backend.
pub fn open_backend(
    a: &BackendArgs,
    tuning: Tuning,
    mode: Mode,
    world: &World,
    control: &Control,
) -> Result<Box<dyn Backend>, Failure> {
    if a.ranks == Some(0) {
        return Err(Failure::usage("--ranks must be at least 1"));
    }
    if a.ngpus == Some(0) {
        return Err(Failure::usage("-g/--ngpus must be at least 1"));
    }
    let cpu = |note: Option<String>| -> Result<Box<dyn Backend>, Failure> {
        if world.world_size > 1 {
            return Err(Failure {
                code: code::USAGE,
                message: format!(
                    "the CPU backend runs all ranks in one process, but this is rank {} of {} processes: use --backend nccl (GPUs) or run one process with --ranks N",
                    world.rank, world.world_size
                ),
            });
        }
        let ranks = a.ranks.unwrap_or_else(|| default_cpu_ranks(a, mode));
        collbench_runner::cpu::ranks::check_ranks(ranks).map_err(Failure::usage)?;
        if let Some(n) = note {
            eprintln!("collbench: {n}: using the built-in CPU backend with {ranks} rank threads");
        }
        Ok(Box::new(
            CpuBackend::new(ranks, &world.hostname).with_slow_rank(a.test_slow_rank),
        ))
    };
    let nccl = || -> Result<Box<dyn Backend>, Failure> {
        let opts = collbench_nccl::NcclOptions {
            lib_path: a.nccl_lib.clone(),
            gpus_per_process: a.ngpus.map(|g| g * a.nthreads.max(1)).or(match mode {
                Mode::Alias => Some(a.nthreads.max(1)),
                Mode::Native => None,
            }),
            local_rank: world.local_rank,
            register: tuning.local_register,
            timeout_s: tuning.timeout,
            stream_null: tuning.stream_null > 0,
        };
        collbench_nccl::NcclBackend::new(&opts, control)
            .map(|b| Box::new(b) as Box<dyn Backend>)
            .map_err(|e| Failure {
                code: code::BACKEND,
                message: e.to_string(),
            })
    };
    match a.name.as_str() {
        "cpu" => cpu(None),
        "nccl" => nccl(),
        "auto" => match collbench_nccl::gpu_count() {
            Ok(n) if n > 0 => nccl(),
            Ok(_) => cpu(Some("no GPU found".into())),
            Err(why) => cpu(Some(format!("no GPU found ({why})"))),
        },
        #[cfg(feature = "mpi")]
        "mpi" => collbench_mpi::MpiBackend::new(world)
            .map(|b| Box::new(b) as Box<dyn Backend>)
            .map_err(|e| Failure {
                code: code::BACKEND,
                message: e.to_string(),
            }),
        #[cfg(not(feature = "mpi"))]
        "mpi" => Err(no_mpi()),
        other => Err(Failure::usage(format!(
            "unknown backend '{other}': use auto, cpu, nccl or mpi"
        ))),
    }
}

/// `--backend mpi` in a build without the `mpi` feature.
#[cfg(not(feature = "mpi"))]
fn no_mpi() -> Failure {
    Failure {
        code: code::BACKEND,
        message: "this collbench was built without MPI support: rebuild with `cargo build --release --features mpi`, or use --backend nccl/cpu".into(),
    }
}

/// MPI, while running (finalised on drop); nothing without the feature.
#[cfg(feature = "mpi")]
pub type MpiSession = Option<collbench_mpi::Session>;
/// MPI, while running (finalised on drop); nothing without the feature.
#[cfg(not(feature = "mpi"))]
pub type MpiSession = ();

/// The launch flags to discover the world with. Under `--backend mpi`, MPI
/// starts first and supplies rank, size and rank 0's address, which plain
/// `mpirun` does not publish; keep the session until the run ends.
pub fn launch_args(
    b: &BackendArgs,
    launch: &LaunchArgs,
) -> Result<(MpiSession, LaunchArgs), Failure> {
    #[cfg(feature = "mpi")]
    if b.name == "mpi" {
        let (session, launch) = collbench_mpi::bootstrap(launch)?;
        return Ok((Some(session), launch));
    }
    // Say so before world discovery, which would fail first under mpirun.
    #[cfg(not(feature = "mpi"))]
    if b.name == "mpi" {
        return Err(no_mpi());
    }
    Ok((Default::default(), launch.clone()))
}

/// Runs the benchmark; returns the exit code.
pub fn run(a: &RunArgs, argv: &[String], mode: Mode) -> Result<i32, Failure> {
    let plan = plan_from_args(a, mode)?;
    let sizes = plan.sizes().map_err(|e| Failure::usage(e.to_string()))?;
    let stdout_format = Format::parse(&a.format).ok_or_else(|| {
        Failure::usage(format!(
            "unknown --format '{}': use text, json, csv or md",
            a.format
        ))
    })?;
    let mut files = Vec::new();
    if let Some(p) = &a.output {
        files.push(output_file(p, None)?);
    }
    if let Some(p) = &a.output_file {
        files.push(output_file(p, Some(Format::Json))?);
    }

    // `_mpi` outlives the backend and the control plane (declared first,
    // dropped last): dropping it finalises MPI.
    let (_mpi, launch) = launch_args(&a.backend, &a.launch)?;
    let world = World::discover(&launch)?;
    let control = Control::connect(&world, &launch)?;
    let tuning = Tuning {
        local_register: a.local_register,
        timeout: a.timeout,
        stream_null: a.stream_null,
    };
    let mut backend = open_backend(&a.backend, tuning, mode, &world, &control)?;
    let world_size = backend.world_size();

    let total: u64 = plan
        .collectives
        .iter()
        .map(|c| {
            plan.variants(*c, world_size).len() as u64 * sizes.len() as u64 * plan.cycles as u64
        })
        .sum();
    let options = TextOptions {
        cputime: plan.cputime,
        timestamps: plan.timestamps,
    };
    let print_text = !a.quiet && stdout_format == Format::Text;
    let mut obs = TextObserver::new(print_text, options, total);
    obs.per_rank = a.per_rank;
    let record = crate::meta::new_record(argv);
    let mut runner = Runner::new(backend.as_mut(), &control, plan);
    let Some(record) = runner.run(record, &mut obs)? else {
        return Ok(code::OK);
    };
    obs.finish(&record);
    if !a.quiet && stdout_format != Format::Text {
        let bytes = stdout_format.exporter().serialize(&record);
        use std::io::Write;
        let _ = std::io::stdout().write_all(&bytes);
    }
    for f in files {
        let bytes = f.format.exporter().serialize(&record);
        std::fs::write(&f.path, bytes).map_err(|e| {
            Failure::usage(format!(
                "cannot write output file {}: {e}",
                f.path.display()
            ))
        })?;
    }
    let wrong = record.total_wrong();
    if wrong > 0 {
        eprintln!(
            "collbench: {wrong} wrong elements: results are NOT correct (exit {})",
            code::WRONG
        );
        return Ok(code::WRONG);
    }
    Ok(code::OK)
}
