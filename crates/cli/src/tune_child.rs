//! `collbench tune`'s child processes (docs/tune.md, section 3): how the
//! parent starts them (its own binary and flags, plus the hidden
//! `--serve-measure`, with the candidate's environment) and what a child
//! runs (`collbench_tune::child::serve` over its stdin and stdout).
//!
//! The hidden `--test-fake MODE` replaces NCCL with the scripted fake in
//! parent and children alike, so the whole path runs in tests without a
//! GPU: in the children, `NCCL_BUFFSIZE=8388608` takes 10% less time and
//! any other value none; MODE `die` or `hang` makes that child exit or
//! stop answering after two repeats; MODE `aging` makes every child 0.5%
//! slower with every repeat it has answered (a stand-in for state a
//! process gathers, such as what it has allocated and touched: both
//! members of a pair must be measured in processes with the same
//! history); MODE `flat` makes no candidate faster (the defaults win).

use crate::exit::{Failure, Outcome};
use crate::tune_cmd::TuneArgs;
use collbench_tune::child::{serve, Spawn};
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::Measurer;
use std::process::Command;
use std::time::Duration;

/// How long a child may take to start (its communicators) or to answer
/// one repeat: above NCCL's own collective timeout in the child (60 s).
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(90);

/// The parent's way of starting a child: this binary with the parent's own
/// arguments and `--serve-measure`, the parent's environment plus `env`.
pub fn spawner() -> Result<Spawn, Failure> {
    let exe = std::env::current_exe().map_err(|e| {
        Failure::new(
            Outcome::TuneFailed,
            format!("cannot find collbench's own binary to start child processes: {e}"),
        )
    })?;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    Ok(Box::new(move |env: &[(String, String)]| {
        let mut cmd = Command::new(&exe);
        cmd.args(&argv).arg("--serve-measure");
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd
    }))
}

/// Runs as a child: answers the parent's requests until its stdin ends.
pub fn serve_measure(a: &TuneArgs) -> Result<Outcome, Failure> {
    let failed = |e: String| Failure::new(Outcome::TuneFailed, format!("child process: {e}"));
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    let mut measurer: Box<dyn Measurer> = match &a.test_fake {
        Some(mode) => Box::new(FakeChild::new(mode)?),
        None => return crate::tune_cmd::serve_nccl(a, stdin, stdout),
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
/// process `NCCL_BUFFSIZE=8388608` 10% faster.
pub fn fake_truth(buffsize: Option<String>) -> Truth {
    Box::new(move |s, c| {
        let base = c.bytes as f64 / 250e3 + 10.0;
        Some(if !s.is_default() {
            base * 1.3
        } else if buffsize.as_deref() == Some("8388608") {
            base * 0.9
        } else {
            base
        })
    })
}

/// The parent's fake measurer for `--test-fake`.
pub fn fake_parent(mode: &str) -> Result<FakeMeasurer, Failure> {
    check_mode(mode)?;
    Ok(FakeMeasurer::new(1, fake_truth(None)).noise(0.01))
}

fn check_mode(mode: &str) -> Result<(), Failure> {
    match mode {
        "ok" | "die" | "hang" | "aging" | "flat" => Ok(()),
        other => Err(Failure::usage(format!(
            "--test-fake must be ok, die, hang, aging or flat (got {other})"
        ))),
    }
}

/// A child's fake: the truth for its own NCCL_BUFFSIZE, and the fault
/// its mode asks for in the child with the candidate's environment.
struct FakeChild {
    inner: FakeMeasurer,
    fault: Option<String>,
    /// Slowdown per repeat answered (`aging`).
    aging: f64,
    answered: u32,
}

impl FakeChild {
    fn new(mode: &str) -> Result<FakeChild, Failure> {
        check_mode(mode)?;
        // `flat`: no candidate is faster, the defaults win everywhere.
        let buffsize = std::env::var("NCCL_BUFFSIZE")
            .ok()
            .filter(|_| mode != "flat");
        let faulty = buffsize.as_deref() == Some("8388608") && matches!(mode, "die" | "hang");
        Ok(FakeChild {
            // No drift: the fake's drift is per process, while a real
            // machine's (clocks, temperature) is shared by parent and
            // children alike.
            inner: FakeMeasurer::new(std::process::id().into(), fake_truth(buffsize))
                .noise(0.01)
                .drift(0.0),
            fault: faulty.then(|| mode.to_string()),
            aging: if mode == "aging" { 0.005 } else { 0.0 },
            answered: 0,
        })
    }
}

impl Measurer for FakeChild {
    fn measure(
        &mut self,
        setting: &collbench_tune::Setting,
        case: &collbench_tune::Case,
        iters: u32,
    ) -> Result<collbench_tune::Sample, collbench_tune::MeasureError> {
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
        let slower = 1.0 + self.aging * f64::from(self.answered);
        self.answered += 1;
        let mut sample = self.inner.measure(setting, case, iters)?;
        sample.time_us *= slower;
        Ok(sample)
    }
}
