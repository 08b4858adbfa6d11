//! The child-process fallback (docs/tune.md, section 3): settings that only
//! exist as environment variables (`Setting::env`, e.g. `NCCL_BUFFSIZE`),
//! which NCCL reads once per process, are measured in long-lived child
//! processes of collbench itself: for each candidate environment, one
//! child with it and one with the default environment as its partner
//! ([`Children`]), each holding its communicators and buffers. A
//! confirmation replaces both with fresh ones before each of its process
//! pairs ([`Children::renew`], [`Measurer::renew`]): a process's speed can
//! be its own.
//! The parent drives them through pipes, one request and one reply per
//! repeat, in the same interleaved pairs as in-process candidates, so the
//! statistics and the budget are the same; only a pipe round trip is added
//! per repeat.
//!
//! Protocol: one JSON object per line (other lines, such as NCCL_DEBUG's
//! on stdout, pass through to the parent's stderr). The child first writes
//! `{"ready":{"pid":N}}` (after its setup), then answers each
//! [`Request`] line on its stdin with one [`Reply`] line on its stdout, and
//! exits at the end of its stdin. The parent waits at most `timeout` for
//! every line; a child that dies, hangs or says something else is a failed
//! measurement, in one line that names the child, and is killed.
//!
//! [`EnvFallback`] is the parent's side (a [`Measurer`] over an in-process
//! measurer and the children); [`serve`] is the child's.

use crate::measure::{InPair, MeasureError, Measured, Measurer, Sample};
use crate::setting::{Case, Setting};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One repeat asked of a child: `iters` iterations of `case` under
/// `setting` (whose `env` is empty: the child's environment carries it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub setting: Setting,
    pub case: Case,
    pub iters: u32,
}

/// One line from a child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Setup done; requests may come.
    Ready { pid: u32 },
    /// The repeat's sample.
    Sample(Sample),
    /// The repeat gave no sample.
    Error(MeasureError),
}

/// The child's side: says ready, then answers every request on `input`
/// with `measurer` until `input` ends. A line that is not a request ends
/// it with an error (after an `Error` reply, so the parent hears why).
pub fn serve(
    measurer: &mut dyn Measurer,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), String> {
    let mut say = |r: &Reply| -> Result<(), String> {
        let line = serde_json::to_string(r).expect("replies serialise");
        writeln!(output, "{line}")
            .and_then(|_| output.flush())
            .map_err(|e| format!("cannot write to the parent: {e}"))
    };
    say(&Reply::Ready {
        pid: std::process::id(),
    })?;
    for line in input.lines() {
        let line = line.map_err(|e| format!("cannot read from the parent: {e}"))?;
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("not a measure request: {e}");
                say(&Reply::Error(MeasureError::Failed(why.clone())))?;
                return Err(why);
            }
        };
        let reply = match measurer.measure(&req.setting, &req.case, req.iters) {
            Ok(s) => Reply::Sample(s),
            Err(e) => Reply::Error(e),
        };
        say(&reply)?;
    }
    Ok(())
}

/// What the reader thread saw on a child's stdout.
enum Line {
    Text(String),
    End,
}

/// One running child, as the parent holds it.
pub struct Child {
    label: String,
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    stderr_tail: Arc<Mutex<String>>,
    /// Signals when the child's stderr has ended (all of it read).
    stderr_done: Receiver<()>,
    timeout: Duration,
    dead: Option<String>,
}

impl Child {
    /// Starts `cmd` (stdin, stdout and stderr are taken over) and waits
    /// for its ready line. `label` names it in messages (its environment).
    pub fn start(cmd: Command, label: &str, timeout: Duration) -> Result<Child, MeasureError> {
        let mut child = Child::spawn(cmd, label, timeout)?;
        child.ready()?;
        Ok(child)
    }

    /// Starts `cmd` without waiting for it to be ready (several children
    /// set up their communicators at the same time).
    fn spawn(mut cmd: Command, label: &str, timeout: Duration) -> Result<Child, MeasureError> {
        let failed = |why: String| MeasureError::Failed(format!("child process {label}: {why}"));
        let mut process = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot start it: {e}")))?;
        let stdout = process.stdout.take().expect("piped");
        let stderr = process.stderr.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Not a protocol line (NCCL_DEBUG writes to stdout): pass
                // it on to the parent's stderr.
                if !line.starts_with('{') {
                    collbench_core::diag::line(&line);
                    continue;
                }
                if tx.send(Line::Text(line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(Line::End);
        });
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = stderr_tail.clone();
        let (done, stderr_done) = mpsc::channel();
        std::thread::spawn(move || {
            keep_last_line(stderr, &tail);
            let _ = done.send(());
        });
        let child = Child {
            label: label.to_string(),
            stdin: process.stdin.take(),
            process,
            lines,
            stderr_tail,
            stderr_done,
            timeout,
            dead: None,
        };
        Ok(child)
    }

    /// Waits for the ready line.
    fn ready(&mut self) -> Result<(), MeasureError> {
        self.ready_by(Instant::now() + self.timeout)
    }

    /// Waits for the ready line until `deadline`.
    fn ready_by(&mut self, deadline: Instant) -> Result<(), MeasureError> {
        if let Some(why) = &self.dead {
            return Err(MeasureError::Failed(why.clone()));
        }
        match self.reply_by("start", deadline)? {
            Reply::Ready { .. } => Ok(()),
            other => Err(self.fail(format!("said {other:?} instead of ready"))),
        }
    }

    /// One repeat in the child.
    pub fn measure(&mut self, req: &Request) -> Measured {
        if let Some(why) = &self.dead {
            return Err(MeasureError::Failed(why.clone()));
        }
        let line = serde_json::to_string(req).expect("requests serialise");
        let sent = match self.stdin.as_mut() {
            Some(w) => writeln!(w, "{line}").and_then(|_| w.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if let Err(e) = sent {
            // It died: its exit status and last words say more than EPIPE.
            return Err(match self.reply("measure") {
                Err(e) => e,
                Ok(_) => self.fail(format!("cannot write to it: {e}")),
            });
        }
        match self.reply("measure")? {
            Reply::Sample(s) => Ok(s),
            Reply::Error(e) => Err(e),
            other => Err(self.fail(format!("said {other:?} instead of a sample"))),
        }
    }

    /// The next reply, within the timeout.
    fn reply(&mut self, what: &str) -> Result<Reply, MeasureError> {
        self.reply_by(what, Instant::now() + self.timeout)
    }

    /// The next reply, until `deadline`.
    fn reply_by(&mut self, what: &str, deadline: Instant) -> Result<Reply, MeasureError> {
        let started = Instant::now();
        let left = deadline.saturating_duration_since(started);
        let line = match self.lines.recv_timeout(left) {
            Ok(Line::Text(line)) => line,
            Ok(Line::End) | Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait_briefly();
                return Err(self.fail(format!("exited ({status}) during {what}")));
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(self.fail(format!(
                    "no answer within {:.0} s during {what}; killed it",
                    started.elapsed().as_secs_f64()
                )));
            }
        };
        serde_json::from_str(&line)
            .map_err(|e| self.fail(format!("said '{}' ({e})", truncate(&line, 80))))
    }

    /// The exit status, if the process ends within a moment.
    fn wait_briefly(&mut self) -> String {
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(s)) = self.process.try_wait() {
                return s.to_string();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "still running".to_string()
    }

    /// Marks the child dead (killing it), and the error in one line.
    fn fail(&mut self, why: String) -> MeasureError {
        let _ = self.process.kill();
        let _ = self.process.wait();
        // Its last words may still be in the pipe; a grandchild holding
        // the pipe open must not make this wait long.
        let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        let mut msg = format!("child process {}: {why}", self.label);
        if !tail.is_empty() {
            msg += &format!("; its last words: {}", truncate(&tail, 200));
        }
        self.dead = Some(msg.clone());
        MeasureError::Failed(msg)
    }
}

/// How long the old children of a renewal may take to end by themselves
/// before they are killed.
const RETIRE_GRACE: Duration = Duration::from_millis(300);

/// How long every child may take to end by itself when the search is
/// over (all of them at once) before the ones left are killed: what the
/// parent holds back from the budget for it ([`Children::TEARDOWN`]).
const FINAL_GRACE: Duration = Duration::from_secs(2);

/// Tells every child in `group` to end (its stdin closed, all of them
/// before any is waited for), waits for them until `grace` has passed,
/// and kills the ones still running.
///
/// All at once because a child job's rank 0 waits for its peers'
/// goodbyes: children ended one after another, in an order that differs
/// from host to host (each parent's map has its own), each waited for its
/// peer on the other host. With the gaps between repeats then uncharged
/// ([`crate::measure::WallClock`]), two emulated hosts with 28 children
/// each ended 21 s past `--budget`.
fn retire(group: &mut [Child], grace: Duration, reason: &str) {
    for child in group.iter_mut() {
        child.stdin.take();
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && group.iter_mut().any(|c| !c.exited()) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for child in group.iter_mut().filter(|c| c.dead.is_none()) {
        if !child.exited() {
            child.end(reason);
        }
    }
}

impl Child {
    /// Whether the process has ended.
    fn exited(&mut self) -> bool {
        matches!(self.process.try_wait(), Ok(Some(_)))
    }

    /// Ends the child (killed) for `reason`: every later request is
    /// answered at once with it.
    fn end(&mut self, reason: &str) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        self.dead = Some(reason.to_string());
    }
}

impl Drop for Child {
    /// Closes its stdin (it exits at the end of input); kills it if it
    /// does not end within a moment.
    fn drop(&mut self) {
        self.stdin.take();
        if self.dead.is_none() && self.wait_briefly() != "still running" {
            return;
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn keep_last_line(stderr: impl Read, tail: &Mutex<String>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        if !line.trim().is_empty() {
            if let Ok(mut t) = tail.lock() {
                *t = line;
            }
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
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
enum Role {
    /// The candidate, in its environment.
    Candidate,
    /// The default measured as its partner, in the default environment.
    DefaultPartner,
}

/// One child: the candidate environment it belongs to, and its side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    env: Vec<(String, String)>,
    role: Role,
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
    fn child(&mut self, key: Key) -> Result<&mut Child, MeasureError> {
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

/// The parent's [`Measurer`]: settings without `env` go to the in-process
/// measurer; a setting with `env` goes to its child, and the default
/// measured as its partner goes to that candidate's own default child
/// ([`Children`]), so both members of the pair are measured alike.
pub struct EnvFallback<'a> {
    inner: &'a mut dyn Measurer,
    children: Children,
    /// Under a launcher: a child's failure ends only its candidate
    /// ([`MeasureError::CandidateFailed`]).
    across: bool,
}

impl<'a> EnvFallback<'a> {
    /// Measures in process with `inner`, environment candidates in
    /// `children` (started already, or on first use).
    pub fn new(inner: &'a mut dyn Measurer, children: Children) -> EnvFallback<'a> {
        EnvFallback {
            inner,
            children,
            across: false,
        }
    }

    /// The same for one process of a job under a launcher, whose children
    /// form child jobs with the other processes' children: a child that
    /// dies, hangs or says something else fails its candidate alone
    /// ([`MeasureError::CandidateFailed`]), which the processes then end
    /// everywhere ([`Measurer::candidate_ended`]), never the search.
    pub fn across(inner: &'a mut dyn Measurer, children: Children) -> EnvFallback<'a> {
        EnvFallback {
            across: true,
            ..EnvFallback::new(inner, children)
        }
    }

    fn in_child(&mut self, key: Key, setting: &Setting, case: &Case, iters: u32) -> Measured {
        let start = Instant::now();
        let req = Request {
            setting: Setting {
                env: Vec::new(),
                ..setting.clone()
            },
            case: *case,
            iters,
        };
        let across = self.across;
        let mut sample = self
            .children
            .child(key)
            .and_then(|c| c.measure(&req))
            .map_err(|e| candidate_only(e, across, start))?;
        // The parent's wall time: the pipe round trip is part of the cost.
        sample.cost_us = sample.cost_us.max(start.elapsed().as_secs_f64() * 1e6);
        Ok(sample)
    }
}

/// Under a launcher (`across`), a child's failure is its candidate's
/// alone: it ends that candidate, charged the wall time since `start`,
/// not the search.
fn candidate_only(e: MeasureError, across: bool, start: Instant) -> MeasureError {
    match e {
        MeasureError::Failed(reason) if across => MeasureError::CandidateFailed {
            reason,
            cost_us: start.elapsed().as_secs_f64() * 1e6,
        },
        e => e,
    }
}

impl Measurer for EnvFallback<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        if setting.env.is_empty() {
            self.inner.measure(setting, case, iters)
        } else {
            let key = Key {
                env: setting.env.clone(),
                role: Role::Candidate,
            };
            self.in_child(key, setting, case, iters)
        }
    }

    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        if pair.setting.env.is_empty() && !pair.partner.env.is_empty() {
            let key = Key {
                env: pair.partner.env.clone(),
                role: Role::DefaultPartner,
            };
            self.in_child(key, pair.setting, case, iters)
        } else {
            self.measure(pair.setting, case, iters)
        }
    }

    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        if !candidate.env.is_empty() {
            self.children.end(&candidate.env, reason);
        }
    }

    /// A candidate's environment gets two fresh children
    /// ([`Children::renew`]); a setting measured in process has none.
    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        if candidate.env.is_empty() {
            return Ok(None);
        }
        let (across, start) = (self.across, Instant::now());
        self.children
            .renew(&candidate.env)
            .map(Some)
            .map_err(|e| candidate_only(e, across, start))
    }
}
