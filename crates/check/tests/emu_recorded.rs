//! The host verdict on figures recorded on the emulated cluster: four
//! processes on one H200, each its own host over NCCL's sockets
//! (bench/results/emu/README.md, session 7, calls 6 and 7). Quiet jobs
//! must pass and name nobody; jobs whose host 2 was starved of CPU must
//! name host 2 and fail (quiet jobs measured with pair tests of three
//! iterations, before host tests took ten at least, may warn but never
//! name anyone). The figures are the pair tests as measured,
//! confirmation rounds included, judged again by today's rule.

use collbench_check::hosts::{judge, Finding, JudgeConfig, PairResult};
use collbench_check::verdict::Status;
use serde_json::Value;

struct Job {
    source: String,
    slow: bool,
    /// Timed iterations of each pair test: 3 in call 6 (`--quick`), 10
    /// since (the least host tests run).
    iterations: u64,
    hosts: usize,
    results: Vec<PairResult>,
}

fn jobs() -> Vec<Job> {
    let text = include_str!("fixtures/emu_hosts.json");
    let v: Value = serde_json::from_str(text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|j| Job {
            source: j["source"].as_str().unwrap().to_string(),
            slow: j["kind"] == "slow",
            iterations: j["pair_iterations"].as_u64().unwrap(),
            hosts: j["hosts"].as_u64().unwrap() as usize,
            results: j["sendrecv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| PairResult {
                    a: p["a"].as_u64().unwrap() as usize,
                    b: p["b"].as_u64().unwrap() as usize,
                    round: p["round"].as_u64().unwrap() as usize,
                    busbw_gbps: p["busbw_gbps"].as_f64().unwrap(),
                })
                .collect(),
        })
        .collect()
}

#[test]
fn recorded_quiet_jobs_pass_and_starved_hosts_are_named() {
    let jobs = jobs();
    assert_eq!(jobs.iter().filter(|j| j.slow).count(), 7);
    assert_eq!(jobs.iter().filter(|j| !j.slow).count(), 12);
    for job in &jobs {
        let v = judge(&job.results, &JudgeConfig::new(job.hosts));
        if job.slow {
            assert!(
                matches!(
                    v.findings.iter().find(|f| f.host().is_some()),
                    Some(Finding::SlowHost(e)) if e.host == 2
                ),
                "{}: {:?}",
                job.source,
                v.findings
            );
            assert_eq!(v.status, Status::Fail, "{}", job.source);
        } else if job.iterations >= 10 {
            assert_eq!(
                v.status,
                Status::Pass,
                "{}: {:?} sigma {:.3}",
                job.source,
                v.findings,
                v.noise_sigma
            );
        } else {
            // Three-iteration tests are noisier than the rule accepts
            // (one of five warned); the verdict may say so, never name.
            assert!(
                v.findings.iter().all(|f| f.host().is_none()),
                "{}",
                job.source
            );
        }
    }
}
