use super::*;
use crate::fake::FakeMeasurer;
use collbench_core::bootstrap::TwoProcesses;
use collbench_core::Collective;

fn sample(time_us: f64, cost_us: f64) -> Result<Sample, MeasureError> {
    Ok(Sample {
        time_us,
        cost_us,
        algo_proto: None,
    })
}

fn word(result: Result<Sample, MeasureError>) -> Word {
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
