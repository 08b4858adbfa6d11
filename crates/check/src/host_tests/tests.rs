use super::*;
use collbench_runner::BackendError;

#[test]
fn nccl_hostid_names_the_host_before_the_hostname() {
    let env = |k: &str| (k == "NCCL_HOSTID").then(|| "emu1-2".to_string());
    assert_eq!(host_key(env, "node7"), "emu1-2");
    assert_eq!(host_key(|_| None, "node7"), "node7");
    assert_eq!(host_key(|_| Some(String::new()), "node7"), "node7");
}

#[test]
fn processes_on_one_host_share_it_and_its_ranks() {
    let keys: Vec<String> = ["a", "a", "b", "b", "a"].map(String::from).to_vec();
    let (hosts, of) = group_hosts(&keys, &[2, 2, 2, 2, 2]);
    assert_eq!(of, [0, 0, 1, 1, 0]);
    assert_eq!(hosts[0].name, "a");
    // Ranks 0-3 and 8-9: the label spans them.
    assert_eq!(hosts[0].ranks, 0..10);
    assert_eq!(hosts[1].ranks, 4..8);
    assert_eq!(hosts[1].label(), "b (ranks 4-7)");
}

#[test]
fn a_pair_is_as_fast_as_its_slowest_process_and_fails_with_any() {
    let part = |pair: Option<usize>, s: f64, error: Option<&str>| ProcessFigures {
        pair,
        size_bytes: 1 << 20,
        sendrecv_gbps: s,
        all_reduce_gbps: 2.0 * s,
        error: error.map(|reason| PairFailure::Join {
            reason: reason.into(),
        }),
    };
    let parts = [
        part(Some(0), 2.0, None),
        part(Some(0), 1.5, None),
        part(Some(1), 2.0, None),
        part(Some(1), 2.1, Some("ncclCommInitRank: remote error")),
        part(None, 0.0, None),
    ];
    let f = combine(3, &parts);
    assert_eq!(f[0].sendrecv_gbps, 1.5);
    assert_eq!(f[0].all_reduce_gbps, 3.0);
    assert_eq!(f[0].error, None);
    assert_eq!(
        f[1].outcome(),
        Err(PairFailure::Join {
            reason: "ncclCommInitRank: remote error".into()
        })
    );
    // A pair nobody reported (cannot happen in a healthy job).
    assert_eq!(f[2].outcome(), Err(PairFailure::Unreported));
}

#[test]
fn a_process_at_another_size_fails_its_pair() {
    let at = |pair: usize, size_bytes: u64| ProcessFigures {
        pair: Some(pair),
        size_bytes,
        sendrecv_gbps: 1.0,
        all_reduce_gbps: 1.0,
        error: None,
    };
    let f = combine(
        2,
        &[
            at(0, 4 << 20),
            at(1, 4 << 20),
            at(0, 64 << 20),
            at(1, 4 << 20),
        ],
    );
    assert_eq!(
        f[0].outcome(),
        Err(PairFailure::SizeMismatch {
            size_bytes: 64 << 20,
            rank0_bytes: 4 << 20
        })
    );
    assert_eq!(f[1].error, None);
}

/// Rank 0 of four processes on hosts h0..h3, the others played by the
/// test: each gives what rank 0 gives, on a host of its own.
struct FourHosts;

impl Bootstrap for FourHosts {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        4
    }
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        Ok(data.unwrap_or_default())
    }
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Ok(Some(vec![data; 4]))
    }
    /// Only the exchange of host names uses it.
    fn all_gather(&self, _data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        Ok((0..4)
            .map(|h| serde_json::to_vec(&(format!("h{h}"), 1, format!("h{h}"))).unwrap())
            .collect())
    }
}

/// A backend with the trait's `group`: it cannot test pairs. Nothing
/// else of it may run.
struct NoGroups;

impl Backend for NoGroups {
    fn info(&self) -> collbench_runner::BackendInfo {
        Default::default()
    }
    fn local_ranks(&self) -> usize {
        1
    }
    fn world_size(&self) -> usize {
        4
    }
    fn supports(&self, _: &collbench_runner::CaseSpec) -> Result<(), BackendError> {
        Ok(())
    }
    fn time(
        &mut self,
        _: &collbench_runner::CaseSpec,
        _: &collbench_runner::Timing,
    ) -> Result<collbench_runner::Measurement, BackendError> {
        unreachable!("a pair test ran without a group")
    }
    fn check(
        &mut self,
        _: &collbench_runner::CaseSpec,
        _: u64,
        _: bool,
    ) -> Result<u64, BackendError> {
        unreachable!("a pair test ran without a group")
    }
}

#[test]
fn a_backend_that_cannot_test_pairs_skips_them_in_one_line_naming_no_host() {
    let mut rounds = Vec::new();
    let e = run_host_tests(
        &mut NoGroups,
        &FourHosts,
        &Watchdog::default(),
        &HostTestPlan {
            size_bytes: 1 << 20,
            iters: Iterations {
                warmup: 1,
                timed: 1,
                explain: false,
            },
            fractions: Fractions {
                warn: 0.9,
                fail: 0.75,
            },
            groups: None,
            hooks: TestHooks::default(),
        },
        &mut |line| rounds.push(line.to_string()),
    )
    .unwrap_err();
    let skipped = match &e {
        CheckError::HostTestsSkipped(s) => Some(s),
        _ => None,
    };
    assert_eq!(
        skipped,
        Some(&HostTestsSkipped::GroupsUnsupported(
            "this backend cannot run tests on a group of the job's processes".into()
        ))
    );
    // `check`'s note is this one line, and no round was reported.
    let note = format!("host tests skipped: {e:#}");
    assert!(!note.contains('\n') && !note.contains("h0"), "{note}");
    assert!(rounds.is_empty(), "{rounds:?}");
}
