use super::*;
use crate::ceiling::{Algorithm, Bottleneck, Ceiling};
use crate::explain::{Explanation, KernelChoice};
use crate::record::{CaseResult, Placement};
use crate::why::Finding;

const SOCKET_IB_DISABLED: &str =
    "nccl-tests__dexhunter-allreduce-experiments__allreduce-8node-32gpu-socket-ib-disabled-v2.6.4";

// The corpus reader and the InfiniBand hosts of why's own tests.
use crate::why::tests::{corpus, ib_hosts, kinds};

fn low_record() -> Record {
    let mut r = Record::new("nccl-tests");
    r.nccl_path = Some(corpus(SOCKET_IB_DISABLED));
    r.topology = Some(ib_hosts(8));
    let ceiling = Ceiling {
        busbw_gbps: 40.0,
        bottleneck: Bottleneck::Network,
        algorithm: Algorithm::Ring,
        why: "test".into(),
    };
    for (bytes, busbw) in [(1u64 << 20, 0.5), (256 << 20, 1.17), (1 << 30, 30.0)] {
        let mut c = CaseResult::float_sum("all_reduce", bytes);
        c.out_of_place = Some(Placement {
            busbw_gbps: busbw,
            ceiling: Some(ceiling.clone()),
            ..Placement::default()
        });
        r.results.push(c);
    }
    r
}

#[test]
fn annotate_marks_only_large_low_rows_and_the_footer_names_them() {
    let mut r = low_record();
    annotate(&mut r);
    let why_of = |i: usize| r.results[i].out_of_place.as_ref().unwrap().why.clone();
    assert!(why_of(0).is_empty(), "small rows are latency-bound");
    assert_eq!(kinds(&why_of(1)), ["transport fallback"]);
    assert!(why_of(2).is_empty(), "75% of the ceiling is not low");
    let text = footer(&r);
    assert!(
        text.starts_with("# why: all_reduce 256M out_of_place 3% under 40%"),
        "{text}"
    );
    assert!(
        text.contains("#  transport fallback: NCCL used NET/Socket"),
        "{text}"
    );
    // The record keeps the causes through JSON.
    let json = serde_json::to_string(&r).unwrap();
    let back: Record = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn annotate_prefers_the_channels_explain_saw() {
    let mut r = low_record();
    r.topology.as_mut().unwrap().nics[0].count = 4;
    r.nccl_path.as_mut().unwrap().causes.clear();
    r.nccl_path.as_mut().unwrap().net = Some("IB".into());
    let p = r.results[1].out_of_place.as_mut().unwrap();
    p.explain = Some(Box::new(Explanation::from_kernels(
        [KernelChoice::new("AllReduce", "RING", "SIMPLE", 1)],
        [],
        0,
    )));
    annotate(&mut r);
    let why = &r.results[1].out_of_place.as_ref().unwrap().why;
    assert!(
        why.iter().any(|c| c.finding
            == Finding::FewChannels {
                used: 1,
                default: Some(4)
            }),
        "{why:?}"
    );
}

#[test]
fn a_low_row_with_nothing_known_says_so() {
    let mut r = low_record();
    r.nccl_path = None;
    r.topology = None;
    annotate(&mut r);
    let text = footer(&r);
    assert!(text.contains("no cause collbench can show"), "{text}");
}
