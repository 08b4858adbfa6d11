//! The flags that open a backend, shared by `run`, `check` and `tune`:
//! which backend and how many ranks ([`BackendArgs`], with the one
//! [`collbench_nccl::NcclOptions`] they make), and the stuck-collective
//! watchdog ([`WatchdogArgs`]). `run`'s own flags are in `cmd/run/`.

use clap::Args;
use collbench_runner::arrival::LateEntry;
use collbench_runner::{Fault, FaultKind, Watchdog};
use std::time::Duration;

/// The most threads per process `-t` takes: the CPU backend's rank-thread
/// limit, far above any host's GPUs per process.
pub const MAX_NTHREADS: usize = 4096;

/// `-t`: a thread count from 1 to [`MAX_NTHREADS`]; 0 would run no rank
/// and 2^32-1 was taken silently where `--ranks` or `-g` decided instead.
fn nthreads_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_NTHREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "-t takes a thread count from 1 to {MAX_NTHREADS} (nccl-tests' threads per process)"
        )),
    }
}

/// `-T` and `--watchdog`: whole seconds from 0 (never) to a year
/// ([`collbench_core::bounds::MAX_SECONDS`]). "invalid digit found in
/// string" was all `-T 1e9` said.
pub fn seconds_arg(s: &str) -> Result<u64, String> {
    collbench_core::bounds::seconds_from(s, 0)
}

/// Which backend runs the ranks, and how many (shared by `run` and `check`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Backend")]
pub struct BackendArgs {
    /// Threads per process (nccl-tests -t; collbench drives all local
    /// devices from one thread, so values above 1 multiply -g).
    #[arg(short = 't', long = "nthreads", default_value_t = 1, value_parser = nthreads_arg)]
    pub nthreads: usize,
    /// Devices per process: GPUs for nccl, rank threads for cpu.
    #[arg(short = 'g', long = "ngpus")]
    pub ngpus: Option<usize>,
    /// Backend that runs the ranks.
    #[arg(long = "backend", value_enum, default_value_t = BackendName::Auto)]
    pub name: BackendName,
    /// CPU backend: number of ranks (threads in this process).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// NCCL library to load (else COLLBENCH_NCCL_LIB, $NCCL_HOME/lib,
    /// LD_LIBRARY_PATH, the system's libnccl.so.2, the Python wheel's).
    #[arg(long)]
    pub nccl_lib: Option<std::path::PathBuf>,
    /// Test hook: make this CPU rank slow.
    #[arg(long, hide = true)]
    pub test_slow_rank: Option<usize>,
    /// Test hook: `RANK:MICROSECONDS` enters every timed iteration that
    /// late (cpu: this process's rank thread; mpi: the job's rank).
    #[arg(long, hide = true, value_parser = LateEntry::parse)]
    pub test_late_entry: Option<LateEntry>,
}

/// How the command was invoked: the `<op>_perf` aliases keep nccl-tests'
/// defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Native,
    Alias,
}

impl BackendArgs {
    /// The NCCL backend's options these flags make, in one place for
    /// `run`, `check` and `tune` (each adds its own: `run` the NCCL-only
    /// flags, `-T` and `-y`; `tune` its timeout); the process's place on
    /// its host is filled in once the world is known. `-g` counts GPUs
    /// per thread (`-t`); the aliases drive `-t` GPUs by default, as
    /// nccl-tests.
    pub fn nccl_options(&self, mode: Mode) -> collbench_nccl::NcclOptions {
        let threads = self.nthreads.max(1);
        collbench_nccl::NcclOptions {
            lib_path: self.nccl_lib.clone(),
            gpus_per_process: self.ngpus.map(|g| g * threads).or(match mode {
                Mode::Alias => Some(threads),
                Mode::Native => None,
            }),
            // The straggler hook (#53): the NCCL backend holds this rank's
            // stream before each timed collective.
            late_entry: self.test_late_entry,
            ..Default::default()
        }
    }
}

/// The stuck-collective watchdog's flags (shared by `run` and `check`).
#[derive(Args, Debug, Clone)]
pub struct WatchdogArgs {
    /// Stop when a collective makes no progress for this many seconds:
    /// every process prints one line naming the ranks and hosts that are
    /// silent (stopped) or behind, and where they are; communicators are
    /// aborted, exit 5 (0 = never; `run -T` replaces it).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_WATCHDOG_S, value_parser = seconds_arg)]
    pub watchdog: u64,
    /// Test hook: RANK:CASE:ITERATION stops calling there (alive).
    #[arg(long, hide = true, value_parser = |s: &str| Fault::parse(FaultKind::StopCalling, s))]
    pub test_stop_calling: Vec<Fault>,
    /// Test hook: `RANK:CASE:ITERATION[:SECONDS]` stalls in that call.
    #[arg(long, hide = true, value_parser = |s: &str| Fault::parse(FaultKind::Sleep(Duration::MAX), s))]
    pub test_sleep_in_call: Vec<Fault>,
    /// Test hook: RANK:CASE:ITERATION exits the process there.
    #[arg(long, hide = true, value_parser = |s: &str| Fault::parse(FaultKind::Exit, s))]
    pub test_exit: Vec<Fault>,
}

/// `--watchdog`'s default: long enough for the largest cases of a slow
/// network (a timed loop's completion is one wait), short enough that a
/// hung job is named before a batch allocation runs out.
pub const DEFAULT_WATCHDOG_S: u64 = 300;

impl WatchdogArgs {
    /// How the runner watches the run: `-T` seconds where given (a
    /// `timeout` above 0), else `--watchdog`'s; the fault hooks; and the
    /// last resort for a run that cannot be interrupted (its line and exit
    /// code).
    pub fn watchdog(&self, timeout: u64) -> Watchdog {
        let seconds = if timeout > 0 { timeout } else { self.watchdog };
        Watchdog {
            deadline: (seconds > 0).then(|| Duration::from_secs(seconds)),
            faults: [
                &self.test_stop_calling,
                &self.test_sleep_in_call,
                &self.test_exit,
            ]
            .into_iter()
            .flatten()
            .copied()
            .collect(),
            last_resort: Some(crate::exit::last_resort()),
            grace: None,
            announce: Some(crate::exit::announce()),
        }
    }
}

/// The backends `--backend` names.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendName {
    /// nccl when GPUs are found, else cpu.
    Auto,
    /// Built in: ranks are threads of one process.
    Cpu,
    /// NVIDIA GPUs through NCCL.
    Nccl,
    /// MPI collectives (a build with `cargo build --release --features
    /// collbench-cli/mpi`).
    Mpi,
}
