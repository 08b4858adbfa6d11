//! `collbench tune` (find NCCL settings that beat the defaults, prove the
//! gain, write what production can load) and `run --tuner-config` (run
//! with such a file applied): wiring only. The flags become typed options
//! in `cmd/tune.rs`; the job, its child processes and the search are
//! `collbench_tune::job`; here the CLI finds where the job runs (the
//! launcher's world, the control plane), opens NCCL for it (`nccl`),
//! starts and serves child processes (`child`), prints (`print`) and
//! turns the outcome into an exit code (`crate::exit`).

mod child;
mod nccl;
mod print;
mod tuner_config;

pub use tuner_config::{apply_tuner_config, tuner_config_note};

use crate::cmd::tune::TuneArgs;
use crate::exit::{Failure, Outcome};
use collbench_core::{Bootstrap, SingleProcess};
use collbench_launch::{Control, LaunchOptions, World};
use collbench_tune::job::{self, FakeMeasurers, Measurers, Surroundings, TuneRequest};
use collbench_tune::plan::distinct_hosts;
use std::time::Instant;

/// The one process of a one-process `tune` (children share its control
/// plane: none, a world of one).
static CONTROL: SingleProcess = SingleProcess;

/// Runs `collbench tune`.
pub fn tune(a: &TuneArgs) -> Result<Outcome, Failure> {
    if a.serve_measure {
        return child::serve_measure(a);
    }
    let request = TuneRequest::try_from(a)?;
    let launch = a.launch.options();
    let world = World::discover(&launch)
        .map_err(|e| Failure::new(Outcome::TuneRefused, crate::launch_args::launch_words(&e)))?;
    // The budget is the command's wall time: joining the job counts too.
    let started = Instant::now();
    let options = match request {
        TuneRequest::ListCandidates(plan) if world.world_size > 1 => {
            let control = join(&world, &launch)?;
            let hosts = hosts_of(&control);
            return rank_0_decides(&control, || {
                print::plan(&plan, &job::plan(&plan, hosts, world.world_size))
            });
        }
        TuneRequest::ListCandidates(plan) => {
            return print::plan(&plan, &job::plan(&plan, 1, nccl::local_ranks(&a.backend)));
        }
        TuneRequest::Search(options) => options,
    };
    if options.fake.is_none() {
        if let Some(line) = nccl::not_nccl("tune tunes NCCL", &a.backend) {
            return Err(Failure::new(Outcome::TuneRefused, line));
        }
    }
    print::claim_outputs(a)?;
    let mut measurers: Box<dyn Measurers> = match options.fake {
        Some(fake) => Box::new(FakeMeasurers {
            pause: if world.world_size > 1 {
                fake.repeat_pause
            } else {
                Default::default()
            },
        }),
        None => Box::new(nccl::NcclMeasurers::new(a, nccl::Place::of(&world))),
    };
    let joined = match world.world_size > 1 {
        true => Some(join(&world, &launch)?),
        false => None,
    };
    let (control, hosts): (&dyn Bootstrap, usize) = match &joined {
        Some(c) => (c, hosts_of(c)),
        None => (&CONTROL, 1),
    };
    let spawner = child::spawner_for(&world, a.launch.timeout_s);
    let at = Surroundings {
        control,
        hosts,
        bind: world.bind.clone(),
        timeout_s: a.launch.timeout_s,
        started,
        spawner: &spawner,
    };
    let mut sink = print::Terminal::default();
    let report = job::run(&options, &at, measurers.as_mut(), &mut sink)?;
    rank_0_decides(control, || print::report_outcome(a, &report))
}

/// This process's host as NCCL tells hosts apart: `NCCL_HOSTID` where set
/// (emulated hosts on one machine), else the host name.
fn host_id(world: &World) -> String {
    std::env::var("NCCL_HOSTID")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| world.hostname.clone())
}

/// Joins the job, telling rank 0 this process's host identity.
fn join(world: &World, launch: &LaunchOptions) -> Result<Control, Failure> {
    Ok(Control::connect_with_info(
        world,
        launch,
        host_id(world).into_bytes(),
    )?)
}

/// Rank 0's count of distinct hosts (from every rank's hello).
fn hosts_of(control: &Control) -> usize {
    let ids: Vec<String> = control
        .hellos()
        .into_iter()
        .map(|h| String::from_utf8_lossy(&h.info).into_owned())
        .collect();
    distinct_hosts(ids.iter().map(String::as_str))
}

/// Rank 0 runs `root_work` (which prints); every process exits with its
/// code, the others learning it from rank 0.
fn rank_0_decides(
    control: &dyn Bootstrap,
    root_work: impl FnOnce() -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    let peer = |f: collbench_core::PeerFailure| Failure::new(Outcome::Launch, f.message);
    if control.rank() != 0 {
        let code = control.broadcast(None).map_err(peer)?;
        return Ok(Outcome::tune_of_code(code.first().copied()));
    }
    let out = root_work();
    let code = out.as_ref().map_or_else(|f| f.outcome.code(), |o| o.code());
    control.broadcast(Some(vec![code as u8])).map_err(peer)?;
    out
}
