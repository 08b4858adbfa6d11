//! The control plane on 127.0.0.1, ranks as threads of this test.

use collbench_launch::{Control, LaunchError, LaunchOptions, World};
use std::thread;
use std::time::{Duration, Instant};

/// A port that was free a moment ago.
fn free_port() -> u16 {
    World::free_loopback_port().unwrap()
}

fn world(rank: usize, n: usize, port: u16, token: &str) -> World {
    World::on_loopback(rank, n, port, token)
}

/// A rank in a thread that joins with a 10 s timeout and waits at one
/// barrier.
fn barrier_rank(w: World) -> thread::JoinHandle<Result<Result<(), LaunchError>, LaunchError>> {
    thread::spawn(move || Control::connect(&w, &args(10)).map(|c| c.barrier()))
}

/// Joins as `w` with a 5 s timeout, which must be refused because of
/// `what`; the error line.
fn refused(w: &World, what: &str) -> String {
    match Control::connect(w, &args(5)) {
        Ok(_) => panic!("{what} must be refused"),
        Err(e) => e.to_string(),
    }
}

fn args(timeout_s: u64) -> LaunchOptions {
    LaunchOptions {
        timeout_s,
        ..LaunchOptions::default()
    }
}

/// Runs `body` on `n` ranks (threads) and returns each rank's result.
fn run_ranks<T: Send + 'static>(
    n: usize,
    timeout_s: u64,
    body: impl Fn(usize, Result<Control, LaunchError>) -> T + Send + Sync + Clone + 'static,
) -> Vec<T> {
    let port = free_port();
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let body = body.clone();
            thread::spawn(move || {
                body(
                    rank,
                    Control::connect(&world(rank, n, port, "job"), &args(timeout_s)),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn barrier_gather_broadcast_all_gather_with_4_ranks() {
    let results = run_ranks(4, 10, |rank, control| {
        let control = control.unwrap();
        assert_eq!((control.rank(), control.world_size()), (rank, 4));
        control.barrier().unwrap();
        let gathered = control.gather(vec![rank as u8; rank + 1]).unwrap();
        let root_data = (rank == 0).then(|| b"unique-id".to_vec());
        let broadcast = control.broadcast(root_data).unwrap();
        let all = control.all_gather(format!("r{rank}").into_bytes()).unwrap();
        control.barrier().unwrap();
        (gathered, broadcast, all)
    });
    let expected_all: Vec<Vec<u8>> = (0..4).map(|r| format!("r{r}").into_bytes()).collect();
    for (rank, (gathered, broadcast, all)) in results.into_iter().enumerate() {
        match rank {
            0 => assert_eq!(
                gathered.unwrap(),
                vec![vec![0], vec![1, 1], vec![2, 2, 2], vec![3, 3, 3, 3]]
            ),
            _ => assert_eq!(gathered, None),
        }
        assert_eq!(broadcast, b"unique-id");
        assert_eq!(all, expected_all);
    }
}

#[test]
fn many_calls_in_a_row_stay_in_step() {
    let results = run_ranks(3, 10, |rank, control| {
        let control = control.unwrap();
        let mut sum = 0usize;
        for i in 0..200 {
            let parts = control.all_gather(vec![(rank + i) as u8]).unwrap();
            sum += parts.iter().map(|p| p[0] as usize).sum::<usize>();
            // Gathers return at once on non-root ranks: they run ahead.
            control.gather(vec![i as u8]).unwrap();
        }
        sum
    });
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
}

#[test]
fn single_process_needs_no_socket() {
    let w = World::discover_from(&LaunchOptions::default(), &|_: &str| None, "h").unwrap();
    let control = Control::connect(&w, &LaunchOptions::default()).unwrap();
    control.barrier().unwrap();
    assert_eq!(control.all_gather(vec![1]).unwrap(), vec![vec![1]]);
    assert_eq!(control.broadcast(Some(vec![2])).unwrap(), vec![2]);
}

#[test]
fn wrong_token_and_wrong_world_size_are_refused() {
    let port = free_port();
    let root = barrier_rank(world(0, 2, port, "job-a"));
    thread::sleep(Duration::from_millis(200));
    let stray = refused(&world(1, 2, port, "job-b"), "a wrong token");
    assert!(
        stray.contains("refused") && stray.contains("wrong job token"),
        "{stray}"
    );
    let mut other = world(1, 3, port, "job-a");
    other.world_size = 3;
    let e = refused(&other, "a wrong world size");
    assert!(e.contains("world of 3"), "{e}");
    // The right rank still joins the job.
    let good = Control::connect(&world(1, 2, port, "job-a"), &args(10)).unwrap();
    good.barrier().unwrap();
    root.join().unwrap().unwrap().unwrap();
}

#[test]
fn duplicate_rank_is_refused() {
    let port = free_port();
    let root = barrier_rank(world(0, 3, port, "job"));
    let first = barrier_rank(world(1, 3, port, "job"));
    thread::sleep(Duration::from_millis(500));
    let e = refused(&world(1, 3, port, "job"), "a duplicate rank");
    assert!(e.contains("already joined"), "{e}");
    let last = Control::connect(&world(2, 3, port, "job"), &args(10)).unwrap();
    last.barrier().unwrap();
    first.join().unwrap().unwrap().unwrap();
    root.join().unwrap().unwrap().unwrap();
}

#[test]
fn a_rank_that_never_arrives_is_named_by_rank_0_and_the_others() {
    let port = free_port();
    let start = Instant::now();
    let root = thread::spawn(move || {
        Control::connect(&world(0, 3, port, "job"), &args(2))
            .err()
            .unwrap()
    });
    let one = thread::spawn(move || {
        Control::connect(&world(1, 3, port, "job"), &args(2))
            .err()
            .unwrap()
    });
    let root_error = root.join().unwrap();
    let one_error = one.join().unwrap();
    assert!(start.elapsed() < Duration::from_secs(2 + 5));
    match &root_error {
        LaunchError::MissingRanks {
            missing, joined, ..
        } => {
            assert_eq!(missing, &[2]);
            assert_eq!(joined.iter().map(|h| h.rank).collect::<Vec<_>>(), [0, 1]);
        }
        other => panic!("expected MissingRanks, got {other}"),
    }
    assert!(
        root_error
            .to_string()
            .starts_with("rank 2 did not join within 2 s"),
        "{root_error}"
    );
    assert!(
        one_error.to_string().contains("rank 2 did not join"),
        "{one_error}"
    );
}

#[test]
fn rank_0_that_never_arrives_is_a_clear_error() {
    let port = free_port();
    let start = Instant::now();
    let e = Control::connect(&world(1, 2, port, "job"), &args(1))
        .err()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(1 + 5));
    assert!(
        e.to_string().contains("could not join rank 0 at 127.0.0.1"),
        "{e}"
    );
}

#[test]
fn a_rank_that_disconnects_mid_way_is_named_by_everyone_within_the_timeout() {
    let timeout_s = 3;
    let start = Instant::now();
    let results = run_ranks(4, timeout_s, |rank, control| {
        let control = control.unwrap();
        control.barrier().unwrap();
        if rank == 3 {
            control.crash_for_tests();
            return None;
        }
        // Pending on every rank when rank 3 dies; then later calls fail too.
        let first = control.barrier().unwrap_err().to_string();
        let later = control.all_gather(vec![1]).unwrap_err().to_string();
        Some((first, later))
    });
    assert!(
        start.elapsed() < Duration::from_secs(timeout_s + 5),
        "{:?}",
        start.elapsed()
    );
    for (rank, result) in results.into_iter().enumerate().take(3) {
        let (first, later) = result.unwrap();
        assert!(
            first.contains("rank 3 on host host3 disconnected"),
            "rank {rank}: {first}"
        );
        assert_eq!(first, later, "rank {rank}");
    }
}

#[test]
fn abort_names_the_aborting_rank_everywhere() {
    let results = run_ranks(3, 10, |rank, control| {
        let control = control.unwrap();
        if rank == 2 {
            control.abort("NCCL error: unhandled system error");
        }
        control.barrier().unwrap_err().to_string()
    });
    for message in results {
        assert!(
            message.contains("rank 2 on host host2 aborted: NCCL error"),
            "{message}"
        );
        assert_eq!(message.matches("aborted").count(), 1, "{message}");
    }
}

#[test]
fn ranks_making_different_calls_fail_instead_of_hanging() {
    let results = run_ranks(2, 5, |rank, control| {
        let control = control.unwrap();
        if rank == 0 {
            control.barrier()
        } else {
            control.all_gather(vec![]).map(drop)
        }
        .unwrap_err()
        .to_string()
    });
    for message in results {
        assert!(message.contains("same control-plane calls"), "{message}");
    }
}

#[test]
fn failure_hook_runs_once_on_failure() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let results = run_ranks(2, 5, |rank, control| {
        let control = control.unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        control.on_failure(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        control.barrier().unwrap();
        if rank == 1 {
            control.crash_for_tests();
            return 1;
        }
        let _ = control.barrier();
        let _ = control.barrier();
        calls.load(Ordering::SeqCst)
    });
    assert_eq!(results[0], 1);
}

#[test]
fn orderly_exit_is_not_a_failure_but_a_late_call_says_who_left() {
    let results = run_ranks(2, 5, |rank, control| {
        let control = control.unwrap();
        control.barrier().unwrap();
        if rank == 1 {
            drop(control);
            return None;
        }
        thread::sleep(Duration::from_millis(300));
        assert_eq!(control.failure(), None, "a goodbye is not a failure");
        Some(control.barrier().unwrap_err().to_string())
    });
    let message = results[0].clone().unwrap();
    assert!(
        message.contains("rank 1 on host host1 left before barrier #2"),
        "{message}"
    );
}

#[test]
fn through_the_bootstrap_trait_calls_and_failures_are_the_same() {
    use collbench_core::Bootstrap;
    let results = run_ranks(3, 10, |rank, control| {
        let control = control.unwrap();
        let job: &dyn Bootstrap = &control;
        assert_eq!((job.rank(), job.world_size()), (rank, 3));
        let all = job.all_gather(vec![rank as u8]).unwrap();
        let gathered = job.gather(vec![10 + rank as u8]).unwrap();
        let id = job.broadcast((rank == 0).then(|| b"id".to_vec())).unwrap();
        if rank == 2 {
            control.abort("disk on fire");
        }
        let failure = job.all_gather(vec![]).unwrap_err();
        (all, gathered, id, failure.to_string())
    });
    for (rank, (all, gathered, id, failure)) in results.into_iter().enumerate() {
        assert_eq!(all, vec![vec![0], vec![1], vec![2]]);
        match rank {
            0 => assert_eq!(gathered, Some(vec![vec![10], vec![11], vec![12]])),
            _ => assert_eq!(gathered, None),
        }
        assert_eq!(id, b"id");
        assert!(
            failure.contains("rank 2 on host host2 aborted: disk on fire"),
            "rank {rank}: {failure}"
        );
    }
}

fn at(case: u32, iteration: u32, phase: collbench_core::Phase) -> collbench_core::Progress {
    collbench_core::Progress {
        case,
        iteration,
        phase,
    }
}

#[test]
fn heartbeats_carry_progress_to_rank_0_with_host_and_age() {
    use collbench_core::Phase;
    // A 2 s timeout: heartbeats every 0.5 s.
    let beat = Duration::from_millis(500);
    let results = run_ranks(3, 2, move |rank, control| {
        let control = control.unwrap();
        control.publish_progress(at(2, rank as u32, Phase::Wait));
        control.barrier().unwrap();
        thread::sleep(beat * 3);
        let first = control.progress_of_all();
        thread::sleep(beat * 2);
        let later = control.progress_of_all();
        if rank == 1 {
            control.publish_progress(at(3, 0, Phase::Issue));
        }
        control.barrier().unwrap();
        thread::sleep(beat * 3);
        let moved = control.progress_of_all();
        let root = control.root_progress();
        control.barrier().unwrap();
        (first, later, moved, root)
    });
    // The others see rank 0 alone, named as rank 0 names itself (its
    // welcome says so), heard in time.
    for (first, later, moved, root) in &results[1..] {
        assert!(first.is_none() && later.is_none() && moved.is_none());
        let root = root.as_ref().expect("rank 0 as the others hear it");
        assert_eq!((root.rank, root.host.as_str()), (0, "host0"));
        assert_eq!(root.progress, Some(at(2, 0, Phase::Wait)));
        assert_eq!(root.heard, collbench_core::Heard::InTime);
    }
    let (first, later, moved, root) = &results[0];
    assert!(root.is_none(), "rank 0 has the whole table instead");
    let (first, later, moved) = (
        first.as_ref().unwrap(),
        later.as_ref().unwrap(),
        moved.as_ref().unwrap(),
    );
    assert_eq!(first.len(), 3);
    for (rank, entry) in first.iter().enumerate() {
        assert_eq!(entry.rank, rank);
        assert_eq!(entry.host, format!("host{rank}"));
        assert_eq!(entry.progress, Some(at(2, rank as u32, Phase::Wait)));
        assert_eq!(entry.heard, collbench_core::Heard::InTime);
    }
    // The same word keeps aging; a new word starts again from zero.
    assert!(
        later[1].unchanged_for >= first[1].unchanged_for + beat,
        "{first:?} {later:?}"
    );
    assert_eq!(moved[1].progress, Some(at(3, 0, Phase::Issue)));
    assert!(
        moved[1].unchanged_for < later[1].unchanged_for,
        "{later:?} {moved:?}"
    );
    assert_eq!(moved[2].progress, later[2].progress);
}

#[test]
fn a_world_of_one_sees_its_own_progress_and_its_own_abort() {
    use collbench_core::{Bootstrap, Phase};
    let w = World::discover_from(&LaunchOptions::default(), &|_: &str| None, "solo").unwrap();
    let control = Control::connect(&w, &LaunchOptions::default()).unwrap();
    let job: &dyn Bootstrap = &control;
    job.publish_progress(at(0, 9, Phase::Check));
    let table = job.progress_of_all().unwrap();
    assert_eq!(table.len(), 1);
    assert_eq!(table[0].host, "solo");
    assert_eq!(table[0].progress, Some(at(0, 9, Phase::Check)));
    assert_eq!(job.failure(), None);
    let reason = "all_reduce 64 MiB iteration 7: ranks 3 never entered";
    job.abort_job(&collbench_core::PeerFailure::stuck(reason));
    assert_eq!(job.failure().unwrap().message, reason);
    assert_eq!(
        job.failure().unwrap().kind,
        collbench_core::FailureKind::Stuck
    );
    assert_eq!(job.all_gather(vec![1]).unwrap_err().message, reason);
}

/// Every rank's pending call (and `failure`) says exactly what the rank
/// that called `abort_job` said, whichever rank that was, and every rank's
/// `failure` has its kind (a stuck collective), which the words do not
/// give away: they carry no "stuck collective" prefix.
fn abort_job_from(aborter: usize) {
    use collbench_core::{Bootstrap, FailureKind, PeerFailure};
    let reason = format!(
        "all_reduce 1 MiB iteration 3: rank 1 (host host1) never entered; rank {aborter} gave up"
    );
    let expected = reason.clone();
    let results = run_ranks(3, 10, move |rank, control| {
        let control = control.unwrap();
        control.barrier().unwrap();
        if rank == aborter {
            // The others are waiting in the next barrier by now.
            thread::sleep(Duration::from_millis(300));
            control.abort_job(&PeerFailure::stuck(reason.clone()));
        }
        let pending = control.barrier().unwrap_err().to_string();
        let later = control.gather(vec![]).unwrap_err().to_string();
        let failure = Bootstrap::failure(&control);
        (pending, later, failure)
    });
    for (rank, (pending, later, failure)) in results.into_iter().enumerate() {
        assert_eq!(pending, expected, "rank {rank}");
        assert_eq!(later, expected, "rank {rank}");
        let failure = failure.expect("a failure");
        assert_eq!(failure.message, expected, "rank {rank}");
        assert_eq!(failure.kind, FailureKind::Stuck, "rank {rank}");
    }
}

#[test]
fn abort_job_on_rank_0_stops_everyone_with_its_reason_verbatim() {
    abort_job_from(0);
}

#[test]
fn abort_job_on_another_rank_goes_through_rank_0_verbatim() {
    abort_job_from(2);
}
