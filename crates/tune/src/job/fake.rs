//! The test hook `--test-fake MODE`: the scripted fake ([`crate::fake`])
//! in place of NCCL in parent and children alike, so the whole path of a
//! job runs in tests without a GPU. In the children,
//! `NCCL_BUFFSIZE=8388608` takes 10% less time, `NCCL_NSOCKS_PERTHREAD=2
//! NCCL_SOCKET_NTHREADS=2` 20% less, any other value none; [`FakeMode`]
//! says what each mode changes (a fault in the child it names, aging,
//! no gain, a spread over process pairs). Under a launcher the fake
//! children of one child job agree on every repeat's time over their own
//! control plane, as NCCL's ranks wait for each other in a collective.
//!
//! A fault that ends a child is a value ([`TestFault`]) its server hands
//! the CLI, which ends the process; nothing here exits.

use super::options::FakeMode;
use crate::child::GENERATION_VAR;
use crate::fake::{FakeMeasurer, Truth};
use crate::measure::{MeasureError, Measured, Measurer};
use crate::setting::{Case, Setting};
use collbench_core::Bootstrap;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// A scripted fault that ends a fake child (the CLI says its line and
/// exits with a peer failure's code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestFault {
    /// A renewed child (`renew1`) dies as it starts.
    RenewedDiesAsItStarts,
    /// The child dies mid-search (`die`, `die1`).
    Dies,
}

impl TestFault {
    /// Its line for people.
    pub fn line(self) -> &'static str {
        match self {
            TestFault::RenewedDiesAsItStarts => "test fault: this renewed child dies as it starts",
            TestFault::Dies => "test fault: this child dies",
        }
    }
}

/// The scripted time of a setting on the fake: 250 GB/s plus 10 us,
/// every in-process candidate 30% slower, and in a child process
/// `env_factor` times that.
pub fn fake_truth(env_factor: f64) -> Truth {
    Box::new(move |s, c| {
        let base = c.bytes as f64 / 250e3 + 10.0;
        Some(if s.is_default() {
            base * env_factor
        } else {
            base * 1.3
        })
    })
}

/// The faster environments of the fake, by `var`'s values.
fn env_factor(var: impl Fn(&str) -> Option<String>) -> f64 {
    let is = |k: &str, v: &str| var(k).as_deref() == Some(v);
    if is("NCCL_BUFFSIZE", "8388608") {
        0.9
    } else if is("NCCL_NSOCKS_PERTHREAD", "2") && is("NCCL_SOCKET_NTHREADS", "2") {
        0.8
    } else {
        1.0
    }
}

/// The parent's fake, taking `pause` of wall time per repeat.
pub fn fake_parent(pause: Duration) -> Paced<FakeMeasurer> {
    Paced {
        inner: FakeMeasurer::new(1, fake_truth(1.0)).noise(0.01),
        pause,
    }
}

/// What a faulty child does once it has answered two repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Die,
    Hang,
    /// Dies as it starts, when renewed (checked before serving).
    DieRenewed,
}

/// The fault `mode` makes this child (of rank `rank`) have, if any.
fn fault_of(mode: FakeMode, rank: usize) -> Option<Fault> {
    let var = |k: &str| std::env::var(k).ok();
    let buffsize = var("NCCL_BUFFSIZE").as_deref() == Some("8388608");
    let socket_2x2_of_rank_1 = rank == 1 && env_factor(var) == 0.8;
    let renewed = var(GENERATION_VAR).is_some_and(|g| g != "0");
    match mode {
        FakeMode::Die if buffsize => Some(Fault::Die),
        FakeMode::Hang if buffsize => Some(Fault::Hang),
        FakeMode::Die1 if socket_2x2_of_rank_1 => Some(Fault::Die),
        FakeMode::Hang1 if socket_2x2_of_rank_1 => Some(Fault::Hang),
        FakeMode::Renew1 if socket_2x2_of_rank_1 && renewed => Some(Fault::DieRenewed),
        _ => None,
    }
}

/// The fake child's noise seed: from its rank, its `NCCL_*` environment
/// and its process pair ([`GENERATION_VAR`]), so each child of a search
/// has its own noise and every run of a test the same (a process-id seed
/// made one test's verdict on NCCL's default spelled out change from run
/// to run).
fn child_seed(rank: usize) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("NCCL_") || k == GENERATION_VAR)
        .collect();
    vars.sort();
    let mut h = DefaultHasher::new();
    (rank, vars).hash(&mut h);
    h.finish()
}

/// `spread`'s factor for this child's process pair ([`GENERATION_VAR`]):
/// the same on every rank, so the ranks of one pair agree.
fn spread() -> f64 {
    let generation: usize = std::env::var(GENERATION_VAR)
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(0);
    [1.0, 1.12, 0.9, 1.08, 0.92][generation % 5]
}

/// A child's fake: the truth for its own environment, the fault its mode
/// asks for in the child it names, and its child job's control plane.
pub struct FakeChild<'a> {
    inner: FakeMeasurer,
    fault: Option<Fault>,
    /// Slowdown per repeat answered (`aging`).
    aging: f64,
    answered: u32,
    job: &'a dyn Bootstrap,
    /// Wall time per repeat, as the parent's fake.
    pause: Duration,
    /// Set when the scripted death comes: the server ends unheard.
    died: Rc<Cell<bool>>,
}

impl<'a> FakeChild<'a> {
    /// The fake of a child of child job `job` (a world of one under a
    /// one-process `tune`); a renewed child that `mode` makes die as it
    /// starts is that fault instead.
    pub fn new(
        mode: FakeMode,
        job: &'a dyn Bootstrap,
        pause: Duration,
    ) -> Result<FakeChild<'a>, TestFault> {
        let fault = fault_of(mode, job.rank());
        if fault == Some(Fault::DieRenewed) {
            return Err(TestFault::RenewedDiesAsItStarts);
        }
        let factor = match env_factor(|k| std::env::var(k).ok()) {
            _ if mode == FakeMode::Flat => 1.0,
            f if mode == FakeMode::Spread && f < 1.0 => f * spread(),
            f => f,
        };
        Ok(FakeChild {
            // No drift: the fake's drift is per process, while a real
            // machine's (clocks, temperature) is shared by parent and
            // children alike.
            inner: FakeMeasurer::new(child_seed(job.rank()), fake_truth(factor))
                .noise(0.01)
                .drift(0.0),
            fault,
            aging: if mode == FakeMode::Aging { 0.005 } else { 0.0 },
            answered: 0,
            job,
            pause,
            died: Rc::new(Cell::new(false)),
        })
    }

    /// Whether the scripted death has come (read by the server between
    /// requests).
    pub fn death(&self) -> Rc<Cell<bool>> {
        self.died.clone()
    }
}

impl Measurer for FakeChild<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        if self.answered >= 2 {
            match self.fault {
                Some(Fault::Die) => {
                    self.died.set(true);
                    return Err(MeasureError::Failed(TestFault::Dies.line().into()));
                }
                Some(_) => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                None => {}
            }
        }
        std::thread::sleep(self.pause);
        let slower = 1.0 + self.aging * f64::from(self.answered);
        self.answered += 1;
        let mut sample = self.inner.measure(setting, case, iters)?;
        sample.time_us *= slower;
        if self.job.world_size() > 1 {
            // As a collective: as slow as the slowest rank, and no answer
            // while a peer is gone.
            let agreed = self
                .job
                .all_max(&[sample.time_us])
                .map_err(child_job_failed)?;
            sample.time_us = agreed[0];
        }
        Ok(sample)
    }
}

/// A peer failure in a child's job, as the child's measure error.
pub fn child_job_failed(f: collbench_core::PeerFailure) -> MeasureError {
    MeasureError::Failed(format!("its child job: {}", f.message))
}

/// The fake with wall time per repeat, so a test can kill a process
/// mid-search.
pub struct Paced<M> {
    inner: M,
    pause: Duration,
}

impl<M: Measurer> Measurer for Paced<M> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        std::thread::sleep(self.pause);
        self.inner.measure(setting, case, iters)
    }
}

/// Opens the parent's fake ([`fake_parent`]) in place of NCCL's
/// measurer: no communicator, the job's ranks (two for one process, as
/// NCCL's smallest communicator).
pub struct FakeMeasurers {
    /// Wall time per repeat.
    pub pause: Duration,
}

impl super::Measurers for FakeMeasurers {
    fn install(&mut self) -> Result<(), super::TuneError> {
        Ok(())
    }

    fn open<'c>(
        &'c mut self,
        control: &'c dyn Bootstrap,
        _candidates: &dyn Fn(usize) -> Vec<Setting>,
    ) -> Result<super::Opened<'c>, super::TuneError> {
        Ok(super::Opened {
            measurer: Box::new(fake_parent(self.pause)),
            world_size: control.world_size().max(2),
            communicators: 0,
        })
    }
}
