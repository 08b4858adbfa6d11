use super::*;
use collbench_core::{CaseResult, DeviceInfo, RunSettings};

fn record() -> Record {
    let mut r = Record::new("collbench");
    r.start_time = Some("2026-12-01T03:08:39Z".into());
    r.command_line = vec!["alltoall_perf".into(), "-b".into(), "1K".into()];
    r.env.insert("NCCL_DEBUG".into(), "WARN".into());
    r.library = Some("NCCL 2.28.3".into());
    r.settings = RunSettings {
        world_size: 2,
        processes: 1,
        threads_per_process: 1,
        gpus_per_thread: 2,
        min_bytes: 1024,
        max_bytes: 1024,
        step_factor: Some(2),
        warmup_iters: 1,
        iters: 4,
        agg_iters: 1,
        check: true,
        per_iter_timing: true,
        per_iter_skip: 1,
        ..RunSettings::default()
    };
    for rank in 0..2 {
        r.devices.push(DeviceInfo {
            rank,
            pid: 77,
            host: "node/1".into(),
            device: rank,
            bus_id: Some(format!("00000000:1{rank}:00.0")),
            name: "NVIDIA H200".into(),
            ..DeviceInfo::default()
        });
    }
    let oop = Placement {
        time_us: 12.5,
        algbw_gbps: 0.08192,
        busbw_gbps: 0.04096,
        wrong: Some(0),
        iter_times_us: vec![40.0, 10.0, 12.0, 11.0],
        ..Placement::default()
    };
    r.results.push(CaseResult {
        op: "alltoall".into(),
        size_bytes: 1024,
        count: 128,
        dtype: "float".into(),
        redop: "none".into(),
        root: -1,
        in_place: Some(Placement {
            wrong: None,
            iter_times_us: Vec::new(),
            ..oop.clone()
        }),
        out_of_place: Some(oop),
    });
    r
}

#[test]
fn writes_nccl_tests_layout_byte_for_byte() {
    let out = NcclTestsJsonExporter {
        end_time: Some("2026-12-01 03:09:00".into()),
    }
    .serialize(&record());
    let want = concat!(
        r#"{"version":3,"start_time":"2026-12-01 03:08:39","args":["alltoall_perf","-b","1K"],"#,
        r#""env":["NCCL_DEBUG=WARN"],"nccl_version":22803,"#,
        r#""config":{"nthreads":1,"ngpus":2,"minimum_bytes":1024,"maximum_bytes":1024,"step_factor":2,"#,
        r#""warmup_iters":1,"iterations":4,"aggregated_iterations":1,"validation":1,"graph":0,"#,
        r#""blocking_collectives":"false","per_iter_timing":"true","per_iter_skip":1,"parallel_init":"false","#,
        r#""devices":[{"rank":0,"group":0,"pid":77,"hostname":"node\/1","device":0,"device_hex":"0000:10:00","device_info":"NVIDIA H200"}]},"#,
        r#""results":[{"size":1024,"count":128,"type":"float","redop":"none","root":"    -1","#,
        r#""out_of_place":{"time":12.500000,"alg_bw":0.081920,"bus_bw":0.040960,"nwrong":0.000000},"#,
        r#""out_of_place_per_iter":{"skipped_iterations":1,"min_us":10.000000,"max_us":12.000000,"avg_us":11.000000,"#,
        r#""p50_us":11.000000,"p95_us":12.000000,"p99_us":12.000000,"stdev_us":0.816497,"cv_pct":7.422696,"#,
        r#""times_us":[40.000000,10.000000,12.000000,11.000000]},"#,
        r#""in_place":{"time":12.500000,"alg_bw":0.081920,"bus_bw":0.040960,"nwrong":null},"#,
        r#""actual_iterations":4,"experiment_name":""}],"#,
        r#""out_of_bounds":{"count":0,"okay":"true"},"#,
        r#""average_bus_bandwidth":{"bandwidth":0.040960,"okay":"unchecked"},"#,
        r#""errors":[],"end_time":"2026-12-01 03:09:00"}"#,
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

#[test]
fn process_rows_wrong_counts_and_min_bw() {
    let mut r = record();
    r.env.insert("NCCL_TESTS_MIN_BW".into(), "100".into());
    let p = r.results[0].out_of_place.as_mut().unwrap();
    p.wrong = Some(3);
    p.process_iter_times_us = vec![vec![40.0, 9.0, 12.0, 11.0], vec![1.0, 10.0, 2.0, 3.0]];
    r.devices[1].pid = 78;
    let out = String::from_utf8(NcclTestsJsonExporter::default().serialize(&r)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["out_of_bounds"]["count"], 1);
    assert_eq!(v["out_of_bounds"]["okay"], "false");
    assert_eq!(v["average_bus_bandwidth"]["okay"], "false");
    assert_eq!(v["results"][0]["out_of_place"]["nwrong"], 3.0);
    let rows = &v["results"][0]["out_of_place_per_iter"]["per_process_max_times_us"];
    assert_eq!(rows[1][1], 10.0);
    // One device entry per process.
    assert_eq!(v["config"]["devices"].as_array().unwrap().len(), 2);
    assert!(v["end_time"].as_str().unwrap().len() == 19);
}

#[test]
fn small_pieces() {
    assert_eq!(double(f64::NAN), "\"nan\"");
    assert_eq!(double(1.0 / 3.0), "0.333333");
    assert_eq!(string("a\"b\\c\td\u{1}é"), r#""a\"b\\c\td\u0001\u00e9""#);
    assert_eq!(device_hex(Some("0000:9a:00.0")), "0000:9a:00");
    assert_eq!(device_hex(None), "cpu");
    assert_eq!(
        stamp_from_rfc3339("2026-12-01T03:08:39Z"),
        "2026-12-01 03:08:39"
    );
    assert_eq!(utc_now_stamp().len(), 19);
}
