//! The watchdog in one process: CPU rank threads made to misbehave by the
//! fault hooks, the one line that names them, and the run's end (no hang)
//! when the job stops for any reason.

use collbench_core::bootstrap::TwoProcesses;
use collbench_core::stuck::STUCK;
use collbench_core::{Bootstrap, Collective, PeerFailure, Record, SingleProcess};
use collbench_runner::cpu::CpuBackend;
use collbench_runner::run::NoObserver;
use collbench_runner::{
    Backend, BackendError, BackendInfo, CaseSpec, Fault, FaultKind, Measurement, Plan, RunError,
    Runner, Stop, Timing, Watchdog,
};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_millis(400);

/// all_reduce of 1 KiB, then 2 KiB: cases 0 (out of place), 1 (in
/// place), 2 and 3; 2 warm-up and 5 timed iterations each.
fn plan() -> Plan {
    Plan {
        collectives: vec![Collective::AllReduce],
        min_bytes: 1024,
        max_bytes: 2048,
        step: collbench_core::size::Step::Factor(2),
        timing: Timing {
            warmup_iters: 2,
            iters: 5,
            ..Timing::default()
        },
        ..Plan::default()
    }
}

fn fault(kind: FaultKind, spec: &str) -> Fault {
    Fault::parse(kind, spec).unwrap()
}

fn watchdog(faults: Vec<Fault>) -> Watchdog {
    Watchdog {
        deadline: Some(DEADLINE),
        faults,
        ..Watchdog::default()
    }
}

/// Runs the plan on `ranks` CPU rank threads; the error and how long it
/// took.
fn run(ranks: usize, control: &dyn Bootstrap, w: Watchdog) -> (Result<(), RunError>, Duration) {
    let mut backend = CpuBackend::new(ranks, "h1");
    let start = Instant::now();
    let r = Runner::new(&mut backend, control, plan())
        .with_watchdog(w)
        .run(Record::new("collbench"), &mut NoObserver)
        .map(drop);
    (r, start.elapsed())
}

fn stuck_line(r: Result<(), RunError>) -> String {
    match r {
        Err(RunError::Stuck(line)) => line,
        other => panic!("expected a stuck collective, got {other:?}"),
    }
}

#[test]
fn a_rank_that_stops_calling_is_named_with_its_host_and_place() {
    let (r, took) = run(
        4,
        &SingleProcess,
        watchdog(vec![fault(FaultKind::StopCalling, "2:1:3")]),
    );
    assert_eq!(
        stuck_line(r),
        format!("{STUCK}all_reduce 1 KiB in place iteration 3: rank 2 (host h1) never entered; 3 ranks waiting (no progress for 0.4 s)")
    );
    assert!(took < DEADLINE + Duration::from_secs(3), "{took:?}");
}

#[test]
fn a_rank_that_stalls_inside_a_call_is_named_and_a_short_stall_is_not() {
    let (r, _) = run(
        3,
        &SingleProcess,
        watchdog(vec![fault(FaultKind::Sleep(Duration::ZERO), "0:2:6")]),
    );
    assert_eq!(
        stuck_line(r),
        format!("{STUCK}all_reduce 2 KiB iteration 6: rank 0 (host h1) stuck inside the call; 2 ranks waiting (no progress for 0.4 s)")
    );
    // Asleep for less than the deadline: slow, not stuck.
    let mut w = watchdog(vec![fault(FaultKind::Sleep(Duration::ZERO), "1:0:1:0")]);
    w.deadline = Some(Duration::from_secs(5));
    let (r, _) = run(3, &SingleProcess, w);
    r.unwrap();
}

#[test]
fn several_ranks_behind_read_as_ranges() {
    let faults = (3..7)
        .map(|r| fault(FaultKind::StopCalling, &format!("{r}:0:0")))
        .collect();
    let line = stuck_line(run(8, &SingleProcess, watchdog(faults)).0);
    assert_eq!(
        line,
        format!("{STUCK}all_reduce 1 KiB iteration 0: ranks 3-6 (host h1) never entered; 4 ranks waiting (no progress for 0.4 s)")
    );
}

/// A job whose other processes are gone or have decided: `failure()`
/// says so from the start; calls work (a world of two whose gathers give
/// rank 0 its own data twice).
fn failed(failure: PeerFailure) -> TwoProcesses {
    TwoProcesses {
        peer: None,
        failure: Some(failure),
    }
}

#[test]
fn a_failed_job_frees_a_waiting_rank_and_keeps_the_control_planes_message() {
    // Rank 1 stops calling; the others wait at the barrier until the
    // control plane says a peer died: that message, not a stuck line.
    let hook = vec![fault(FaultKind::StopCalling, "1:0:0")];
    let dead = failed(PeerFailure::new("rank 3 on host n7 disconnected"));
    let (r, took) = run(
        2,
        &dead,
        Watchdog {
            faults: hook.clone(),
            ..Watchdog::default()
        },
    );
    match r {
        Err(RunError::Control(m)) => assert_eq!(m, "rank 3 on host n7 disconnected"),
        other => panic!("{other:?}"),
    }
    assert!(took < Duration::from_secs(3), "{took:?}");
    // Another process's watchdog decided: its line, as a stuck collective.
    let line = "stuck collective: all_reduce 1 KiB iteration 0: rank 3 (host n7) never entered; 3 ranks waiting (no progress for 300 s)";
    let (r, _) = run(
        2,
        &failed(PeerFailure::stuck(line)),
        Watchdog {
            faults: hook,
            ..Watchdog::default()
        },
    );
    assert_eq!(stuck_line(r), line);
}

/// A backend stuck where nothing can interrupt it (it ignores the watch).
struct Deaf;

impl Backend for Deaf {
    fn info(&self) -> BackendInfo {
        BackendInfo::default()
    }
    fn local_ranks(&self) -> usize {
        1
    }
    fn world_size(&self) -> usize {
        1
    }
    fn supports(&self, _: &CaseSpec) -> Result<(), BackendError> {
        Ok(())
    }
    fn time(&mut self, _: &CaseSpec, _: &Timing) -> Result<Measurement, BackendError> {
        loop {
            std::thread::park();
        }
    }
    fn check(&mut self, _: &CaseSpec, _: u64, _: bool) -> Result<u64, BackendError> {
        Ok(0)
    }
}

#[test]
fn a_run_that_cannot_be_interrupted_gets_the_last_resort() {
    let (tx, rx) = mpsc::channel::<Stop>();
    let tx = std::sync::Mutex::new(tx);
    let w = Watchdog {
        deadline: Some(DEADLINE),
        last_resort: Some(std::sync::Arc::new(move |stop: &Stop| {
            let _ = tx.lock().unwrap().send(stop.clone());
        })),
        grace: Some(Duration::from_millis(200)),
        ..Watchdog::default()
    };
    // The run never returns: it lives on a thread of its own, leaked.
    std::thread::spawn(move || {
        let mut deaf = Deaf;
        let _ = Runner::new(&mut deaf, &SingleProcess, plan())
            .with_watchdog(w)
            .run(Record::new("collbench"), &mut NoObserver);
    });
    let stop = rx
        .recv_timeout(DEADLINE + Duration::from_secs(5))
        .expect("the last resort runs");
    assert_eq!(
        stop,
        Stop::Stuck(format!("{STUCK}all_reduce 1 KiB iteration 0: its only rank is there: the hang is inside the library or a link (no progress for 0.4 s)"))
    );
}
