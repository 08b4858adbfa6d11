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

use crate::measure::{MeasureError, Measured, Measurer, Sample};
use crate::setting::{Case, Setting};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod children;
mod fallback;

pub use children::{Children, Readiness, Spawn, GENERATION_VAR};
pub use fallback::EnvFallback;

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
    output: impl Write,
) -> Result<(), String> {
    serve_until(measurer, input, output, &|| false).map(|_| ())
}

/// [`serve`], ending unheard (`Ok(true)`) when `ended()` says so after a
/// request: the test fake's scripted death, which no reply may follow.
pub fn serve_until(
    measurer: &mut dyn Measurer,
    input: impl BufRead,
    mut output: impl Write,
    ended: &dyn Fn() -> bool,
) -> Result<bool, String> {
    let mut say = |r: &Reply| -> Result<(), String> {
        let line = serde_json::to_string(r).map_err(|e| format!("cannot encode a reply: {e}"))?;
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
        if ended() {
            return Ok(true);
        }
        say(&reply)?;
    }
    Ok(false)
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
