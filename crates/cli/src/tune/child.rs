//! `collbench tune`'s child processes (docs/tune.md, section 3), the
//! CLI's side: how the parent starts them (its own binary and flags, plus
//! the hidden `--serve-measure`, with the candidate's environment), and
//! what a child does before it serves (joins its child job, opens its
//! measurer); the serving is `collbench_tune::job::serve`.
//!
//! Under a launcher, NCCL reads most NCCL_* variables once per process,
//! so an environment candidate needs a new process on every host at the
//! same step: child number `k` of every process joins child job `k`, with
//! the same rank, world size and host identity (`NCCL_HOSTID` and the
//! rest of the environment are inherited) as its parent, its own
//! rendezvous port (`collbench_tune::job::PortBook`) and its own token,
//! so children of two candidates never meet. The child learns all that
//! from one variable ([`CHILD_JOB_VAR`]) rather than from launch flags,
//! which would clash with the parent's own flags that the child inherits.
//! Its control plane times out at half the parents' timeout, so a child
//! whose peer hangs says so (naming it) before its parent's deadline for
//! the answer (`collbench_tune::job::child_timeout`) kills it unheard.

use super::nccl::{NcclMeasurers, Place};
use crate::cmd::tune::TuneArgs;
use crate::exit::{Failure, Outcome};
use collbench_core::Bootstrap;
use collbench_launch::{Control, LaunchOptions, Launcher, World};
use collbench_tune::child::Spawn;
use collbench_tune::job::{self, FakeChild, Measurers, PortBook, Served, TuneError};
use collbench_tune::Setting;
use serde::{Deserialize, Serialize};
use std::process::Command;

/// The variable that tells a child which child job to join (JSON of a
/// [`ChildJob`]); absent in the children of a one-process `tune`.
pub const CHILD_JOB_VAR: &str = "COLLBENCH_TUNE_CHILD_JOB";

/// A child's place in its child job: its parent's, but its own port and
/// token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildJob {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub local_world_size: usize,
    /// Where the child job's rank 0 listens: the parents' rank 0 host.
    pub rendezvous_host: Option<String>,
    pub port: u16,
    pub bind: String,
    pub token: String,
    pub hostname: String,
    /// The child job's control-plane timeout (s): half the parents'.
    pub timeout_s: u64,
}

impl ChildJob {
    /// Child job `index` of a parent at `world` whose control plane times
    /// out after `timeout_s`, meeting at `port`.
    pub fn of(world: &World, timeout_s: u64, index: usize, port: u16) -> ChildJob {
        ChildJob {
            rank: world.rank,
            world_size: world.world_size,
            local_rank: world.local_rank,
            local_world_size: world.local_world_size,
            rendezvous_host: world.rendezvous_host.clone(),
            port,
            bind: world.bind.clone(),
            token: format!("{}/tune-child-{index}", world.token),
            hostname: world.hostname.clone(),
            timeout_s: (timeout_s / 2).max(1),
        }
    }

    /// The child's world.
    pub fn world(&self) -> World {
        World {
            rank: self.rank,
            world_size: self.world_size,
            local_rank: self.local_rank,
            local_world_size: self.local_world_size,
            hostname: self.hostname.clone(),
            rendezvous_host: self.rendezvous_host.clone(),
            rendezvous_port: self.port,
            bind: self.bind.clone(),
            token: self.token.clone(),
            launcher: Launcher::Explicit,
        }
    }
}

/// Extra variables of child number `k` (under a launcher: its child job).
type ChildVars = Box<dyn Fn(usize) -> Vec<(String, String)>>;

/// The parent's way of starting a child: this binary with the parent's own
/// arguments and `--serve-measure`, the parent's environment plus `env`
/// and `vars(k)` for child number `k`.
///
/// Every child starts with the CPU mask the calling thread has now (call
/// this before creating communicators): children renewed mid-search are
/// started from the NCCL backend's launching thread, which is pinned to
/// one CPU by then, and a child inherits its parent thread's mask for all
/// its threads, NCCL's proxy and socket threads included (on two emulated
/// hosts such a mask cost socket settings 3-7x their time).
fn spawner_with(vars: ChildVars) -> Result<Spawn, TuneError> {
    let exe = std::env::current_exe().map_err(|e| {
        TuneError::Failed(format!(
            "cannot find collbench's own binary to start child processes: {e}"
        ))
    })?;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mask = collbench_nccl::ChildMask::of_this_thread();
    Ok(Box::new(move |env: &[(String, String)], k: usize| {
        let mut cmd = Command::new(&exe);
        cmd.args(&argv).arg("--serve-measure");
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd.envs(vars(k));
        if let Some(mask) = mask {
            mask.apply(&mut cmd);
        }
        cmd
    }))
}

/// The job's spawner maker: in a one-process `tune` children join no
/// child job; under a launcher child `k` joins child job `k` at the
/// book's port `k`.
pub fn spawner_for(world: &World, timeout_s: u64) -> impl Fn(PortBook) -> Result<Spawn, TuneError> {
    let world = world.clone();
    move |ports: PortBook| {
        if world.world_size <= 1 {
            return spawner_with(Box::new(|_| Vec::new()));
        }
        let world = world.clone();
        spawner_with(Box::new(move |k| {
            let job = match ports.get(k) {
                Some(port) => serde_json::to_string(&ChildJob::of(&world, timeout_s, k, port))
                    .unwrap_or_else(|e| format!("child job {k} does not serialize ({e})")),
                // Every child gets a port agreed before it starts; one that
                // did not says so in its one line.
                None => format!("no port agreed for child {k}"),
            };
            vec![(CHILD_JOB_VAR.to_string(), job)]
        }))
    }
}

/// In a child: the child job named by [`CHILD_JOB_VAR`], if any.
fn child_job() -> Result<Option<ChildJob>, String> {
    match std::env::var(CHILD_JOB_VAR) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{CHILD_JOB_VAR} is not a child job ({e})")),
        Err(_) => Ok(None),
    }
}

/// In a child: joins its child job (the control plane of its own), if it
/// belongs to one.
fn join_child_job(launch: &LaunchOptions) -> Result<Option<Control>, String> {
    let Some(job) = child_job()? else {
        return Ok(None);
    };
    let launch = LaunchOptions {
        timeout_s: job.timeout_s,
        ..launch.clone()
    };
    Control::connect(&job.world(), &launch)
        .map(Some)
        .map_err(|e| {
            format!(
                "cannot join child job {} of the parents' job: {e}",
                job.token
            )
        })
}

/// Where a child measures: its child job's place (its parent's host name
/// and local rank, so it drives its parent's GPUs), else, in a
/// one-process `tune`, the name `World::discover` would give
/// (`shown_hostname`) at local rank 0.
fn place_of(job: &Option<Control>) -> Place {
    match job {
        Some(c) => Place::of(c.world()),
        None => Place {
            host: collbench_launch::world::shown_hostname(
                &|k: &str| std::env::var(k).ok(),
                &collbench_launch::world::system_hostname(),
            ),
            local_rank: 0,
        },
    }
}

/// Ctrl-C reaches the whole process group: the parent stops the search
/// and prints what it has, so a child must live on until the parent closes
/// its stdin (then it ends by itself). Call after the tuner plugin is
/// installed (that sets an environment variable; this starts a thread).
fn ignore_ctrl_c() {
    let _ = ctrlc::set_handler(|| {});
}

/// Runs as a child: answers the parent's requests until its stdin ends.
pub fn serve_measure(a: &TuneArgs) -> Result<Outcome, Failure> {
    let failed = |e: String| Failure::new(Outcome::TuneFailed, format!("child process: {e}"));
    let fake = a.fake().map_err(Failure::usage)?;
    let job = join_child_job(&a.launch.options()).map_err(failed)?;
    let control: &dyn Bootstrap = match &job {
        Some(c) => c,
        None => &collbench_core::SingleProcess,
    };
    let stdin = std::io::stdin().lock();
    // Stdout unlocked: the last resort flushes it before it ends a child
    // held by a stuck peer, and would wait forever on a held lock.
    let stdout = std::io::stdout();
    let served = match fake {
        Some(fake) => match FakeChild::new(fake.mode, control, fake.repeat_pause) {
            Ok(child) => {
                ignore_ctrl_c();
                job::serve_fake(child, stdin, stdout)
            }
            Err(fault) => Ok(Served::Fault(fault)),
        },
        None => {
            let mut nccl = NcclMeasurers::child(&a.backend, place_of(&job));
            nccl.install().map_err(|e| failed(e.to_string()))?;
            ignore_ctrl_c();
            let mut opened = nccl
                .open(control, &|_| vec![Setting::default()])
                .map_err(|e| failed(e.to_string()))?;
            job::serve(opened.measurer.as_mut(), stdin, stdout)
        }
    }?;
    match served {
        Served::InputEnded => Ok(Outcome::TuneComplete),
        // A scripted death: at once, as a dead process, without a goodbye
        // to its child job.
        Served::Fault(fault) => {
            crate::stdout::say(format!("collbench: {}", fault.line()));
            crate::exit::terminate(Outcome::Launch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_job_is_its_parents_place_with_its_own_port_and_token() {
        let parent = World::on_loopback(1, 2, 4000, "job");
        let job = ChildJob::of(&parent, 5, 3, 5000);
        let text = serde_json::to_string(&job).unwrap();
        let back: ChildJob = serde_json::from_str(&text).unwrap();
        let w = back.world();
        assert_eq!((w.rank, w.world_size), (1, 2));
        assert_eq!(w.rendezvous_port, 5000);
        assert_eq!(w.rendezvous_host.as_deref(), Some("127.0.0.1"));
        assert_eq!(w.token, "job/tune-child-3");
        assert_eq!(w.hostname, parent.hostname);
        assert_eq!(back.timeout_s, 2);
    }
}
