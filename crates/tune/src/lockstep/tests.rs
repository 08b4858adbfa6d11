use super::*;
use crate::fake::FakeMeasurer;
use collbench_core::bootstrap::TwoProcesses;
use collbench_core::Collective;

fn sample(time_us: f64, cost_us: f64) -> Measured {
    Ok(Sample {
        time_us,
        cost_us,
        algo_proto: None,
    })
}

fn word(result: Measured) -> Word {
    Word {
        result,
        stop: false,
    }
}

#[test]
fn the_slowest_time_and_dearest_cost_are_everyones() {
    let got = agreed(&[word(sample(10.0, 50.0)), word(sample(12.0, 40.0))]).unwrap();
    assert_eq!((got.time_us, got.cost_us), (12.0, 50.0));
}

#[test]
fn a_failure_beats_unsupported_and_names_its_rank() {
    let words = [
        word(sample(10.0, 50.0)),
        word(Err(MeasureError::Unsupported("no NVLS".into()))),
        word(Err(MeasureError::Failed("NCCL error".into()))),
    ];
    assert_eq!(
        agreed(&words),
        Err(MeasureError::Failed("rank 2: NCCL error".into()))
    );
    assert_eq!(
        agreed(&words[..2]),
        Err(MeasureError::Unsupported("rank 1: no NVLS".into()))
    );
}

#[test]
fn a_stop_anywhere_stops_everyone() {
    let parts: Vec<Vec<u8>> = [false, true]
        .iter()
        .map(|&stop| {
            serde_json::to_vec(&Word {
                result: sample(1.0, 1.0),
                stop,
            })
            .unwrap()
        })
        .collect();
    let w: Word = serde_json::from_slice(&combine(&parts).unwrap()).unwrap();
    assert!(w.stop);
}

#[test]
fn the_peers_slower_sample_is_the_one_the_search_sees() {
    let peer = serde_json::to_vec(&word(sample(1e6, 1.0))).unwrap();
    let two = TwoProcesses {
        peer: Some(peer),
        failure: None,
    };
    let mut fake = FakeMeasurer::new(1, Box::new(|_, _| Some(10.0)));
    let (stop, agreed) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut m = Lockstep::new(&mut fake, &two, &stop, &agreed);
    let case = Case {
        op: Collective::AllReduce,
        bytes: 1 << 20,
    };
    let s = m.measure(&Setting::default(), &case, 4).unwrap();
    assert_eq!(s.time_us, 1e6);
    assert!(m.peer_failure().is_none());
    assert!(!agreed.load(Ordering::SeqCst));
}

#[test]
fn a_candidate_failure_on_one_rank_is_everyones_with_all_reasons_and_the_dearest_time() {
    let died = "child process with X=1: exited (exit status: 3)";
    let broke = "child process with X=1: the child job lost rank 1";
    let failed = |reason: &str, cost_us: f64| MeasureError::CandidateFailed {
        reason: reason.into(),
        cost_us,
    };
    // Rank 1 waited out its child's deadline: every process charges that.
    let words = [
        word(Err(failed(broke, 5.0))),
        word(Err(failed(died, 30e6))),
        word(sample(1.0, 2.0)),
        word(Err(MeasureError::Unsupported("no NVLS".into()))),
    ];
    assert_eq!(
        agreed(&words),
        Err(failed(&format!("rank 0: {broke}; rank 1: {died}"), 30e6))
    );
}

#[test]
fn a_reason_every_rank_gives_is_already_agreed() {
    let r = "rank 1: died";
    assert_eq!(joint_reason(&[(0, r), (1, r)], 2), r);
    assert_eq!(
        joint_reason(&[(0, r), (2, r)], 3),
        format!("ranks 0, 2: {r}")
    );
    let many: Vec<String> = (0..5).map(|k| format!("why {k}")).collect();
    let reasons: Vec<(usize, &str)> = many
        .iter()
        .enumerate()
        .map(|(k, m)| (k, m.as_str()))
        .collect();
    assert_eq!(
        joint_reason(&reasons, 8),
        "rank 0: why 0; rank 1: why 1; rank 2: why 2; and 2 more"
    );
}

#[test]
fn outcomes_fail_where_any_rank_failed() {
    let parts = vec![
        vec![None, Some("no ready line".to_string()), None],
        vec![None, None, Some("exited".to_string())],
    ];
    assert_eq!(
        combine_outcomes(&parts),
        [
            None,
            Some("rank 0: no ready line".to_string()),
            Some("rank 1: exited".to_string())
        ]
    );
}

/// Ends every candidate it is told of; fails the one named as a candidate.
struct Ends {
    ended: Vec<(Setting, String)>,
}

impl Measurer for Ends {
    fn measure(&mut self, s: &Setting, _: &Case, _: u32) -> Measured {
        if s.is_default() {
            sample(1.0, 1.0)
        } else {
            Err(MeasureError::candidate_failed("mine"))
        }
    }

    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        self.ended.push((candidate.clone(), reason.into()));
    }
}

#[test]
fn the_measurer_hears_of_the_candidate_ended_even_from_its_partners_repeat() {
    let peer = serde_json::to_vec(&word(Err(MeasureError::candidate_failed("peer")))).unwrap();
    let two = TwoProcesses {
        peer: Some(peer),
        failure: None,
    };
    let mut m = Ends { ended: Vec::new() };
    let (stop, agreed) = (AtomicBool::new(false), AtomicBool::new(false));
    let cand = Setting {
        channels: Some(4),
        ..Setting::default()
    };
    let case = Case {
        op: Collective::AllReduce,
        bytes: 1 << 20,
    };
    let mut lock = Lockstep::new(&mut m, &two, &stop, &agreed);
    let pair = InPair {
        setting: &Setting::default(),
        partner: &cand,
    };
    let got = lock.measure_in_pair(pair, &case, 1);
    // This process's own repeat (1 us) was the dearest.
    let failed = MeasureError::CandidateFailed {
        reason: "rank 1: peer".into(),
        cost_us: 1.0,
    };
    assert_eq!(got, Err(failed));
    drop(lock);
    assert_eq!(m.ended, [(cand, "rank 1: peer".to_string())]);
}
