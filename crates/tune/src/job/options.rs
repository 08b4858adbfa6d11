//! `tune`'s options, typed: what the CLI's flags become once
//! (`cli/src/cmd/tune.rs` converts and validates them), and all the job
//! reads. No string here is parsed again.

use crate::plan::{Transport, UserEnv};
use collbench_core::Collective;
use std::time::Duration;

/// What `collbench tune` was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneRequest {
    /// `--list-candidates`: print the plan, measure nothing.
    ListCandidates(PlanOptions),
    /// Search for settings that beat the defaults.
    Search(TuneOptions),
}

/// What picks the candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Ops to tune, in order, each one NCCL's tuner covers.
    pub ops: Vec<Collective>,
    /// Never try a setting that fixes more channels than this (at least 1).
    pub max_channels: Option<u32>,
    /// The user's own environment candidates (`--env`).
    pub env: Vec<UserEnv>,
    /// How the hosts talk.
    pub transport: TransportChoice,
}

/// `--transport`: given, or decided from the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportChoice {
    /// Decide from the hosts in the job, `NCCL_NET`, `NCCL_IB_DISABLE`
    /// and `/sys/class/infiniband`.
    Auto,
    /// The user's (`--transport`).
    Given(Transport),
}

/// Everything a search needs besides the job it runs in.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOptions {
    /// The candidates.
    pub plan: PlanOptions,
    /// Probe sizes (the `-b/-e/-f` sweep), one band each.
    pub sizes: Vec<u64>,
    /// Wall time the whole command may take, setup and end included.
    pub budget: Duration,
    /// How long a child process may take per answer, when a test sets it
    /// (otherwise the job's own deadline).
    pub child_timeout: Option<Duration>,
    /// The scripted fake in place of NCCL (tests), if asked for.
    pub fake: Option<FakeOptions>,
}

/// The test hook that replaces NCCL with the scripted fake in parent and
/// children alike (`crate::job::fake` says what each mode does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeOptions {
    /// Which script.
    pub mode: FakeMode,
    /// Wall time the fake takes per repeat, so a test can kill a process
    /// mid-search.
    pub repeat_pause: Duration,
}

/// The scripts of the fake (`--test-fake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeMode {
    /// The usual truth, no fault.
    Ok,
    /// The `NCCL_BUFFSIZE=8388608` child exits after two repeats.
    Die,
    /// The `NCCL_BUFFSIZE=8388608` child stops answering after two repeats.
    Hang,
    /// The 2x2 socket child of rank 1 exits after two repeats.
    Die1,
    /// The 2x2 socket child of rank 1 stops answering after two repeats.
    Hang1,
    /// The 2x2 socket child of rank 1 exits as it starts when renewed.
    Renew1,
    /// Every child 0.5% slower with every repeat it answered.
    Aging,
    /// No candidate is faster: the defaults win.
    Flat,
    /// A faster candidate's speed differs from one process pair to the next.
    Spread,
}

impl FakeMode {
    /// Every mode with its name on the command line.
    pub const ALL: [(&'static str, FakeMode); 9] = [
        ("ok", FakeMode::Ok),
        ("die", FakeMode::Die),
        ("hang", FakeMode::Hang),
        ("die1", FakeMode::Die1),
        ("hang1", FakeMode::Hang1),
        ("renew1", FakeMode::Renew1),
        ("aging", FakeMode::Aging),
        ("flat", FakeMode::Flat),
        ("spread", FakeMode::Spread),
    ];
}

impl std::str::FromStr for FakeMode {
    type Err = String;

    /// A mode by its name; the one line otherwise.
    fn from_str(s: &str) -> Result<FakeMode, String> {
        FakeMode::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, mode)| *mode)
            .ok_or_else(|| {
                let names: Vec<&str> = FakeMode::ALL.iter().map(|(n, _)| *n).collect();
                format!("--test-fake must be one of {} (got {s})", names.join(", "))
            })
    }
}
