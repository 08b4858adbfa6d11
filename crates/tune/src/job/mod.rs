//! `collbench tune`'s job: everything between the typed options and the
//! search ([`crate::tune`]), in one process or in every process of a job
//! under a launcher.
//!
//! The CLI converts its flags once into [`TuneOptions`]
//! (`cli/src/cmd/tune.rs`), finds where it runs ([`Surroundings`]: the
//! other processes as a [`Bootstrap`], how to start a child process) and
//! which measurer to open ([`Measurers`]: NCCL's, or the test fake's),
//! and calls [`run`]. `run` plans the candidates ([`plan`]), starts the
//! child processes of the environment candidates, opens the measurer,
//! charges the setup and the end to the budget (owned here alone:
//! `budget`), runs the search and returns its report, which the CLI
//! prints. Lines for people and the user's stop go through the CLI's
//! [`Sink`]; failures are [`TuneError`]s, which the CLI maps to exit
//! codes. A child process runs [`serve`] (or [`serve_fake`]).
//!
//! Under a launcher (`across`), every process runs the same search in
//! lock step ([`crate::lockstep`]); rank 0 decides the plan and shares
//! it, and environment candidates run in child jobs (`ports`).

mod across;
mod budget;
mod error;
mod facts;
pub mod fake;
mod one;
mod options;
mod ports;
mod serve;

pub use error::TuneError;
pub use facts::plan;
pub use fake::{FakeChild, FakeMeasurers, TestFault};
pub use options::{FakeMode, FakeOptions, PlanOptions, TransportChoice, TuneOptions, TuneRequest};
pub use ports::{child_timeout, PortBook};
pub use serve::{serve, serve_fake, Served};

use crate::child::Spawn;
use crate::measure::Measurer;
use crate::report::TuneReport;
use crate::search::Progress;
use crate::setting::Setting;
use collbench_core::Bootstrap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a child of a one-process `tune` may take to start (its
/// communicators) or to answer one repeat: above NCCL's own collective
/// timeout in the child (60 s).
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(90);

/// Where the job runs, as the CLI found it.
pub struct Surroundings<'a> {
    /// The processes of the job (a world of one for a one-process `tune`).
    pub control: &'a dyn Bootstrap,
    /// Distinct hosts of the job, as rank 0 counted them (the others'
    /// count is not read).
    pub hosts: usize,
    /// The address rank 0 listens on: the child jobs' ports are picked there.
    pub bind: String,
    /// The control plane's timeout (s): a child's deadline is below it.
    pub timeout_s: u64,
    /// When the command started: the budget is its whole wall time.
    pub started: Instant,
    /// Makes the spawner of child processes; under a launcher, child `k`
    /// meets its child job at the book's port `k`.
    pub spawner: &'a dyn Fn(PortBook) -> Result<Spawn, TuneError>,
}

/// The parent's measurer, opened.
pub struct Opened<'c> {
    /// The measurer.
    pub measurer: Box<dyn Measurer + 'c>,
    /// Ranks of its communicators.
    pub world_size: usize,
    /// Communicators it holds (each charged to the budget's end).
    pub communicators: usize,
}

/// What opens the parent's measurer: NCCL's (the CLI's, since this crate
/// does not talk to NCCL) or the fake's ([`fake::FakeMeasurers`]).
pub trait Measurers {
    /// Whatever must come before any thread starts (NCCL: the tuner
    /// plugin, which sets an environment variable).
    fn install(&mut self) -> Result<(), TuneError>;

    /// The measurer over `control`, with the communicators of
    /// `candidates(world_size)` made up front (charged to the budget as
    /// setup).
    fn open<'c>(
        &'c mut self,
        control: &'c dyn Bootstrap,
        candidates: &dyn Fn(usize) -> Vec<Setting>,
    ) -> Result<Opened<'c>, TuneError>;
}

/// A line for people about the job (rank 0's under a launcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note<'a> {
    /// `count` child processes start in each of `processes` processes
    /// (`None`: a one-process `tune`).
    ChildrenStarting {
        count: usize,
        processes: Option<usize>,
    },
    /// An environment candidate failed where only it is at fault; the
    /// search goes on.
    CandidateEnded {
        env: &'a [(String, String)],
        why: &'a str,
    },
}

/// Where the job's lines for people and the user's stop come from: the
/// CLI's terminal.
pub trait Sink {
    /// Arms the user's stop (Ctrl-C) and returns the flag the search
    /// polls; called after [`Measurers::install`].
    fn arm_stop(&mut self) -> Arc<AtomicBool>;
    /// Before each measurement (rank 0's under a launcher).
    fn progress(&mut self, p: &Progress);
    /// A line for people.
    fn note(&mut self, note: Note<'_>);
}

/// Runs the search of `options` where `at` says, with the measurer
/// `measurers` opens, and returns its report (every process of a job
/// returns the same one).
pub fn run(
    options: &TuneOptions,
    at: &Surroundings,
    measurers: &mut dyn Measurers,
    sink: &mut dyn Sink,
) -> Result<TuneReport, TuneError> {
    if at.control.world_size() > 1 {
        across::run(options, at, measurers, sink)
    } else {
        one::run(options, at, measurers, sink)
    }
}
