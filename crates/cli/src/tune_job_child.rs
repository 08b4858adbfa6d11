//! The child jobs of `collbench tune` under a launcher (docs/tune.md,
//! section 3): NCCL reads most NCCL_* variables once per process, so an
//! environment candidate needs a new process on every host at the same
//! step. Every process starts the same children (the same candidate
//! environments, in the same order); child number `k` of every process
//! joins child job `k`, with the same rank, world size and host identity
//! (`NCCL_HOSTID` and the rest of the environment are inherited) as its
//! parent, its own rendezvous port (rank 0 picks free ones and shares them
//! over the parents' control plane) and its own token, so children of two
//! candidates never meet. The child learns all that from one variable
//! ([`CHILD_JOB_VAR`]) rather than from launch flags, which would clash
//! with the parent's own flags that the child inherits.
//!
//! Deadlines: a parent waits for a child's every answer (its setup
//! included) at most [`child_timeout`], below the parents' own control
//! plane timeout, so a hung child on one host ends its candidate before
//! the other parents, waiting for that one in their agreement, give up
//! on it.

use crate::exit::{Failure, Outcome};
use crate::tune_child;
use collbench_core::{Bootstrap, PeerFailure};
use collbench_launch::{Control, LaunchOptions, Launcher, World};
use collbench_tune::child::Spawn;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// The child job's control-plane timeout (s): half the parents', so
    /// a child whose peer hangs says so (naming it) before its parent's
    /// deadline for the answer ([`child_timeout`]) kills it unheard.
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

/// How long a parent waits for each answer of a child in a job of
/// several processes (`--timeout-s` is the parents' control-plane
/// timeout): three quarters of it, at least a second. Parents that wait
/// for their children at most that long reach their agreement on the
/// round within the control plane's timeout of each other.
pub fn child_timeout(timeout_s: u64) -> Duration {
    Duration::from_millis((timeout_s * 750).max(1000))
}

/// `n` ports free on rank 0's host a moment ago (the OS's picks, held
/// together so they differ); a child job's rank 0 may still lose its port
/// to another process first, which fails that candidate alone.
fn free_ports(bind: &str, n: usize) -> std::io::Result<Vec<u16>> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind((bind, 0)))
        .collect::<Result<_, _>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// Every process gets the `n` child jobs' ports rank 0 picked.
pub fn agree_ports(control: &Control, n: usize) -> Result<Vec<u16>, Failure> {
    let bind = control.world().bind.clone();
    let picked = (control.rank() == 0).then(|| free_ports(&bind, n));
    // Rank 0's failure is broadcast too, or the others would wait.
    let mine = picked
        .as_ref()
        .map(|p| serde_json::to_vec(&p.as_ref().ok()).expect("ports serialize"));
    let answer = control.broadcast(mine)?;
    if let Some(Err(e)) = picked {
        return Err(Failure::new(
            Outcome::TuneFailed,
            format!("collbench tune: cannot find free ports on {bind} for the child jobs: {e}"),
        ));
    }
    match serde_json::from_slice::<Option<Vec<u16>>>(&answer) {
        Ok(Some(ports)) if ports.len() == n => Ok(ports),
        Ok(_) => Err(Failure::new(
            Outcome::TuneFailed,
            "collbench tune: rank 0 found no free ports for the child jobs (see its output)"
                .to_string(),
        )),
        Err(e) => Err(Failure::new(
            Outcome::Launch,
            format!(
                "rank 0's ports are unreadable ({e}): every process must run the same collbench"
            ),
        )),
    }
}

/// The child jobs' ports by child number, shared by the parent's spawner
/// and its search: those agreed for the children started up front, then
/// two more agreed for each renewal of a candidate's children (fresh
/// ones, not kept from the start: a port held by no listener for minutes
/// may be any other socket's by then, NCCL's own included).
#[derive(Debug, Clone, Default)]
pub struct PortBook(Arc<Mutex<Vec<u16>>>);

impl PortBook {
    /// A book of the ports agreed for children `0..ports.len()`.
    pub fn new(ports: Vec<u16>) -> PortBook {
        PortBook(Arc::new(Mutex::new(ports)))
    }

    /// The ports of the next children, in their order.
    pub fn add(&self, ports: &[u16]) {
        if let Ok(mut book) = self.0.lock() {
            book.extend_from_slice(ports);
        }
    }

    /// Child `k`'s port, if one was agreed.
    fn get(&self, k: usize) -> Option<u16> {
        self.0.lock().ok().and_then(|b| b.get(k).copied())
    }
}

/// The parent's way of starting its children: child number `k` joins
/// child job `k` at `ports`' port `k`.
pub fn spawner(world: &World, timeout_s: u64, ports: PortBook) -> Result<Spawn, Failure> {
    let world = world.clone();
    tune_child::spawner_with(Box::new(move |k| {
        let job = match ports.get(k) {
            Some(port) => serde_json::to_string(&ChildJob::of(&world, timeout_s, k, port))
                .expect("a child job serializes"),
            // Every child gets a port agreed before it starts; one that
            // did not says so in its one line.
            None => format!("no port agreed for child {k}"),
        };
        vec![(CHILD_JOB_VAR.to_string(), job)]
    }))
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
pub fn join_child_job(launch: &LaunchOptions) -> Result<Option<Control>, String> {
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

/// The child job's control plane as the measurer's, or none (one process).
pub fn bootstrap_of(job: &Option<Control>) -> &dyn Bootstrap {
    match job {
        Some(c) => c,
        None => &collbench_core::SingleProcess,
    }
}

/// Where a child measures: its child job's place (its parent's host name
/// and local rank, so it drives its parent's GPUs), else, in a
/// one-process `tune`, the name `World::discover` would give
/// (`shown_hostname`) at local rank 0.
pub fn place_of(job: &Option<Control>) -> crate::tune_cmd::Place {
    match job {
        Some(c) => crate::tune_cmd::Place::of(c.world()),
        None => crate::tune_cmd::Place {
            host: collbench_launch::world::shown_hostname(
                &|k: &str| std::env::var(k).ok(),
                &collbench_launch::world::system_hostname(),
            ),
            local_rank: 0,
        },
    }
}

/// A peer failure in a child's job, as the child's measure error.
pub fn child_job_failed(f: PeerFailure) -> collbench_tune::MeasureError {
    collbench_tune::MeasureError::Failed(format!("its child job: {}", f.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_waits_below_the_parents_timeout() {
        assert_eq!(child_timeout(60), Duration::from_secs(45));
        assert_eq!(child_timeout(5), Duration::from_millis(3750));
        assert_eq!(child_timeout(1), Duration::from_secs(1));
    }

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

    #[test]
    fn free_ports_differ() {
        let ports = free_ports("127.0.0.1", 4).unwrap();
        let mut sorted = ports.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
    }
}
