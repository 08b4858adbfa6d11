//! `check` names a straggler from its battery's arrival skew alone,
//! before any pair round, and the pair rounds then confirm it (issue
//! #53); a quiet job names nobody.
//!
//! Four processes as four hosts (`NCCL_HOSTID`), each with two CPU rank
//! threads under the test hook `COLLBENCH_TEST_CPU_PER_PROCESS=1`: every
//! timed operation ends at a barrier of all four processes, so a process
//! that enters late holds the others up as a starved host does in a real
//! job. Process 2's rank thread 0 (global rank 4) enters every timed
//! iteration 3 ms late (`--test-late-entry 0:3000`). The same under MPI
//! is in `mpi.rs` (feature `mpi`).

mod common;

use common::Finished;
use std::path::Path;

fn job(starved: Option<usize>, json: &Path) -> Vec<Finished> {
    common::four_host_check(|r, cmd| {
        cmd.args(["--size", "1M", "-n", "20", "--quick", "--json"])
            .arg(json)
            .env("NCCL_HOSTID", format!("n{r}"));
        if starved == Some(r) {
            cmd.args(["--test-late-entry", "0:3000"]);
        }
    })
}

fn report(json: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(json).expect("rank 0 wrote --json"))
        .expect("JSON")
}

#[test]
fn a_starved_host_is_named_from_the_battery_and_the_pair_rounds_confirm_it() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let done = job(Some(2), &json);
    let err = &done[0].stderr;
    // Said after the battery, before the first host-pair round.
    let named = err
        .find("straggler from the battery's arrival skew: rank 4 (host n2), late rank")
        .unwrap_or_else(|| panic!("{:?}", done[0]));
    let pairs = err
        .find("collbench check: host pairs")
        .unwrap_or_else(|| panic!("no host pairs ran: {err}"));
    assert!(named < pairs, "{err}");
    let v = report(&json);
    let s = &v["straggler"];
    assert_eq!(
        (s["rank"].as_u64(), s["host"].as_str()),
        (Some(4), Some("n2")),
        "{v}"
    );
    assert_eq!(s["kind"], "late_rank");
    assert!(s["lateness_us"].as_f64().unwrap() > 2000.0, "{s}");
    // The host pairs name n2; on a 2-core machine four processes' own
    // figures may spread too much for the verdict to name any host (as in
    // check_hosts.rs): then n2 must still score lowest of all.
    assert!(
        s["pairs"] == "confirmed" || s["pairs"] == "slowest_unjudged",
        "{v}"
    );
    assert!(
        done[0]
            .stdout
            .contains("# note: straggler rank 4 (host n2): late rank"),
        "{}",
        done[0].stdout
    );
}

#[test]
fn a_quiet_job_names_no_straggler() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let done = job(None, &json);
    assert!(matches!(done[0].code, Some(0..=2)), "{:?}", done[0]);
    let v = report(&json);
    assert!(v.get("straggler").is_none(), "{v}");
    assert!(!done[0].stderr.contains("straggler"), "{}", done[0].stderr);
}
