use super::*;
use proptest::prelude::*;

fn spread(s: f64) -> Traffic {
    Traffic::Generated { spread: s }
}

#[test]
fn generated_matches_nccl_tests_by_hand() {
    // 4 ranks, 4096 bytes each: distances 0..3 over a distance sum of 6,
    // rounded down to 16 bytes: 0, 672, 1360, 2048.
    let t = Traffic::default();
    let row: Vec<u64> = (0..4).map(|d| t.peer_bytes(0, d, 4, 4096)).collect();
    assert_eq!(row, vec![0, 672, 1360, 2048]);
    // Rank 2 sends most to rank 1 (distance 3).
    assert_eq!(t.peer_bytes(2, 1, 4, 4096), 2048);
    // Half spread blends with the uniform 1024.
    let row: Vec<u64> = (0..4)
        .map(|d| spread(0.5).peer_bytes(0, d, 4, 4096))
        .collect();
    assert_eq!(row, vec![512, 848, 1184, 1536]);
    let row: Vec<u64> = (0..4)
        .map(|d| spread(0.0).peer_bytes(0, d, 4, 4096))
        .collect();
    assert_eq!(row, vec![1024; 4]);
    // One rank keeps the whole (aligned) total.
    assert_eq!(t.peer_bytes(0, 0, 1, 1000), 992);
}

#[test]
fn counts_follow_get_coll_byte_count() {
    // -b 4096 float on 4 ranks: count 1024, per-peer param 256, total 4096
    // bytes split as above: 4080 bytes = 1020 floats sent and received.
    let c = Traffic::default().counts(4096, 4, 4);
    assert_eq!(c.param_count, 256);
    assert_eq!((c.send_count, c.recv_count), (1020, 1020));
    assert_eq!(c.size_bytes(4), 4080);
    // Small sizes round to nothing, as in nccl-tests.
    let c = Traffic::default().counts(8, 4, 2);
    assert_eq!((c.param_count, c.send_count, c.size_bytes(4)), (0, 0, 0));
}

#[test]
fn spread_env_values() {
    assert_eq!(Traffic::generated(None).unwrap(), spread(1.0));
    assert_eq!(Traffic::generated(Some("0.25")).unwrap(), spread(0.25));
    assert_eq!(Traffic::generated(Some("7")).unwrap(), spread(1.0));
    assert_eq!(Traffic::generated(Some("-1")).unwrap(), spread(0.0));
    let e = Traffic::generated(Some("lots")).unwrap_err().to_string();
    assert!(e.contains("NCCL_TESTS_ALLTOALLV_SPREAD='lots'"), "{e}");
}

const M3: &str = "100  200  150\n50   100  75\n\n300  150  200\n";

#[test]
fn matrix_parses_and_aligns() {
    let m = TrafficMatrix::parse("m.txt", M3, None).unwrap();
    assert_eq!(m.dim(), 3);
    assert_eq!((m.get(0, 0), m.get(0, 1), m.get(0, 2)), (96, 192, 144));
    assert_eq!((m.get(1, 2), m.get(2, 0)), (64, 288));
    let scaled = TrafficMatrix::parse("m.txt", M3, Some("2")).unwrap();
    assert_eq!(scaled.get(0, 0), 192);
    let t = Traffic::Matrix(m);
    // Largest sender: rank 2 (288+144+192 = 624 B); largest receiver:
    // rank 1 (192+96+144 = 432 B). param_count is 0 in matrix mode.
    let c = t.counts(1 << 20, 4, 3);
    assert_eq!((c.param_count, c.send_count, c.recv_count), (0, 156, 108));
    // A larger matrix serves fewer ranks (its top-left corner).
    let c = t.counts(1 << 20, 1, 2);
    assert_eq!((c.send_count, c.recv_count), (288, 288));
}

#[test]
fn matrix_errors_are_one_line_each() {
    let err = |text: &str| TrafficMatrix::parse("t.txt", text, None).unwrap_err();
    assert!(matches!(err(""), TrafficError::Empty { .. }));
    assert!(matches!(err("\n  \n"), TrafficError::Empty { .. }));
    assert!(matches!(
        err("1 2\n3\n"),
        TrafficError::RaggedRow {
            line: 2,
            expected: 2,
            got: 1,
            ..
        }
    ));
    assert!(matches!(
        err("1 2\n3 4\n5 6\n"),
        TrafficError::NotSquare {
            rows: 3,
            cols: 2,
            ..
        }
    ));
    assert!(matches!(
        err("1 x\n3 4\n"),
        TrafficError::BadValue {
            line: 1,
            column: 2,
            ..
        }
    ));
    assert!(matches!(err("1 -2\n3 4\n"), TrafficError::BadValue { .. }));
    assert!(matches!(err("1 inf\n3 4\n"), TrafficError::BadValue { .. }));
    assert!(matches!(
        err("1 1e400\n3 4\n"),
        TrafficError::BadValue { .. }
    ));
    for e in [err(""), err("1 2\n3\n"), err("1 x\n3 4\n")] {
        let s = e.to_string();
        assert!(!s.contains('\n') && s.contains("t.txt"), "{s}");
    }
}

#[test]
fn matrix_job_checks() {
    let t = Traffic::Matrix(TrafficMatrix::parse("m.txt", M3, None).unwrap());
    assert!(t.check_job(3, 1024, 1024).is_ok());
    assert!(matches!(
        t.check_job(4, 1024, 1024),
        Err(TrafficError::TooSmall {
            dim: 3,
            world_size: 4,
            ..
        })
    ));
    assert!(matches!(
        t.check_job(3, 8, 1024),
        Err(TrafficError::Sweep { .. })
    ));
    assert!(matches!(
        t.check_job(3, 512, 512),
        Err(TrafficError::MaxBytes { needed: 624, .. })
    ));
    // The generated pattern fits any job.
    assert!(Traffic::default().check_job(5, 8, 1 << 20).is_ok());
}

#[test]
fn peer_counts_layout() {
    let p = Traffic::default().peer_counts(256, 4, 4);
    // Rank 0 sends 0, 168, 340, 512 floats to ranks 0..3.
    assert_eq!(
        (0..4).map(|d| p.count(0, d)).collect::<Vec<_>>(),
        vec![0, 168, 340, 512]
    );
    assert_eq!(
        (0..4).map(|d| p.send_displ(0, d)).collect::<Vec<_>>(),
        vec![0, 0, 168, 508]
    );
    // Rank 1 receives from 0 (168), 1 (0), 2 (512), 3 (340), in rank order.
    assert_eq!(
        (0..4).map(|s| p.recv_displ(1, s)).collect::<Vec<_>>(),
        vec![0, 168, 168, 680]
    );
    assert_eq!(p.source(1, 0), Some((0, 0)));
    // Rank 2 first sends 340 floats to rank 0 (distance 2), then rank 1's.
    assert_eq!(p.source(1, 168), Some((2, 340)));
    // Rank 3's segment to rank 1 follows what it sends to ranks 0 and 1.
    assert_eq!(p.source(1, 680), Some((3, p.send_displ(3, 1))));
    assert_eq!(p.source(1, 1020), None);
}

fn matrix_text(n: usize, cells: &[u32]) -> String {
    cells
        .chunks(n)
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

proptest! {
    /// Generated traffic is balanced: every rank sends and receives the
    /// same total, never more than asked, in 16-byte pieces.
    #[test]
    fn generated_is_balanced(n in 1usize..12, total in 0u64..(1 << 34), s in 0.0f64..=1.0) {
        let t = spread(s);
        let sent: Vec<u64> = (0..n).map(|r| (0..n).map(|d| t.peer_bytes(r, d, n, total)).sum()).collect();
        let recvd: Vec<u64> = (0..n).map(|r| (0..n).map(|src| t.peer_bytes(src, r, n, total)).sum()).collect();
        for r in 0..n {
            prop_assert_eq!(sent[r], sent[0]);
            prop_assert_eq!(recvd[r], sent[0]);
            for d in 0..n {
                prop_assert_eq!(t.peer_bytes(r, d, n, total) % 16, 0);
            }
        }
        prop_assert!(sent[0] <= total);
        prop_assert!(total - sent[0] < 16 * n as u64 + 16);
    }

    /// Every element a rank sends lands exactly once, at the receiver's
    /// slot for it, and nothing else is claimed.
    #[test]
    fn sources_are_a_bijection(n in 1usize..7, cells in proptest::collection::vec(0u32..200, 49), elt in prop::sample::select(vec![1usize, 2, 4, 8])) {
        let text = matrix_text(n, &cells[..n * n]);
        let t = Traffic::Matrix(TrafficMatrix::parse("p.txt", &text, None).unwrap());
        let p = t.peer_counts(0, elt, n);
        let mut seen = std::collections::HashSet::new();
        for r in 0..n {
            let recv = p.recv_total(r);
            for j in 0..recv + 3 {
                match p.source(r, j) {
                    Some((src, idx)) => {
                        prop_assert!(j < recv);
                        prop_assert!(idx >= p.send_displ(src, r));
                        prop_assert!(idx < p.send_displ(src, r) + p.count(src, r));
                        prop_assert!(seen.insert((src, idx)));
                    }
                    None => prop_assert!(j >= recv),
                }
            }
        }
        let sent: u64 = (0..n).map(|r| p.send_total(r)).sum();
        prop_assert_eq!(seen.len() as u64, sent);
    }

    /// Any square matrix of non-negative numbers parses to its values
    /// rounded down to 16 bytes.
    #[test]
    fn matrix_round_trip(n in 1usize..7, cells in proptest::collection::vec(0u32..1_000_000, 49)) {
        let cells = &cells[..n * n];
        let m = TrafficMatrix::parse("p.txt", &matrix_text(n, cells), None).unwrap();
        prop_assert_eq!(m.dim(), n);
        for (k, v) in cells.iter().enumerate() {
            prop_assert_eq!(m.get(k / n, k % n), *v as u64 / 16 * 16);
        }
    }
}
