//! `job::run` in one process, as the CLI calls it: typed options, a world
//! of one, the fake in place of NCCL (`FakeMeasurers`) and scripted child
//! processes for the environment candidates. The budget is the whole
//! command's: the setup and the end come out of it.

use collbench_core::{Collective, SingleProcess};
use collbench_tune::child::Spawn;
use collbench_tune::job::{
    self, FakeMeasurers, Note, PlanOptions, PortBook, Sink, Surroundings, TransportChoice,
    TuneError, TuneOptions,
};
use collbench_tune::plan::Transport;
use collbench_tune::{End, Progress};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Children that get ready and answer every request: 90 us with
/// `NCCL_BUFFSIZE=8388608`, 100 us otherwise.
fn script_children(_: PortBook) -> Result<Spawn, TuneError> {
    Ok(Box::new(|env: &[(String, String)], _| {
        let script = r#"echo '{"ready":{"pid":1}}'; while read l; do t=100; [ "$NCCL_BUFFSIZE" = 8388608 ] && t=90; echo "{\"sample\":{\"time_us\":$t,\"cost_us\":1000,\"algo_proto\":null}}"; done"#;
        let mut c = Command::new("sh");
        c.args(["-c", script])
            .env_remove("NCCL_BUFFSIZE")
            .envs(env.iter().map(|(k, v)| (k, v)));
        c
    }))
}

/// What the job told its sink.
#[derive(Default)]
struct Heard {
    notes: Vec<String>,
    progress: usize,
    armed: bool,
}

impl Sink for Heard {
    fn arm_stop(&mut self) -> Arc<AtomicBool> {
        self.armed = true;
        Arc::new(AtomicBool::new(false))
    }
    fn progress(&mut self, _: &Progress) {
        self.progress += 1;
    }
    fn note(&mut self, note: Note<'_>) {
        self.notes.push(format!("{note:?}"));
    }
}

fn options(budget: Duration) -> TuneOptions {
    TuneOptions {
        plan: PlanOptions {
            ops: vec![Collective::AllGather],
            max_channels: Some(4),
            env: Vec::new(),
            transport: TransportChoice::Given(Transport::SingleHost),
        },
        sizes: vec![1 << 20],
        budget,
        child_timeout: Some(Duration::from_secs(10)),
        fake: None,
    }
}

fn run(budget: Duration, sink: &mut Heard) -> Result<collbench_tune::TuneReport, TuneError> {
    let at = Surroundings {
        control: &SingleProcess,
        hosts: 1,
        bind: "127.0.0.1".into(),
        timeout_s: 30,
        started: Instant::now(),
        spawner: &script_children,
    };
    let mut fake = FakeMeasurers {
        pause: Duration::ZERO,
    };
    job::run(&options(budget), &at, &mut fake, sink)
}

#[test]
fn one_process_searches_within_what_the_setup_left_of_the_budget() {
    let mut heard = Heard::default();
    let report = run(Duration::from_secs(20), &mut heard).unwrap();
    assert_eq!(report.end, End::Complete);
    assert!(heard.armed && heard.progress > 0);
    // The children's end (2 s) and their setup came out of the 20 s.
    assert!(report.budget_us <= 18e6, "{}", report.budget_us);
    assert!(report.spent_us <= report.budget_us);
    assert!(
        heard
            .notes
            .iter()
            .any(|n| n.contains("ChildrenStarting") && n.contains("processes: None")),
        "{:?}",
        heard.notes
    );
}

#[test]
fn a_budget_the_setup_and_end_take_whole_is_a_failure_that_says_so() {
    let e = run(Duration::from_secs(1), &mut Heard::default()).unwrap_err();
    assert!(
        matches!(&e, TuneError::Failed(m) if m.contains("raise --budget")),
        "{e}"
    );
}
