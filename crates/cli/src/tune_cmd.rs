//! `collbench tune` (find NCCL settings that beat the defaults, prove the
//! gain, write what production can load) and `run --tuner-config` (run
//! with such a file applied). The search is `collbench_tune`; the NCCL
//! measurer and the embedded tuner plugin are `collbench_nccl::tune` and
//! `collbench_nccl::tuner`; this file is flags and wiring.

use crate::args::{BackendArgs, BackendName};
use crate::exit::{Failure, Outcome};
use crate::launch_args::LaunchArgs;
use crate::tune_child;
use crate::tune_job;
use crate::tune_plan::{self, TransportArg};
use collbench_core::size::{parse_size, sweep, Step};
use collbench_core::{Collective, SingleProcess};
use collbench_nccl::tune::NcclMeasurer;
use collbench_nccl::tuner::{TunerError, TunerPlugin};
use collbench_tune::child::{Children, EnvFallback};
use collbench_tune::{parse_budget, render, setting::tuner_coll_name, End, Progress, TuneConfig};
use collbench_tune::{Measurer, Phase, TuneReport, TunerConfig, WallClock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds before a stuck collective aborts its communicator (`-T`).
const TIMEOUT_S: u64 = 60;

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// How `tune` prints its table on stdout.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneFormat {
    Text,
    Json,
    Md,
}

/// Flags of `collbench tune`. The backend flags are `run`'s, but `tune`
/// measures with NCCL only: their help says what they do here.
#[derive(clap::Args, Debug, Clone)]
#[command(
    mut_arg("name", |a| a.help("nccl (auto: nccl where a GPU is seen); tune measures NCCL settings, so cpu and mpi are refused (exit 2), except with --list-candidates, which measures nothing")),
    mut_arg("ranks", |a| a.help("Ranks to plan for with --list-candidates on a machine without GPUs; a measuring tune drives one rank per GPU (-g)"))
)]
pub struct TuneArgs {
    /// Ops to tune (all_reduce all_gather reduce_scatter broadcast reduce;
    /// default: the first three).
    #[arg(value_name = "OP")]
    pub ops: Vec<String>,
    /// Smallest size (nccl-tests' size column).
    #[arg(short = 'b', long = "minbytes", value_parser = size_arg, required_unless_present = "list_candidates")]
    pub minbytes: Option<u64>,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", value_parser = size_arg, required_unless_present = "list_candidates")]
    pub maxbytes: Option<u64>,
    /// Size factor between probes; one band per probe size.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub stepfactor: u64,
    /// Wall time the whole command may take, setup and end included (e.g. 90s, 10m, 1h).
    #[arg(long, default_value = "10m")]
    pub budget: String,
    /// Never try a setting that fixes more channels (SMs) than this.
    #[arg(long)]
    pub max_channels: Option<u32>,
    /// Table format on stdout.
    #[arg(long, value_enum, default_value_t = TuneFormat::Text)]
    pub format: TuneFormat,
    /// Write the winning per-band settings as a tuner config (the CSV of
    /// NCCL's example tuner; `run --tuner-config` loads it).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the whole report as JSON (what `--format json` prints)
    /// to this file, whatever stdout shows.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Replace an existing --csv or --json file (refused otherwise).
    #[arg(long)]
    pub force: bool,
    /// Also print `export NAME=VALUE` lines for the best setting that
    /// environment variables can set (a comment when the defaults win).
    #[arg(long)]
    pub shell: bool,
    /// Print the candidates for this job (knob, values, ops, why) and exit
    /// without measuring.
    #[arg(long)]
    pub list_candidates: bool,
    /// Also try these values of an NCCL environment variable, each as a
    /// candidate measured in child processes (repeatable).
    #[arg(long, value_name = "NAME=A,B,..", value_parser = tune_plan::env_arg)]
    pub env: Vec<collbench_tune::plan::UserEnv>,
    /// How the hosts talk (picks the network knobs to try).
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Run as a child process of `tune` (see `tune_child`): answer measure
    /// requests on stdin.
    #[arg(long, hide = true)]
    pub serve_measure: bool,
    /// Test hook: the scripted fake instead of NCCL (ok, die, hang, die1,
    /// hang1, renew1, aging, flat, spread).
    #[arg(long, hide = true)]
    pub test_fake: Option<String>,
    /// Test hook: milliseconds the fake takes per repeat (several
    /// processes), so a test can kill one mid-search.
    #[arg(long, hide = true)]
    pub test_repeat_ms: Option<u64>,
    /// Test hook: seconds a child process may take per answer.
    #[arg(long, hide = true)]
    pub test_child_timeout_s: Option<u64>,
}

/// The one line for a command that needs NCCL on another backend.
fn not_nccl(what: &str, b: &BackendArgs) -> Option<String> {
    let why = match b.name {
        BackendName::Nccl => return None,
        BackendName::Auto => match collbench_nccl::gpu_count() {
            Ok(n) if n > 0 => return None,
            Ok(_) => "no GPU found".to_string(),
            Err(e) => format!("no GPU found ({e})"),
        },
        BackendName::Cpu => "--backend cpu".to_string(),
        BackendName::Mpi => "--backend mpi".to_string(),
    };
    Some(format!(
        "{what} ({why}): use --backend nccl on a machine with NVIDIA GPUs"
    ))
}

/// Ops named on the command line, each one NCCL's tuner covers.
pub fn tune_ops(names: &[String]) -> Result<Vec<Collective>, String> {
    if names.is_empty() {
        return Ok(vec![
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
        ]);
    }
    let mut out = Vec::new();
    for part in names
        .iter()
        .flat_map(|n| n.split([',', ' ']))
        .filter(|p| !p.is_empty())
    {
        let op = Collective::parse(part).map_err(|e| e.to_string())?;
        if tuner_coll_name(op).is_none() {
            return Err(format!(
                "collbench tune tunes all_reduce, all_gather, reduce_scatter, broadcast and reduce (what NCCL's tuner interface covers): drop {op}"
            ));
        }
        if !out.contains(&op) {
            out.push(op);
        }
    }
    Ok(out)
}

/// The search's configuration from the flags, for a job of `hosts` hosts
/// and `world_size` ranks (from the backend): the candidates are the
/// plan's for that job.
pub fn tune_config(a: &TuneArgs, world_size: usize, hosts: usize) -> Result<TuneConfig, String> {
    let ops = tune_ops(&a.ops)?;
    let (Some(min), Some(max)) = (a.minbytes, a.maxbytes) else {
        return Err("tune needs -b MIN and -e MAX (or --list-candidates)".into());
    };
    let sizes = sweep(min, max, Step::Factor(a.stepfactor)).map_err(|e| e.to_string())?;
    let budget = parse_budget(&a.budget).map_err(|e| e.to_string())?;
    if a.max_channels == Some(0) {
        return Err("--max-channels must be at least 1".into());
    }
    let mut cfg = TuneConfig::new(ops, sizes, world_size, hosts, budget);
    cfg.max_channels = a.max_channels;
    cfg.space = tune_plan::plan(a, hosts, world_size).space;
    Ok(cfg)
}

/// A progress line when the band, candidate, phase or fresh process pair
/// changes.
#[derive(Default)]
pub struct ProgressLines {
    last: Option<Shown>,
}

/// What a progress line names: band, candidate, phase, process pair.
type Shown = (usize, String, Phase, Option<(u32, u32)>);

impl ProgressLines {
    /// Prints a line on stderr if `p` starts something new.
    pub fn hear(&mut self, p: &Progress) {
        // The default's repeats come between every candidate's: a line for
        // each would say nothing new.
        if p.setting.is_default() && p.phase != Phase::Calibrate {
            return;
        }
        let key = (p.band_index, p.setting.to_string(), p.phase, p.process_pair);
        if self.last.as_ref() == Some(&key) {
            return;
        }
        let (what, phase) = match p.phase {
            Phase::Calibrate => ("band", "calibrate"),
            Phase::Screen => ("band", "screen"),
            Phase::Confirm => ("band", "confirm"),
            Phase::ProcessWide => ("process-wide setting, band", "in a band it did not win"),
            Phase::Refine => ("process-wide setting, figure", "refine"),
        };
        let fresh = p.process_pair.map_or(String::new(), |(k, n)| {
            format!(", fresh process pair {k} of {n}")
        });
        crate::stdout::say(format!(
            "collbench tune: {what} {}/{} {} {} B: {} ({phase}{fresh}), {:.0} s of budget left",
            p.band_index + 1,
            p.bands_total,
            p.band.op,
            p.band.probe_bytes,
            p.setting,
            p.budget_left_us / 1e6
        ));
        self.last = Some(key);
    }
}

/// Sets `stop` on Ctrl-C; a second Ctrl-C ends the process at once.
pub fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let installed = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(Outcome::TuneInterrupted.code());
        }
        crate::stdout::say(
            "collbench tune: stopping after this repeat (Ctrl-C again to quit at once)",
        );
    });
    if let Err(e) = installed {
        crate::stdout::say(format!(
            "collbench tune: Ctrl-C will end the process without a report ({e})"
        ));
    }
    stop
}

/// Checks that an output file can be written before anything runs.
/// Before any measuring: `--csv` and `--json` name two different files
/// this process may write, neither already there unless `--force`.
/// Nothing is created yet: a search that fails leaves no empty file.
fn claim_outputs(a: &TuneArgs) -> Result<(), Failure> {
    if let (Some(csv), Some(json)) = (&a.csv, &a.json) {
        crate::outputs::distinct(("--csv", csv), ("--json", json))?;
    }
    for (flag, path) in [("--csv", &a.csv), ("--json", &a.json)] {
        if let Some(path) = path {
            crate::outputs::claim(flag, path, a.force, &[])?;
        }
    }
    Ok(())
}

/// The one process of a `tune` run (children share its control plane:
/// none, a world of one).
static CONTROL: SingleProcess = SingleProcess;

/// Where a measuring process sits: its host's name and its rank among the
/// processes on that host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub host: String,
    pub local_rank: usize,
}

impl Place {
    /// The place of a process of `world`.
    pub fn of(world: &collbench_launch::World) -> Place {
        Place {
            host: world.hostname.clone(),
            local_rank: world.local_rank,
        }
    }
}

/// NCCL options of `tune`'s measurers, parent and children alike.
pub fn nccl_options(a: &TuneArgs, place: Place) -> collbench_nccl::NcclOptions {
    collbench_nccl::NcclOptions {
        lib_path: a.backend.nccl_lib.clone(),
        gpus_per_process: a.backend.ngpus.map(|g| g * a.backend.nthreads.max(1)),
        // Picks this process's GPUs among the host's, as in `run`: with
        // eight processes per host, eight GPUs, not GPU 0 eight times.
        local_rank: place.local_rank,
        host: place.host,
        // A repeat takes milliseconds: a stuck collective is aborted and
        // reported instead of hanging the search.
        timeout_s: TIMEOUT_S,
        ..Default::default()
    }
}

/// Runs `collbench tune`.
pub fn tune(a: &TuneArgs) -> Result<Outcome, Failure> {
    if a.serve_measure {
        return tune_child::serve_measure(a);
    }
    let refused = |m: String| Failure::new(Outcome::TuneRefused, m);
    if a.max_channels == Some(0) {
        return Err(refused("--max-channels must be at least 1".into()));
    }
    let launch = a.launch.options();
    let world = collbench_launch::World::discover(&launch)
        .map_err(|e| Failure::new(Outcome::TuneRefused, e.to_string()))?;
    let across = world.world_size > 1;
    if a.list_candidates {
        return match across {
            true => tune_job::tune_across(a, &world, &launch),
            false => tune_plan::list_candidates(a),
        };
    }
    if a.test_fake.is_none() {
        if let Some(line) = not_nccl("collbench tune tunes NCCL", &a.backend) {
            return Err(refused(line));
        }
    }
    // Flags first: a mistake must not cost communicator setup.
    tune_config(a, 2, 1).map_err(refused)?;
    if a.shell && a.format == TuneFormat::Json {
        return Err(refused(
            "--shell prints shell lines, which would break --format json: drop one".into(),
        ));
    }
    claim_outputs(a)?;
    if across {
        return tune_job::tune_across(a, &world, &launch);
    }
    if let Some(mode) = &a.test_fake {
        let mut fake = tune_child::fake_parent(mode)?;
        let cfg = tune_config(a, 2, 1).map_err(refused)?;
        let started = Instant::now();
        let children = start_children(a, &cfg)?;
        let children = children_ready(children, started)?;
        return search(a, &mut fake, children, 0, cfg, stop_on_ctrl_c());
    }
    let plugin = TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => refused(e.to_string()),
        e => Failure::new(Outcome::TuneFailed, e.to_string()),
    })?;
    // Before any thread NCCL starts: the handler thread never calls NCCL.
    let stop = stop_on_ctrl_c();
    // Children before this process's communicators: NcclBackend pins the
    // launching thread to one CPU, and a child started from it would
    // inherit that one-CPU mask for all its threads, NCCL's included,
    // unlike this process. Their setup overlaps with ours.
    let started = Instant::now();
    let children = start_children(a, &tune_config(a, 2, 1).map_err(refused)?)?;
    let opts = nccl_options(a, Place::of(&world));
    let mut measurer = NcclMeasurer::new(&opts, &CONTROL, plugin)
        .map_err(|e| Failure::new(Outcome::TuneFailed, e.to_string()))?;
    let cfg = tune_config(a, measurer.world_size(), 1).map_err(refused)?;
    // Every communicator up front, charged to the budget (see `prepare`).
    crate::stdout::say("collbench tune: creating the candidates' communicators");
    measurer.prepare(&all_candidates(&cfg));
    let children = children_ready(children, started)?;
    let communicators = measurer.communicators();
    search(a, &mut measurer, children, communicators, cfg, stop)
}

/// Communicators and children, and the wall time their setup took (us).
struct Prepared {
    children: Children,
    setup_us: f64,
}

/// Starts, without waiting for them, the child processes that
/// environment-only candidates need (two per distinct environment: the
/// candidate's and its own default partner's).
fn start_children(a: &TuneArgs, cfg: &TuneConfig) -> Result<Children, Failure> {
    let timeout = a
        .test_child_timeout_s
        .map(Duration::from_secs)
        .unwrap_or(tune_child::CHILD_TIMEOUT);
    let mut children = Children::new(tune_child::spawner()?, timeout);
    let in_children: Vec<_> = all_candidates(cfg)
        .into_iter()
        .filter(|s| !s.env.is_empty())
        .collect();
    children
        .start(&in_children)
        .map_err(|e| Failure::new(Outcome::TuneFailed, format!("collbench tune: {e}")))?;
    if !children.is_empty() {
        crate::stdout::say(format!(
            "collbench tune: starting {} child processes for candidates NCCL reads only from its environment (each with a default-environment partner)",
            children.len()
        ));
    }
    Ok(children)
}

/// Waits for the children; the setup so far is what `started` measured.
fn children_ready(mut children: Children, started: Instant) -> Result<Prepared, Failure> {
    children
        .ready()
        .map_err(|e| Failure::new(Outcome::TuneFailed, format!("collbench tune: {e}")))?;
    Ok(Prepared {
        children,
        setup_us: started.elapsed().as_secs_f64() * 1e6,
    })
}

/// Every candidate of every op (forbidden ones left out).
pub fn all_candidates(cfg: &TuneConfig) -> Vec<collbench_tune::Setting> {
    cfg.ops
        .iter()
        .flat_map(|op| collbench_tune::space::candidates(&cfg.space, *op, cfg.max_channels).0)
        .collect()
}

/// Charges the setup and the end (the children and `communicators` of
/// `inner` to destroy) to the budget, runs the search (environment
/// candidates in the prepared children) and prints the report.
fn search(
    a: &TuneArgs,
    inner: &mut dyn Measurer,
    prepared: Prepared,
    communicators: usize,
    mut cfg: TuneConfig,
    stop: Arc<AtomicBool>,
) -> Result<Outcome, Failure> {
    let Prepared { children, setup_us } = prepared;
    charge_setup(&mut cfg, setup_us, teardown_us(&children, communicators))?;
    let mut measurer = EnvFallback::new(inner, children);
    let mut clock = WallClock::new(&mut measurer);
    let mut lines = ProgressLines::default();
    let report = collbench_tune::tune(&mut clock, &cfg, &stop, &mut |p| lines.hear(p));
    drop(measurer);
    report_outcome(a, &report)
}

/// What destroying one of the parent's communicators may take, held back
/// from the budget: on two emulated hosts (socket transport) a search
/// holding 11 communicators and 28 children per process took 6.4 s from
/// its last repeat to its exit (bench/results/tune.md, session 14).
pub const COMM_TEARDOWN: Duration = Duration::from_millis(500);

/// What ending the search takes (us), held back from the budget: its
/// children's end, when it has any ([`Children::TEARDOWN`]), and
/// destroying its `communicators` ([`COMM_TEARDOWN`] each).
pub fn teardown_us(children: &Children, communicators: usize) -> f64 {
    let children = if children.is_empty() {
        Duration::ZERO
    } else {
        Children::TEARDOWN
    };
    (children + COMM_TEARDOWN * communicators as u32).as_secs_f64() * 1e6
}

/// Takes the setup's wall time (us) and what ending will take
/// (`teardown_us`) from the budget, so that the command ends within it; a
/// setup that took all of it ends the command.
pub fn charge_setup(cfg: &mut TuneConfig, setup_us: f64, teardown_us: f64) -> Result<(), Failure> {
    if setup_us + teardown_us >= cfg.budget_us {
        return Err(Failure::new(
            Outcome::TuneFailed,
            format!(
                "creating the communicators took {:.0} s and ending them takes {:.0} s, the whole --budget: raise --budget",
                setup_us / 1e6,
                teardown_us / 1e6
            ),
        ));
    }
    cfg.budget_us -= setup_us + teardown_us;
    Ok(())
}

/// Prints the report and its files; the outcome from how the search ended.
pub fn report_outcome(a: &TuneArgs, report: &TuneReport) -> Result<Outcome, Failure> {
    print_report(a, report)?;
    Ok(match &report.end {
        End::Complete => Outcome::TuneComplete,
        End::Interrupted => Outcome::TuneInterrupted,
        End::Failed(why) => {
            crate::stdout::say(format!("collbench tune: stopped: {why}"));
            Outcome::TuneFailed
        }
    })
}

/// A child process on NCCL: the default communicator over `control` (its
/// child job's, or none), its environment carrying the candidate; then
/// requests until stdin ends.
pub fn serve_nccl(
    a: &TuneArgs,
    control: &dyn collbench_core::Bootstrap,
    place: Place,
    input: impl std::io::BufRead,
    output: impl std::io::Write,
) -> Result<Outcome, Failure> {
    let failed = |m: String| Failure::new(Outcome::TuneFailed, format!("child process: {m}"));
    let plugin = TunerPlugin::install().map_err(|e| failed(e.to_string()))?;
    tune_child::ignore_ctrl_c();
    let opts = nccl_options(a, place);
    let mut measurer =
        NcclMeasurer::new(&opts, control, plugin).map_err(|e| failed(e.to_string()))?;
    measurer.prepare(&[collbench_tune::Setting::default()]);
    collbench_tune::child::serve(&mut measurer, input, output).map_err(failed)?;
    Ok(Outcome::TuneComplete)
}

/// The table on stdout, the shell lines, the CSV file.
fn print_report(a: &TuneArgs, report: &TuneReport) -> Result<(), Failure> {
    let table = match a.format {
        TuneFormat::Text => render::text(report),
        TuneFormat::Json => render::json(report),
        TuneFormat::Md => render::markdown(report),
    };
    let mut text = table;
    if a.shell {
        text += &format!("\n{}", render::shell(report));
    }
    // The CSV file is written even when stdout fails; the failure is the
    // command's end (exit 2) once it is.
    let printed = crate::stdout::print(&text).map_err(Failure::from);
    let write = |flag: &str, path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| {
            Failure::new(
                Outcome::TuneFailed,
                format!(
                    "cannot write {flag} {}: {}",
                    path.display(),
                    crate::outputs::io_reason(&e)
                ),
            )
        })
    };
    if let Some(path) = &a.json {
        write("--json", path, &(render::json(report) + "\n"))?;
    }
    if let Some(path) = &a.csv {
        let (csv, notes) = TunerConfig::from_report(report);
        write("--csv", path, &csv.to_csv(&notes))?;
        crate::stdout::say(format!(
            "collbench tune: wrote {} ({} rules); check it with: collbench run --tuner-config {} ...",
            path.display(),
            csv.rows.len(),
            path.display()
        ));
    }
    printed
}

/// `run --tuner-config FILE`: checks the file and the backend, installs
/// the tuner plugin (before the first communicator) and loads the file.
/// Every mistake is a usage failure, one line per malformed line.
pub fn apply_tuner_config(path: &Path, b: &BackendArgs) -> Result<TunerPlugin, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read --tuner-config {}: {e}",
            path.display()
        ))
    })?;
    TunerConfig::parse(&text).map_err(|errors| {
        let lines: Vec<String> = errors
            .0
            .iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect();
        Failure::usage(lines.join("\ncollbench: "))
    })?;
    if let Some(line) = not_nccl("--tuner-config applies to NCCL", b) {
        return Err(Failure::usage(line));
    }
    let plugin = TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => Failure::usage(e.to_string()),
        e => Failure::new(Outcome::Backend, e.to_string()),
    })?;
    plugin
        .load_config(path)
        .map_err(|e| Failure::usage(e.to_string()))?;
    Ok(plugin)
}

/// After a run with `--tuner-config`: whether NCCL asked the plugin and
/// followed the file, in one line.
pub fn tuner_config_note(path: &Path, plugin: &TunerPlugin) -> String {
    let c = plugin.counters();
    if c.calls == 0 {
        return format!(
            "collbench: warning: --tuner-config {}: NCCL never called collbench's tuner plugin (a one-rank communicator asks no tuner; otherwise an NCCL without the tuner interface); the file had no effect",
            path.display()
        );
    }
    format!(
        "collbench: --tuner-config {}: NCCL asked the tuner {} times; a rule applied {} times",
        path.display(),
        c.calls,
        c.applied
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ops_are_the_three_of_the_issue() {
        assert_eq!(
            tune_ops(&[]).unwrap(),
            [
                Collective::AllReduce,
                Collective::AllGather,
                Collective::ReduceScatter
            ]
        );
        assert_eq!(
            tune_ops(&["all_gather,all_gather".into()]).unwrap(),
            [Collective::AllGather]
        );
        let e = tune_ops(&["alltoall".into()]).unwrap_err();
        assert!(e.contains("drop alltoall"), "{e}");
    }

    #[test]
    fn the_cpu_backend_is_refused_in_one_line() {
        let b = BackendArgs {
            nthreads: 1,
            ngpus: None,
            name: BackendName::Cpu,
            ranks: None,
            nccl_lib: None,
            test_slow_rank: None,
        };
        let line = not_nccl("collbench tune tunes NCCL", &b).unwrap();
        assert_eq!(
            line,
            "collbench tune tunes NCCL (--backend cpu): use --backend nccl on a machine with NVIDIA GPUs"
        );
        assert!(!line.contains('\n'));
    }
}
