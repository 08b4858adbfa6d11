//! The parent's children: two per candidate environment (the
//! candidate's and its default partner's), started, renewed, waited for
//! and ended together.

use super::{retire, Child, FINAL_GRACE, RETIRE_GRACE};
use crate::measure::MeasureError;
use crate::setting::Setting;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// The variable that tells a child which of its candidate's process pairs
/// it belongs to: 0 for the first, 1 and on for those [`Children::renew`]
/// started (the test fake's faults read it).
pub const GENERATION_VAR: &str = "COLLBENCH_TUNE_CHILD_GENERATION";

/// Makes the command for a child with these extra environment variables
/// (empty: the default environment); the number is how many children were
/// started before it (`0, 1, ..`, in [`Children::start`]'s order, the same
/// in every process of a job: under a launcher it picks the child job's
/// port).
pub type Spawn = Box<dyn Fn(&[(String, String)], usize) -> Command>;

/// Whether the children of one candidate environment got ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The candidate's environment.
    pub env: Vec<(String, String)>,
    /// Why its children (its own or its default partner's) did not.
    pub failure: Option<String>,
}

/// Which side of an environment candidate's pairs a child measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Role {
    /// The candidate, in its environment.
    Candidate,
    /// The default measured as its partner, in the default environment.
    DefaultPartner,
}

/// One child: the candidate environment it belongs to, and its side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) env: Vec<(String, String)>,
    pub(super) role: Role,
}

/// The children of environment candidates: two per distinct environment,
/// the candidate's and its own default partner's, started together and
/// sent the same requests in the same order, so the two members of every
/// pair live in processes with the same history (started at the same
/// moment, the same communicator, buffers allocated and touched by the
/// same requests). A default child shared by all candidates has served
/// other candidates' pairs first: with one, on one H200 at 16 MiB,
/// `NCCL_BUFFSIZE=4194304` (NCCL's default spelled out) came out a steady
/// 7% faster than the default (docs/tune.md, section 3).
///
/// Children are started before the parent creates its own communicators:
/// the NCCL backend pins its launching thread to one CPU, and a child
/// started from that thread would inherit the one-CPU mask for all its
/// threads, NCCL's included.
pub struct Children {
    spawn: Spawn,
    timeout: Duration,
    children: HashMap<Key, Child>,
    /// Started but not yet heard ready.
    starting: Vec<Key>,
    /// How many were started (the next one's number for `spawn`).
    spawned: usize,
    /// Candidate environments ended for good, with the reason.
    ended: HashMap<Vec<(String, String)>, String>,
    /// How many times each candidate environment's children were renewed.
    generations: HashMap<Vec<(String, String)>, u32>,
}

impl Children {
    /// The wall time the end of the children may take once the search is
    /// over ([`Drop`]): a search that must end within a budget holds this
    /// much back for it.
    pub const TEARDOWN: Duration = FINAL_GRACE;

    /// Children are made by `spawn` and must answer every line within
    /// `timeout`.
    pub fn new(spawn: Spawn, timeout: Duration) -> Children {
        Children {
            spawn,
            timeout,
            children: HashMap::new(),
            starting: Vec::new(),
            spawned: 0,
            ended: HashMap::new(),
            generations: HashMap::new(),
        }
    }

    /// The command for the next child, with `env`.
    fn command(&mut self, env: &[(String, String)]) -> Command {
        self.spawned += 1;
        (self.spawn)(env, self.spawned - 1)
    }

    /// Starts, without waiting for them, the children `settings` need:
    /// for each distinct environment, its own and its default partner's
    /// (the partner first, then the candidate, one right after the other).
    pub fn start<'s>(
        &mut self,
        settings: impl IntoIterator<Item = &'s Setting>,
    ) -> Result<(), MeasureError> {
        for s in settings.into_iter().filter(|s| !s.env.is_empty()) {
            self.start_pair(&s.env)?;
        }
        Ok(())
    }

    /// Starts the children of candidate environment `env` it lacks (its
    /// default partner first, then its own), without waiting for them.
    fn start_pair(&mut self, env: &[(String, String)]) -> Result<(), MeasureError> {
        let generation = self.generations.get(env).copied().unwrap_or(0);
        for (role, child_env) in [(Role::DefaultPartner, &[][..]), (Role::Candidate, env)] {
            let key = Key {
                env: env.to_vec(),
                role,
            };
            if !self.children.contains_key(&key) {
                let mut cmd = self.command(child_env);
                cmd.env(GENERATION_VAR, generation.to_string());
                let child = Child::spawn(cmd, &label(&key), self.timeout)?;
                self.children.insert(key.clone(), child);
                self.starting.push(key);
            }
        }
        Ok(())
    }

    /// Replaces the children of candidate environment `env` (its own and
    /// its default partner's) with fresh ones, and waits until both are
    /// ready: the old ones are told to end (their stdin closed, both at
    /// once, so their child jobs wind down together) and killed if they
    /// linger, then two new ones start with the next numbers. Returns the
    /// wall time it took (us). A candidate ended for good stays ended.
    pub fn renew(&mut self, env: &[(String, String)]) -> Result<f64, MeasureError> {
        if let Some(why) = self.ended.get(env) {
            return Err(MeasureError::Failed(why.clone()));
        }
        let started = Instant::now();
        let mut old: Vec<Child> = [Role::DefaultPartner, Role::Candidate]
            .into_iter()
            .filter_map(|role| {
                self.children.remove(&Key {
                    env: env.to_vec(),
                    role,
                })
            })
            .collect();
        // Both told at once, then a short grace and a kill: the old ones
        // must be gone at about the same moment on every host, because the
        // new ones of every host must meet within their child job's join
        // deadline (an old child job's rank 0 that waits out its peers'
        // goodbyes made one host start its new children 2 s after the
        // others, four processes on two cores).
        retire(&mut old, RETIRE_GRACE, "renewed");
        drop(old);
        *self.generations.entry(env.to_vec()).or_insert(0) += 1;
        self.start_pair(env)?;
        let deadline = Instant::now() + self.timeout;
        for key in std::mem::take(&mut self.starting) {
            let child = self.children.get_mut(&key).expect("inserted by start_pair");
            child.ready_by(deadline)?;
        }
        Ok(started.elapsed().as_secs_f64() * 1e6)
    }

    /// Waits until every started child says ready.
    pub fn ready(&mut self) -> Result<(), MeasureError> {
        for key in std::mem::take(&mut self.starting) {
            self.children
                .get_mut(&key)
                .expect("inserted by start")
                .ready()?;
        }
        Ok(())
    }

    /// Waits until `deadline` for every started child to say ready, and
    /// says for each candidate environment (in the order started) why its
    /// children did not, if they did not: under a launcher the processes
    /// then agree on each ([`crate::lockstep::agree_outcomes`]), and one
    /// failure ends only that candidate.
    pub fn ready_each(&mut self, deadline: Instant) -> Vec<Readiness> {
        let mut out: Vec<Readiness> = Vec::new();
        for key in std::mem::take(&mut self.starting) {
            let child = self.children.get_mut(&key).expect("inserted by start");
            let why = child.ready_by(deadline).err().map(|e| match e {
                MeasureError::Failed(m)
                | MeasureError::Unsupported(m)
                | MeasureError::CandidateFailed { reason: m, .. } => m,
            });
            match out.iter_mut().find(|r| r.env == key.env) {
                Some(r) => {
                    if r.failure.is_none() {
                        r.failure = why;
                    }
                }
                None => out.push(Readiness {
                    env: key.env,
                    failure: why,
                }),
            }
        }
        out
    }

    /// Ends the children of candidate environment `env` (its own and its
    /// default partner's) for `reason`: every later request for either is
    /// answered at once with it.
    pub fn end(&mut self, env: &[(String, String)], reason: &str) {
        for role in [Role::Candidate, Role::DefaultPartner] {
            let key = Key {
                env: env.to_vec(),
                role,
            };
            if let Some(child) = self.children.get_mut(&key) {
                child.end(reason);
            }
        }
        self.ended.insert(env.to_vec(), reason.to_string());
    }

    /// [`Children::start`] then [`Children::ready`]; returns the wall
    /// time it took (seconds), for the same reason as the in-process
    /// measurer's `prepare`: a child's setup must not be charged to its
    /// first pair.
    pub fn prepare<'s>(
        &mut self,
        settings: impl IntoIterator<Item = &'s Setting>,
    ) -> Result<f64, MeasureError> {
        let start = Instant::now();
        self.start(settings)?;
        self.ready()?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// How long each child may take per answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many children there are.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// The child for `key`, started now if [`Children::start`] did not.
    pub(super) fn child(&mut self, key: Key) -> Result<&mut Child, MeasureError> {
        if let Some(why) = self.ended.get(&key.env) {
            return Err(MeasureError::Failed(why.clone()));
        }
        if !self.children.contains_key(&key) {
            let env = match key.role {
                Role::Candidate => key.env.clone(),
                Role::DefaultPartner => Vec::new(),
            };
            let cmd = self.command(&env);
            let child = Child::start(cmd, &label(&key), self.timeout)?;
            self.children.insert(key.clone(), child);
        }
        Ok(self.children.get_mut(&key).expect("inserted above"))
    }
}

impl Drop for Children {
    /// Ends every child at once (all told before any is waited for),
    /// within [`Children::TEARDOWN`].
    fn drop(&mut self) {
        let mut all: Vec<Child> = self.children.drain().map(|(_, c)| c).collect();
        retire(&mut all, FINAL_GRACE, "the search is over");
    }
}

/// How messages name a child: by its environment; a default partner also
/// by the candidate it partners.
fn label(key: &Key) -> String {
    let vars = |env: &[(String, String)]| {
        env.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    match key.role {
        Role::Candidate => format!("with {}", vars(&key.env)),
        Role::DefaultPartner => format!(
            "with the default environment (partner of {})",
            vars(&key.env)
        ),
    }
}
