//! Bookkeeping: the events NCCL reported while one case ran, turned into
//! that case's [`Explanation`]: the distinct (kernel, algorithm, protocol,
//! channels) choices over iterations and local ranks, and the ranks that
//! reported nothing.

use super::events::ProfilerEvent;
use collbench_core::{Explanation, KernelChoice};

/// A rank this process drove in the case: its rank in the communicator
/// (what NCCL's events carry) and in the whole job (what the record says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedRank {
    pub comm_rank: i64,
    pub global_rank: u64,
}

/// What NCCL says when a case produced no event at all.
pub const NO_EVENTS: &str = "NCCL reported no kernel for this case";

/// The kernel choice an event stands for.
pub fn kernel_choice(e: &ProfilerEvent) -> KernelChoice {
    KernelChoice {
        func: e.func.clone(),
        algo: e.algo.clone(),
        proto: e.proto.clone(),
        channels: e.channels.unwrap_or(0),
    }
}

/// The explanation of one case from the events drained after it ran on
/// `expected` ranks; `dropped` events were lost to a full buffer.
pub fn explain_case(
    events: &[ProfilerEvent],
    expected: &[ExpectedRank],
    dropped: u64,
) -> Explanation {
    let missing: Vec<u64> = expected
        .iter()
        .filter(|r| !events.iter().any(|e| e.rank == r.comm_rank))
        .map(|r| r.global_rank)
        .collect();
    let mut explanation =
        Explanation::from_kernels(events.iter().map(kernel_choice), missing, dropped);
    if explanation.kernels.is_empty() {
        explanation.unavailable = Some(NO_EVENTS.to_string());
    }
    explanation
}

/// Whether every expected rank has reported at least one event (the
/// drain can stop waiting).
pub fn all_reported(events: &[ProfilerEvent], expected: &[ExpectedRank]) -> bool {
    expected
        .iter()
        .all(|r| events.iter().any(|e| e.rank == r.comm_rank))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::events::EventKind;

    /// A recorded stream, one event per line:
    /// `rank coll|p2p func algo proto channels [peer]` (`-` for empty).
    fn stream(text: &str) -> Vec<ProfilerEvent> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let s = |i: usize| {
                    if f[i] == "-" {
                        String::new()
                    } else {
                        f[i].to_string()
                    }
                };
                let kind = if f[1] == "coll" {
                    EventKind::Coll
                } else {
                    EventKind::P2p
                };
                ProfilerEvent {
                    kind,
                    rank: f[0].parse().unwrap(),
                    nranks: Some(2),
                    comm_hash: 7,
                    func: s(2),
                    algo: s(3),
                    proto: s(4),
                    channels: f[5].parse().ok(),
                    warps: None,
                    count: 1024,
                    datatype: "ncclFloat32".into(),
                    seq_number: 0,
                    peer: f.get(6).map(|p| p.parse().unwrap()),
                    interface_version: 5,
                }
            })
            .collect()
    }

    fn ranks(n: i64) -> Vec<ExpectedRank> {
        (0..n)
            .map(|r| ExpectedRank {
                comm_rank: r,
                global_rank: 10 + r as u64,
            })
            .collect()
    }

    #[test]
    fn iterations_and_ranks_collapse_to_one_choice() {
        let events = stream(
            "0 coll AllReduce RING LL 1
             1 coll AllReduce RING LL 1
             0 coll AllReduce RING LL 1
             1 coll AllReduce RING LL 1",
        );
        let e = explain_case(&events, &ranks(2), 0);
        assert_eq!(e.kernels.len(), 1);
        assert_eq!(e.kernels[0].func, "AllReduce");
        assert_eq!(
            (e.algo_text(), e.proto_text(), e.channels_text()),
            ("RING".into(), "LL".into(), "1".into())
        );
        assert!(e.missing_ranks.is_empty());
        assert_eq!(e.unavailable, None);
        assert!(all_reported(&events, &ranks(2)));
    }

    #[test]
    fn grouped_send_recv_lists_both_kernels() {
        let events = stream(
            "0 p2p Send - - 2 1
             0 p2p Recv - - 2 1
             1 p2p Send - - 2 0
             1 p2p Recv - - 2 0",
        );
        let e = explain_case(&events, &ranks(2), 0);
        assert_eq!(e.kernels_text(), "Recv:-/-/2;Send:-/-/2");
        assert_eq!(e.algo_text(), "Recv+Send");
        assert_eq!(e.proto_text(), "-");
    }

    #[test]
    fn several_kernels_per_case_are_kept_apart() {
        // An alltoall from send/recv where peers got different channel
        // counts, and a collective that changed protocol between ranks.
        let events = stream(
            "0 p2p Send - - 1 0
             0 p2p Send - - 2 1
             0 p2p Recv - - 2 1
             1 coll AllReduce RING LL 4
             1 coll AllReduce RING LL128 4",
        );
        let e = explain_case(&events, &ranks(2), 0);
        assert_eq!(
            e.kernels_text(),
            "AllReduce:RING/LL/4;AllReduce:RING/LL128/4;Recv:-/-/2;Send:-/-/1;Send:-/-/2"
        );
        assert_eq!(e.proto_text(), "LL+LL128");
        assert_eq!(e.channels_text(), "4+2+1");
    }

    #[test]
    fn a_rank_without_events_is_named() {
        let events = stream("0 coll AllGather RING SIMPLE 24");
        let e = explain_case(&events, &ranks(2), 3);
        assert_eq!(e.kernels.len(), 1);
        assert_eq!(e.missing_ranks, vec![11]);
        assert_eq!(e.dropped_events, 3);
        assert!(!all_reported(&events, &ranks(2)));
    }

    #[test]
    fn no_events_at_all_says_so() {
        let e = explain_case(&[], &ranks(2), 0);
        assert!(e.kernels.is_empty());
        assert_eq!(e.unavailable.as_deref(), Some(NO_EVENTS));
        assert_eq!(e.missing_ranks, vec![10, 11]);
        assert_eq!(e.algo_text(), "-");
    }

    #[test]
    fn nvls_marks_busbw_as_overstated() {
        let events = stream(
            "0 coll AllReduce NVLS SIMPLE 16
             1 coll AllReduce NVLS SIMPLE 16",
        );
        let e = explain_case(&events, &ranks(2), 0);
        assert!(e.busbw_overstated);
        assert!(e.busbw_note.is_some());
        let ring = explain_case(&stream("0 coll AllReduce RING SIMPLE 16"), &ranks(1), 0);
        assert!(!ring.busbw_overstated);
    }

    #[test]
    fn p2p_without_a_channel_count_reads_as_zero() {
        // Profiler interface v2/v3 report no channels for send/recv.
        let e = explain_case(&stream("0 p2p Send - - ? 1"), &ranks(1), 0);
        assert_eq!(e.kernels[0].channels, 0);
    }
}
