//! The child-process fallback without a GPU: the protocol against
//! children that answer, die, hang or talk nonsense (small `sh` scripts),
//! the child's side against the scripted fake, and a whole search whose
//! `NCCL_BUFFSIZE` candidates run in children.

use collbench_core::Collective;
use collbench_tune::child::{serve, Child, Children, EnvFallback, Reply, Request, Spawn};
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::{tune, Case, MeasureError, Outcome, Setting, TuneConfig};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const READY: &str = r#"echo '{"ready":{"pid":1}}'"#;

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", script]);
    c
}

fn request() -> Request {
    Request {
        setting: Setting::default(),
        case: Case {
            op: Collective::AllReduce,
            bytes: 1 << 20,
        },
        iters: 10,
    }
}

fn failed(e: MeasureError) -> String {
    match e {
        MeasureError::Failed(m) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// A child that gets ready, reads the first request and then runs
/// `then`: the child, its failure and how long the request took.
fn first_failure(then: &str, what: &str, timeout: Duration) -> (Child, String, Duration) {
    let script = format!("{READY}; read x; {then}");
    let mut c = Child::start(sh(&script), what, timeout).unwrap();
    let t = Instant::now();
    let m = failed(c.measure(&request()).unwrap_err());
    (c, m, t.elapsed())
}

#[test]
fn the_child_side_answers_every_request_and_ends_with_its_input() {
    let mut m = FakeMeasurer::new(1, Box::new(|_, c| Some(c.bytes as f64 / 1e3)));
    let line = serde_json::to_string(&request()).unwrap();
    let input = format!("{line}\n{line}\n");
    let mut out = Vec::new();
    serve(&mut m, input.as_bytes(), &mut out).unwrap();
    let replies: Vec<Reply> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 3);
    assert!(matches!(replies[0], Reply::Ready { .. }));
    for r in &replies[1..] {
        let Reply::Sample(s) = r else { panic!("{r:?}") };
        assert!((s.time_us / 1048.576 - 1.0).abs() < 0.2, "{s:?}");
    }
    assert_eq!(m.calls.len(), 2);
    assert_eq!(m.calls[0].2, 10);
    // A line that is not a request: an error reply, then the end.
    let mut out = Vec::new();
    let e = serve(&mut m, "measure please\n".as_bytes(), &mut out).unwrap_err();
    assert!(e.contains("not a measure request"), "{e}");
    assert!(String::from_utf8(out).unwrap().contains("\"error\""));
}

#[test]
fn a_child_that_dies_is_one_line_naming_it_with_its_last_words() {
    let (mut c, m, took) = first_failure(
        "echo 'cuda error 700' >&2; exit 3",
        "with NCCL_BUFFSIZE=1",
        Duration::from_secs(10),
    );
    assert!(took < Duration::from_secs(5));
    assert!(!m.contains('\n'), "{m}");
    assert!(m.contains("child process with NCCL_BUFFSIZE=1"), "{m}");
    assert!(m.contains("exit status: 3"), "{m}");
    assert!(m.contains("cuda error 700"), "{m}");
    // Dead stays dead, at once.
    let again = failed(c.measure(&request()).unwrap_err());
    assert_eq!(again, m);
}

#[test]
fn a_child_that_hangs_is_killed_at_the_timeout() {
    let t = Instant::now();
    let (c, m, took) = first_failure("sleep 60", "with X=1", Duration::from_millis(300));
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(
        m.contains("no answer within") && m.contains("killed it"),
        "{m}"
    );
    drop(c); // must not wait for the sleep
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_child_that_never_gets_ready_or_talks_nonsense_is_refused() {
    let t = Instant::now();
    let e = failed(
        Child::start(sh("sleep 60"), "slow", Duration::from_millis(300))
            .err()
            .unwrap(),
    );
    assert!(e.contains("during start"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    let e = failed(
        Child::start(
            sh(r#"echo NCCL INFO hello; echo '{"hello":1}'"#),
            "chatty",
            Duration::from_secs(5),
        )
        .err()
        .unwrap(),
    );
    assert!(e.contains(r#"said '{"hello":1}'"#), "{e}");
    let e = failed(
        Child::start(
            Command::new("/nonexistent/collbench"),
            "missing",
            Duration::from_secs(5),
        )
        .err()
        .unwrap(),
    );
    assert!(e.contains("cannot start it"), "{e}");
}

/// Children as `sh` scripts: 100 us per iteration, 90 with
/// NCCL_BUFFSIZE=8388608; each logs its number (in order of starting)
/// and its NCCL_BUFFSIZE per request.
fn script_children(log: std::path::PathBuf) -> Spawn {
    Box::new(move |env: &[(String, String)], n: usize| {
        let script = format!(
            r#"{READY}; while read l; do t=100; [ "$NCCL_BUFFSIZE" = 8388608 ] && t=90; echo "{n} ${{NCCL_BUFFSIZE:-default}}" >> {log}; echo "{{\"sample\":{{\"time_us\":$t,\"cost_us\":1000,\"algo_proto\":null}}}}"; done"#,
            log = log.display()
        );
        let mut c = sh(&script);
        c.env_remove("NCCL_BUFFSIZE")
            .envs(env.iter().map(|(k, v)| (k, v)));
        c
    })
}

#[test]
fn a_search_measures_env_candidates_in_children_each_paired_with_its_own_default_child() {
    let dir = std::env::temp_dir().join(format!("collbench-child-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("requests");
    let _ = std::fs::remove_file(&log);
    // In process: the default 100 us, every other candidate slower.
    let truth: Truth = Box::new(|s, _| Some(if s.is_default() { 100.0 } else { 130.0 }));
    let mut inner = FakeMeasurer::new(5, truth);
    let mut children = Children::new(script_children(log.clone()), Duration::from_secs(10));
    let mut cfg = TuneConfig::new(vec![Collective::AllReduce], vec![1 << 20], 2, 1, 60e6);
    cfg.space.channels = vec![8];
    let envs: Vec<Setting> = cfg.space.extra.clone();
    assert_eq!(
        envs.len(),
        2,
        "the default space has the two NCCL_BUFFSIZE candidates"
    );
    children.prepare(&envs).unwrap();
    assert_eq!(children.len(), 4, "a default partner for each candidate");
    let mut m = EnvFallback::new(&mut inner, children);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    drop(m);
    match &r.bands[0].outcome {
        Outcome::Gain {
            setting,
            ratio,
            processes,
            ..
        } => {
            assert_eq!(setting.to_string(), "NCCL_BUFFSIZE=8388608");
            assert!((ratio.estimate - 0.9).abs() < 1e-9, "{ratio:?}");
            assert_eq!(*processes, cfg.confirm_processes);
        }
        other => panic!("{other:?}"),
    }
    // The default spelled out ran, and was no faster than the default.
    let spelled = r.bands[0]
        .candidates
        .iter()
        .find(|c| c.setting.to_string() == "NCCL_BUFFSIZE=4194304")
        .unwrap();
    assert!(
        format!("{:?}", spelled.status).contains("estimate: 1.0"),
        "{:?}",
        spelled.status
    );
    // Children start in pairs, the default partner first: 0 and 1 for
    // NCCL_BUFFSIZE=8388608, 2 and 3 for 4194304, the screening's. The
    // winner's confirmation then ran in fresh pairs, 4 and 5 up to 10 and
    // 11, never in the screening's children. Every repeat of a candidate
    // had its default partner in its own default child, so both children
    // of a pair answered the same number of requests.
    let lines = std::fs::read_to_string(&log).unwrap();
    let mut answered: std::collections::BTreeMap<usize, (String, usize)> = Default::default();
    for l in lines.lines() {
        let (n, env) = l.split_once(' ').unwrap();
        answered
            .entry(n.parse().unwrap())
            .or_insert((env.to_string(), 0))
            .1 += 1;
    }
    let n_children = 4 + 2 * cfg.confirm_processes as usize;
    assert_eq!(answered.len(), n_children, "{lines}");
    for (n, (env, count)) in &answered {
        let want = match (n % 2, *n < 4) {
            (0, _) => "default",
            (_, true) if *n == 3 => "4194304",
            _ => "8388608",
        };
        assert_eq!(env, want, "child {n}: {lines}");
        if n % 2 == 0 {
            assert_eq!(*count, answered[&(n + 1)].1, "pair {n}: {lines}");
        }
        assert!(*count >= 2, "child {n}: {lines}");
    }
    // None of the in-process calls carried an environment.
    assert!(inner.calls.iter().all(|(s, _, _)| s.env.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Children as `sh` scripts answering 100 us, where the one with
/// NCCL_BUFFSIZE=8388608 says its last words and exits after two requests.
fn dying_children() -> Spawn {
    Box::new(move |env: &[(String, String)], _| {
        let script = format!(
            r#"{READY}; n=0; while read l; do n=$((n+1)); if [ "$NCCL_BUFFSIZE" = 8388608 ] && [ $n -gt 2 ]; then echo "test fault" >&2; exit 3; fi; echo '{{"sample":{{"time_us":100,"cost_us":1000,"algo_proto":null}}}}'; done"#
        );
        let mut c = sh(&script);
        c.env_remove("NCCL_BUFFSIZE")
            .envs(env.iter().map(|(k, v)| (k, v)));
        c
    })
}

/// Under a launcher a child that dies fails its candidate alone, with
/// its last words, and that candidate's later repeats fail at once with
/// the same reason; the search goes on to the end.
#[test]
fn across_hosts_a_dead_child_ends_its_candidate_not_the_search() {
    let truth: Truth = Box::new(|s, _| Some(if s.is_default() { 100.0 } else { 130.0 }));
    let mut inner = FakeMeasurer::new(5, truth);
    let children = Children::new(dying_children(), Duration::from_secs(10));
    let mut cfg = TuneConfig::new(
        vec![Collective::AllReduce],
        vec![1 << 20, 4 << 20],
        2,
        1,
        60e6,
    );
    cfg.space.channels = vec![8];
    let mut m = EnvFallback::across(&mut inner, children);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    drop(m);
    assert_eq!(r.end, collbench_tune::End::Complete);
    assert_eq!(r.bands.len(), 2);
    for b in &r.bands {
        let c = b
            .candidates
            .iter()
            .find(|c| c.setting.to_string() == "NCCL_BUFFSIZE=8388608")
            .unwrap();
        let collbench_tune::CandidateStatus::Failed { reason } = &c.status else {
            panic!("{:?}", c.status);
        };
        assert!(
            reason.contains("child process with NCCL_BUFFSIZE=8388608: exited")
                && reason.contains("test fault"),
            "{reason}"
        );
        let spelled = b
            .candidates
            .iter()
            .find(|c| c.setting.to_string() == "NCCL_BUFFSIZE=4194304")
            .unwrap();
        assert!(
            matches!(
                spelled.status,
                collbench_tune::CandidateStatus::Screened { .. }
            ),
            "{:?}",
            spelled.status
        );
    }
}

/// Waiting for children to be ready gives each candidate its own answer
/// by one deadline: one that never says ready does not fail the others.
#[test]
fn readiness_is_per_candidate_and_bounded_by_one_deadline() {
    let spawn: Spawn = Box::new(|env: &[(String, String)], _| {
        let silent = env.iter().any(|(_, v)| v == "8388608");
        sh(if silent { "sleep 30" } else { READY })
    });
    let mut children = Children::new(spawn, Duration::from_secs(30));
    let cfg = TuneConfig::new(vec![Collective::AllReduce], vec![1 << 20], 2, 1, 60e6);
    children.start(&cfg.space.extra).unwrap();
    let t = Instant::now();
    let each = children.ready_each(t + Duration::from_secs(1));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(each.len(), 2);
    let why = each[0].failure.as_deref().unwrap();
    assert_eq!(each[0].env[0].1, "8388608");
    assert!(why.contains("no answer within"), "{why}");
    assert_eq!(each[1].failure, None);
}
