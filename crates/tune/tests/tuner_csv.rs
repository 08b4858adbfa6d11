//! The tuner CSV: round trips, NCCL's own sample lines, one error line per
//! malformed line, and the example tuner's first-match rule.

use collbench_core::Collective;
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::tuner_csv::{TunerConfig, TunerQuery, TunerRow, FORMAT_LINE};
use collbench_tune::{
    tune, AlgoProto, Algorithm, Protocol, Registration, Setting, TuneConfig, TunerAxis,
};
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;

fn query(op: Collective, bytes: u64) -> TunerQuery {
    TunerQuery {
        op,
        bytes,
        n_nodes: 1,
        n_ranks: 8,
        num_pipe_ops: 1,
        reg_buff: false,
    }
}

/// `-1` (any) or a positive count, as the CSV's numeric fields take.
fn any_or_pos() -> impl Strategy<Value = i32> {
    prop_oneof![Just(-1), 1..1000i32]
}

prop_compose! {
    fn any_row()(
        op in prop::sample::select(vec![
            Collective::Broadcast,
            Collective::Reduce,
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::AllReduce,
        ]),
        bounds in (any::<u64>(), any::<u64>()),
        algorithm in prop::sample::select(Algorithm::ALL.to_vec()),
        protocol in prop::sample::select(Protocol::ALL.to_vec()),
        counts in prop::array::uniform4(any_or_pos()),
        reg_buff in -1..=1i32,
    ) -> TunerRow {
        let [channels, n_nodes, n_ranks, num_pipe_ops] = counts;
        TunerRow {
            op,
            min_bytes: bounds.0.min(bounds.1),
            max_bytes: bounds.0.max(bounds.1),
            algorithm,
            protocol,
            channels,
            n_nodes,
            n_ranks,
            num_pipe_ops,
            reg_buff,
        }
    }
}

proptest! {
    #[test]
    fn written_files_parse_back_to_the_same_rows(rows in prop::collection::vec(any_row(), 0..20)) {
        let cfg = TunerConfig { rows };
        let text = cfg.to_csv(&["a note\nover two lines".to_string()]);
        prop_assert_eq!(TunerConfig::parse(&text).unwrap(), cfg);
    }

    #[test]
    fn the_first_matching_row_wins(rows in prop::collection::vec(any_row(), 1..10), bytes in any::<u64>()) {
        let cfg = TunerConfig { rows };
        let q = TunerQuery { op: Collective::AllReduce, bytes, n_nodes: 2, n_ranks: 16, num_pipe_ops: 1, reg_buff: true };
        let hit = cfg.lookup(&q, |_| true);
        let first = cfg.rows.iter().position(|r| r.matches(&q));
        prop_assert_eq!(hit.map(|(i, _)| i), first);
    }
}

#[test]
fn reads_lines_in_the_example_tuners_format() {
    // 8, 9 and 10 fields, spaces around fields, a CRLF line, comments.
    let text = "# a comment\n\
                \n\
                allreduce,0,65536,tree,simple,2,1,-1,-1,1\n\
                allreduce, 65537 ,1048576,ring,simple,4,4,32,1\r\n\
                broadcast,0,32768,tree,simple,-1,1,-1\n";
    let cfg = TunerConfig::parse(text).unwrap();
    assert_eq!(cfg.rows.len(), 3);
    assert_eq!(cfg.rows[0].reg_buff, 1);
    assert_eq!(
        (
            cfg.rows[1].min_bytes,
            cfg.rows[1].num_pipe_ops,
            cfg.rows[1].reg_buff
        ),
        (65537, 1, -1)
    );
    assert_eq!((cfg.rows[2].num_pipe_ops, cfg.rows[2].reg_buff), (-1, -1));
    assert_eq!(cfg.rows[2].op, Collective::Broadcast);
}

#[test]
fn each_malformed_line_gets_one_clear_error() {
    let long = format!("allreduce,0,{},ring,simple,-1,-1,-1", "9".repeat(250));
    let text = [
        "allreduce,0,1M,ring,simple,-1,-1,-1",            // 1: suffix
        "allreduce,0,100,rign,simple,-1,-1,-1",           // 2: algorithm
        "alltoall,0,100,ring,simple,-1,-1,-1",            // 3: collective
        "allreduce,0,100,ring,simple,-1,-1",              // 4: 7 fields
        "allreduce,0,100,ring,simple,0,-1,-1",            // 5: channels 0
        "allreduce,100,0,ring,simple,-1,-1,-1",           // 6: min > max
        "allreduce,0,100,ring,simple,-1,-1,-1,-1,2",      // 7: regBuff 2
        "allreduce,,100,ring,simple,-1,-1,-1",            // 8: empty field
        "  # indented comment, with, commas, a, b, c, d", // 9
        "allreduce,0,100,ring,LL,-1,-1,-1",               // 10: case
        &long,                                            // 11: too long
        "allreduce,0,100,ring,simple,-1,-1,-1,1,0,7",     // 12: 11 fields
        "allreduce,0,100,ring,simple,-1,-1,-1",           // 13: fine
    ]
    .join("\n");
    let errs = TunerConfig::parse(&text).unwrap_err();
    let lines: Vec<usize> = errs.0.iter().map(|e| e.line).collect();
    assert_eq!(lines, (1..=12).collect::<Vec<_>>());
    let msg = errs.to_string();
    let expect = [
        "tuner config line 1: max_bytes '1M' is not a whole number of bytes; allowed: decimal digits only",
        "tuner config line 2: algorithm 'rign' is not known; allowed: tree, ring, collnet_direct",
        "tuner config line 3: collective_type 'alltoall' is not known; allowed: broadcast, reduce, allgather",
        "tuner config line 4: 7 fields; allowed: 8 fields",
        "tuner config line 5: channels '0' is out of range; allowed: a channel count of 1 or more, or -1",
        "tuner config line 6: min_bytes 100 is above max_bytes 0; allowed: min_bytes <= max_bytes",
        "tuner config line 7: regBuff '2' is out of range; allowed: 0 (unregistered), 1 (registered) or -1",
        "tuner config line 8: field 2 (min_bytes) is empty",
        "tuner config line 9: comment does not start in the first column",
        "tuner config line 10: protocol 'LL' is not known; allowed: ll, ll128, simple",
        "tuner config line 11: line is 283 characters long",
        "tuner config line 12: 11 fields",
    ];
    for (line, e) in msg.lines().zip(expect) {
        assert!(line.starts_with(e), "{line}\n  expected to start with: {e}");
    }
    assert_eq!(msg.lines().count(), 12, "one line per malformed line");
}

#[test]
fn matching_follows_the_example_tuner() {
    let text = "allreduce,0,1023,tree,ll,-1,-1,-1\n\
                allreduce,0,65536,nvls,simple,16,1,8,-1,1\n\
                allreduce,0,65536,ring,ll128,8,1,-1\n\
                allreduce,0,65536,ring,simple,4,-1,-1\n\
                allgather,0,18446744073709551615,ring,simple,-1,2,-1\n";
    let cfg = TunerConfig::parse(text).unwrap();
    // Sizes are inclusive at both ends.
    assert_eq!(
        cfg.lookup(&query(Collective::AllReduce, 1023), |_| true)
            .unwrap()
            .0,
        0
    );
    // regBuff: row 1 wants registered buffers.
    assert_eq!(
        cfg.lookup(&query(Collective::AllReduce, 4096), |_| true)
            .unwrap()
            .0,
        2
    );
    let reg = TunerQuery {
        reg_buff: true,
        ..query(Collective::AllReduce, 4096)
    };
    assert_eq!(cfg.lookup(&reg, |_| true).unwrap().0, 1);
    // A row whose algorithm/protocol NCCL ignores for this call is passed
    // over: the next matching row applies.
    let no_nvls = |ap: AlgoProto| ap.algorithm != Algorithm::Nvls;
    assert_eq!(cfg.lookup(&reg, no_nvls).unwrap().0, 2);
    // nNodes must match unless -1.
    let two_nodes = TunerQuery {
        n_nodes: 2,
        ..query(Collective::AllReduce, 4096)
    };
    assert_eq!(cfg.lookup(&two_nodes, |_| true).unwrap().0, 3);
    assert!(cfg
        .lookup(&query(Collective::AllGather, 1), |_| true)
        .is_none());
    assert!(cfg
        .lookup(&query(Collective::AllReduce, 65537), |_| true)
        .is_none());
}

#[test]
fn a_tune_report_becomes_rows_and_notes() {
    // 64 channels win from 64 MiB up (two bands, merged into one row);
    // symmetric registration wins at 1 MiB (a note, not a row).
    let truth: Truth = Box::new(|s: &Setting, c| {
        let base = 10.0 + c.bytes as f64 / 250e3;
        let wide = c.bytes >= 64 << 20 && s.channels == Some(64);
        let symmetric = c.bytes < 2 << 20 && s.registration == Registration::Symmetric;
        let f = if wide || symmetric {
            0.7
        } else if s.is_default() {
            1.0
        } else {
            1.3
        };
        Some(base * f)
    });
    let mut m = FakeMeasurer::new(4, truth);
    let sizes = vec![1 << 20, 16 << 20, 64 << 20, 256 << 20];
    let cfg = TuneConfig::new(vec![Collective::AllReduce], sizes, 8, 1, 60e6);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    let (csv, notes) = TunerConfig::from_report(&r);
    assert_eq!(
        csv.rows,
        vec![TunerRow {
            op: Collective::AllReduce,
            min_bytes: r.bands[2].band.min_bytes,
            max_bytes: 256 << 20,
            algorithm: Algorithm::Ring,
            protocol: Protocol::Simple,
            channels: 64,
            n_nodes: 1,
            n_ranks: 8,
            num_pipe_ops: -1,
            reg_buff: -1,
        }]
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("-R 2") && notes[0].contains("registration"),
        "{}",
        notes[0]
    );
    let text = csv.to_csv(&notes);
    assert!(text.starts_with(FORMAT_LINE));
    assert_eq!(TunerConfig::parse(&text).unwrap(), csv);
}

/// The quoted names in the C initializer that starts at `marker`.
fn c_names<'a>(source: &'a str, marker: &str) -> Vec<&'a str> {
    let start = source.find(marker).expect("marker in the C source");
    let body = &source[start..];
    let body = &body[..body.find("};").expect("end of initializer")];
    body.split('"').skip(1).step_by(2).collect()
}

#[test]
fn the_c_plugin_uses_the_same_names_and_ids() {
    // The plugin indexes NCCL's cost table by position in these lists, so
    // they must follow the ids of Algorithm/Protocol (NCCL's tuner.h).
    let c = include_str!("../../nccl/tuner/collbench_tuner.c");
    let algos: Vec<&str> = Algorithm::ALL.iter().map(|a| a.csv_name()).collect();
    assert_eq!(c_names(c, "cb_algo_names[CB_NUM_ALGORITHMS] ="), algos);
    let protos: Vec<&str> = Protocol::ALL.iter().map(|p| p.csv_name()).collect();
    assert_eq!(c_names(c, "cb_proto_names[CB_NUM_PROTOCOLS] ="), protos);
    let colls = c_names(c, "cb_coll_names[] =");
    assert_eq!(
        colls,
        [
            "broadcast",
            "reduce",
            "allgather",
            "reducescatter",
            "allreduce"
        ]
    );
    let enum_names = [
        "ncclFuncBroadcast",
        "ncclFuncReduce",
        "ncclFuncAllGather",
        "ncclFuncReduceScatter",
        "ncclFuncAllReduce",
    ];
    for (id, (name, en)) in colls.iter().zip(enum_names).enumerate() {
        let op = collbench_tune::setting::tuner_coll_from_name(name).unwrap();
        assert_eq!(collbench_tune::setting::tuner_coll_name(op), Some(*name));
        assert!(c.contains(&format!("{en} = {id},")), "{en} must be {id}");
    }
}
