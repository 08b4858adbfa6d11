use super::*;
use crate::cpu::CpuBackend;
use crate::timing::Timing;
use collbench_core::PeerFailure;
use collbench_core::SingleProcess;

/// Rank 0 of a job whose other process died before the first gather.
struct PeerDied;

impl Bootstrap for PeerDied {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        2
    }
    fn broadcast(&self, _: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        Err(PeerFailure::new("rank 1 on host h1 disconnected"))
    }
    fn gather(&self, _: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Err(PeerFailure::new("rank 1 on host h1 disconnected"))
    }
    fn all_gather(&self, _: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        Err(PeerFailure::new("rank 1 on host h1 disconnected"))
    }
}

fn small_plan() -> Plan {
    Plan {
        collectives: vec![Collective::AllReduce],
        min_bytes: 1024,
        max_bytes: 1024,
        timing: Timing {
            warmup_iters: 0,
            iters: 1,
            ..Timing::default()
        },
        ..Plan::default()
    }
}

#[test]
fn collectives_are_skipped_for_a_refused_traffic_or_a_world_not_a_power_of_two() {
    let refused = BackendError::Unsupported("no alltoallv here".into());
    assert_eq!(
        skip_reason(Collective::AllToAllV, 4, Some(&refused)).as_deref(),
        Some("skipping alltoallv: no alltoallv here")
    );
    assert_eq!(skip_reason(Collective::AllToAllV, 4, None), None);
    assert_eq!(
        skip_reason(Collective::HyperCube, 6, None).as_deref(),
        Some("hypercube: nRanks 6 is not a power of 2, skipping")
    );
    assert_eq!(skip_reason(Collective::HyperCube, 8, None), None);
    assert_eq!(skip_reason(Collective::AllReduce, 6, Some(&refused)), None);
}

#[test]
fn a_failure_becomes_an_error_by_its_kind_never_by_its_words() {
    // The watchdog's stop without the usual prefix, and a peer's
    // message that happens to start with it.
    let stuck = RunError::from(PeerFailure::stuck("rank 3 (host n2) never entered"));
    assert!(matches!(stuck, RunError::Stuck(_)), "{stuck:?}");
    let peer = RunError::from(PeerFailure::new("stuck collective: said a peer"));
    assert!(matches!(peer, RunError::Control(_)), "{peer:?}");
    assert_eq!(
        Stop::from_failure(PeerFailure::stuck("no prefix")),
        Stop::Stuck("no prefix".into())
    );
    assert_eq!(
        Stop::from_failure(PeerFailure::new("stuck collective: words")),
        Stop::Failed("stuck collective: words".into())
    );
}

#[test]
fn a_world_of_one_gives_rank_0_the_record() {
    let mut backend = CpuBackend::new(2, "h");
    let record = Runner::new(&mut backend, &SingleProcess, small_plan())
        .run(Record::new("collbench"), &mut NoObserver)
        .unwrap()
        .expect("rank 0 gets the record");
    assert_eq!(record.results.len(), 1);
    assert_eq!(record.settings.processes, 1);
    assert_eq!(record.devices.len(), 2);
}

#[test]
fn a_peer_failure_stops_the_run_as_a_control_error_naming_the_peer() {
    let mut backend = CpuBackend::new(1, "h");
    let e = Runner::new(&mut backend, &PeerDied, small_plan())
        .run(Record::new("collbench"), &mut NoObserver)
        .unwrap_err();
    assert!(
        matches!(&e, RunError::Control(m) if m.contains("rank 1 on host h1")),
        "{e:?}"
    );
}
