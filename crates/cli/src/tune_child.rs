//! `collbench tune`'s child processes (docs/tune.md, section 3): how the
//! parent starts them (its own binary and flags, plus the hidden
//! `--serve-measure`, with the candidate's environment) and what a child
//! runs (`collbench_tune::child::serve` over its stdin and stdout).
//!
//! The hidden `--test-fake MODE` replaces NCCL with the scripted fake in
//! parent and children alike, so the whole path runs in tests without a
//! GPU: in the children, `NCCL_BUFFSIZE=8388608` takes 10% less time,
//! `NCCL_NSOCKS_PERTHREAD=2 NCCL_SOCKET_NTHREADS=2` 20% less, any other
//! value none; MODE `die` or `hang` makes the `NCCL_BUFFSIZE=8388608`
//! child exit or stop answering after two repeats; `die1` and `hang1` do
//! so to the 2x2 socket child of rank 1 only (under a launcher); `renew1`
//! makes that child exit as it starts when it is a renewed one (the fresh
//! processes of a confirmation, `collbench_tune::child::Children::renew`); MODE
//! `aging` makes every child 0.5% slower with every repeat it has
//! answered (a stand-in for state a process gathers, such as what it has
//! allocated and touched: both members of a pair must be measured in
//! processes with the same history); MODE `flat` makes no candidate
//! faster (the defaults win); MODE `spread` makes a faster candidate's
//! speed differ from one process pair to the next (0.9x-1.12x of its
//! figure, by the pair's number), as socket settings do on emulated
//! hosts, which the refinement answers with more pairs. Under a launcher
//! the fake children of one child job agree on every repeat's time over
//! their own control plane, as NCCL's ranks wait for each other in a
//! collective.

use crate::exit::{Failure, Outcome};
use crate::tune_cmd::TuneArgs;
use crate::tune_job_child::{self, bootstrap_of};
use collbench_core::Bootstrap;
use collbench_tune::child::{serve, Spawn, GENERATION_VAR};
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::Measurer;
use std::process::Command;
use std::time::Duration;

/// How long a child may take to start (its communicators) or to answer
/// one repeat: above NCCL's own collective timeout in the child (60 s).
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(90);

/// Extra variables of child number `k` (under a launcher: its child job).
pub type ChildVars = Box<dyn Fn(usize) -> Vec<(String, String)>>;

/// The parent's way of starting a child: this binary with the parent's own
/// arguments and `--serve-measure`, the parent's environment plus `env`.
pub fn spawner() -> Result<Spawn, Failure> {
    spawner_with(Box::new(|_| Vec::new()))
}

/// [`spawner`], with `vars(k)` added to child number `k`'s environment.
///
/// Every child starts with the CPU mask the calling thread has now (call
/// this before creating communicators): children renewed mid-search are
/// started from the NCCL backend's launching thread, which is pinned to
/// one CPU by then, and a child inherits its parent thread's mask for all
/// its threads, NCCL's proxy and socket threads included (on two emulated
/// hosts such a mask cost socket settings 3-7x their time).
pub fn spawner_with(vars: ChildVars) -> Result<Spawn, Failure> {
    let exe = std::env::current_exe().map_err(|e| {
        Failure::new(
            Outcome::TuneFailed,
            format!("cannot find collbench's own binary to start child processes: {e}"),
        )
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

/// Runs as a child: answers the parent's requests until its stdin ends.
pub fn serve_measure(a: &TuneArgs) -> Result<Outcome, Failure> {
    let failed = |e: String| Failure::new(Outcome::TuneFailed, format!("child process: {e}"));
    let job = tune_job_child::join_child_job(&a.launch.options()).map_err(failed)?;
    let control = bootstrap_of(&job);
    let stdin = std::io::stdin().lock();
    // Stdout unlocked: the last resort flushes it before it ends a child
    // held by a stuck peer, and would wait forever on a held lock.
    let stdout = std::io::stdout();
    let mut measurer: Box<dyn Measurer> = match &a.test_fake {
        Some(mode) => {
            let mut fake = FakeChild::new(mode, control)?;
            fake.pause = Duration::from_millis(a.test_repeat_ms.unwrap_or(0));
            if fake.fault.as_deref() == Some("renew") {
                crate::stdout::say("collbench: test fault: this renewed child dies as it starts");
                std::process::exit(3);
            }
            Box::new(fake)
        }
        None => {
            let place = tune_job_child::place_of(&job);
            return crate::tune_cmd::serve_nccl(a, control, place, stdin, stdout);
        }
    };
    ignore_ctrl_c();
    serve(measurer.as_mut(), stdin, stdout).map_err(failed)?;
    Ok(Outcome::TuneComplete)
}

/// Ctrl-C reaches the whole process group: the parent stops the search
/// and prints what it has, so a child must live on until the parent closes
/// its stdin (then it ends by itself). Call after the tuner plugin is
/// installed (that sets an environment variable; this starts a thread).
pub fn ignore_ctrl_c() {
    let _ = ctrlc::set_handler(|| {});
}

/// The scripted time of a setting on the fake (`--test-fake`): 250 GB/s
/// plus 10 us, every in-process candidate 30% slower, and in a child
/// process `env_factor` times that.
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

/// The parent's fake measurer for `--test-fake`.
pub fn fake_parent(mode: &str) -> Result<FakeMeasurer, Failure> {
    check_mode(mode)?;
    Ok(FakeMeasurer::new(1, fake_truth(1.0)).noise(0.01))
}

/// The `--test-fake` modes (see the module's comment).
const MODES: [&str; 9] = [
    "ok", "die", "hang", "die1", "hang1", "renew1", "aging", "flat", "spread",
];

fn check_mode(mode: &str) -> Result<(), Failure> {
    if MODES.contains(&mode) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "--test-fake must be one of {} (got {mode})",
        MODES.join(", ")
    )))
}

/// A child's fake: the truth for its own environment, the fault its mode
/// asks for in the child it names, and its child job's control plane.
struct FakeChild<'a> {
    inner: FakeMeasurer,
    fault: Option<String>,
    /// Slowdown per repeat answered (`aging`).
    aging: f64,
    answered: u32,
    job: &'a dyn Bootstrap,
    /// Wall time per repeat (`--test-repeat-ms`), as the parent's fake.
    pause: Duration,
}

/// Whether this child is the one `mode` makes fail.
fn faulty(mode: &str, rank: usize) -> bool {
    let var = |k: &str| std::env::var(k).ok();
    match mode {
        "die" | "hang" => var("NCCL_BUFFSIZE").as_deref() == Some("8388608"),
        "die1" | "hang1" => rank == 1 && env_factor(var) == 0.8,
        "renew1" => {
            let renewed = var(GENERATION_VAR).is_some_and(|g| g != "0");
            rank == 1 && env_factor(var) == 0.8 && renewed
        }
        _ => false,
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

impl<'a> FakeChild<'a> {
    fn new(mode: &str, job: &'a dyn Bootstrap) -> Result<FakeChild<'a>, Failure> {
        check_mode(mode)?;
        // `flat`: no candidate is faster, the defaults win everywhere.
        let factor = match env_factor(|k| std::env::var(k).ok()) {
            _ if mode == "flat" => 1.0,
            f if mode == "spread" && f < 1.0 => f * spread(),
            f => f,
        };
        Ok(FakeChild {
            // No drift: the fake's drift is per process, while a real
            // machine's (clocks, temperature) is shared by parent and
            // children alike.
            inner: FakeMeasurer::new(child_seed(job.rank()), fake_truth(factor))
                .noise(0.01)
                .drift(0.0),
            fault: faulty(mode, job.rank()).then(|| mode.trim_end_matches('1').to_string()),
            aging: if mode == "aging" { 0.005 } else { 0.0 },
            answered: 0,
            job,
            pause: Duration::ZERO,
        })
    }
}

impl Measurer for FakeChild<'_> {
    fn measure(
        &mut self,
        setting: &collbench_tune::Setting,
        case: &collbench_tune::Case,
        iters: u32,
    ) -> collbench_tune::Measured {
        if self.answered >= 2 {
            match self.fault.as_deref() {
                Some("die") => {
                    crate::stdout::say("collbench: test fault: this child dies");
                    std::process::exit(3);
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
                .map_err(tune_job_child::child_job_failed)?;
            sample.time_us = agreed[0];
        }
        Ok(sample)
    }
}
