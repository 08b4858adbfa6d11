use super::slurm::{self, parse_show_node, Scontrol, SlurmAction, SlurmError};
use super::*;
use crate::hosts::{judge, HostInfo, JudgeConfig, PairResult};
use std::cell::RefCell;
use std::collections::BTreeMap;

const F: Fractions = Fractions {
    warn: 0.9,
    fail: 0.75,
};

/// Hosts n1-0, n1-1, n2-0, n2-1 (two per node), every pair measured
/// twice; host `slow` at 0.1x, confirmed in a later round.
fn four_hosts(slow: Option<usize>) -> HostReport {
    let names = ["n1-0", "n1-1", "n2-0", "n2-1"];
    let speed = |h: usize| if Some(h) == slow { 0.1_f64 } else { 1.0 };
    let mut results = Vec::new();
    for round in [0, 9] {
        for a in 0..4 {
            for b in a + 1..4 {
                let busbw_gbps = 8.0 * speed(a).min(speed(b)) * (1.0 + 0.01 * (a + b) as f64);
                results.push(PairResult {
                    a,
                    b,
                    round,
                    busbw_gbps,
                });
            }
        }
    }
    HostReport {
        hosts: (0..4)
            .map(|h| HostInfo {
                name: names[h].into(),
                ranks: h..h + 1,
            })
            .collect(),
        size_bytes: 4 << 20,
        judged_op: "sendrecv",
        rounds: 4,
        verdict: judge(&results, &JudgeConfig::new(4)),
        sendrecv: results,
        all_reduce: Vec::new(),
        failures: Vec::new(),
        groups: None,
        group_note: None,
    }
}

fn placements() -> Vec<Placement> {
    ["n1-0", "n1-1", "n2-0", "n2-1"]
        .iter()
        .map(|h| Placement {
            host: h.to_string(),
            node: h[..2].to_string(),
        })
        .collect()
}

fn outcome<'a>(status: Status, lines: &'a [Line], hosts: Option<&'a HostReport>) -> Outcome<'a> {
    Outcome {
        status,
        lines,
        hosts,
        fractions: F,
    }
}

#[test]
fn the_node_of_a_slow_host_is_bad_with_the_finding_and_the_other_passes() {
    let h = four_hosts(Some(2));
    let judged = judge_nodes(&outcome(Status::Fail, &[], Some(&h)), &placements());
    assert_eq!(judged.len(), 2);
    assert_eq!(judged[0].node, "n1");
    assert_eq!(judged[0].verdict, NodeVerdict::Passed);
    let bad = &judged[1];
    assert_eq!((bad.node.as_str(), bad.verdict), ("n2", NodeVerdict::Bad));
    assert_eq!(bad.host.as_deref(), Some("n2-0"));
    // Its fastest pair and the job median, and which test.
    assert!((bad.figure_gbps.unwrap() - 0.82).abs() < 0.05, "{bad:?}");
    assert!(bad.reference_gbps.unwrap() > 7.9, "{bad:?}");
    assert_eq!(bad.test, "sendrecv host pairs at 4M");
    let r = reason(bad, 1_796_615_200);
    assert!(r.starts_with("collbench: host n2-0 0.8"), "{r}");
    assert!(r.contains("x the job median 8."), "{r}");
    assert!(r.contains("(sendrecv host pairs at 4M)"), "{r}");
    assert!(
        r.contains(&format!(
            "[collbench {} check, 2026-12-07T",
            env!("CARGO_PKG_VERSION")
        )),
        "{r}"
    );
}

#[test]
fn a_quiet_job_passes_every_node_and_a_host_not_judged_holds_its_node() {
    let h = four_hosts(None);
    let judged = judge_nodes(&outcome(Status::Pass, &[], Some(&h)), &placements());
    assert!(
        judged.iter().all(|j| j.verdict == NodeVerdict::Passed),
        "{judged:?}"
    );
    // Host n2-1 (3) never measured: node n2 is neither bad nor passed.
    let mut h = four_hosts(None);
    h.sendrecv.retain(|r| r.a != 3 && r.b != 3);
    h.verdict = judge(&h.sendrecv, &JudgeConfig::new(4));
    let judged = judge_nodes(&outcome(Status::Incomplete, &[], Some(&h)), &placements());
    assert_eq!(judged[0].verdict, NodeVerdict::Passed);
    assert_eq!(judged[1].verdict, NodeVerdict::Held);
    assert!(judged[1].why.contains("n2-1 not judged"), "{:?}", judged[1]);
}

fn line(status: Status, note: &str) -> Line {
    Line {
        op: "all_reduce".into(),
        dtype: "float".into(),
        size_bytes: 1 << 30,
        metric: Metric::BusbwGbps,
        measured: Some(40.0),
        expected: Some(100.0),
        ratio: Some(0.4),
        wrong: 0,
        status,
        note: Some(note.into()),
        explain: None,
    }
}

#[test]
fn a_node_checked_alone_is_bad_on_a_fail_and_held_on_a_warn() {
    let one = [Placement {
        host: "n7".into(),
        node: "n7".into(),
    }];
    let fail = [line(
        Status::Fail,
        "busbw 40.00 GB/s is 40.0% of the expected 100.00 GB/s",
    )];
    let j = &judge_nodes(&outcome(Status::Fail, &fail, None), &one)[0];
    assert_eq!(j.verdict, NodeVerdict::Bad);
    assert_eq!(j.test, "all_reduce 1G");
    assert_eq!((j.figure_gbps, j.reference_gbps), (Some(40.0), Some(100.0)));
    assert!(
        j.why.contains("all_reduce FAIL: busbw 40.00 GB/s is 40.0%"),
        "{j:?}"
    );
    let warn = [line(Status::Warn, "x")];
    let j = &judge_nodes(&outcome(Status::Warn, &warn, None), &one)[0];
    assert_eq!(j.verdict, NodeVerdict::Held);
    let j = &judge_nodes(&outcome(Status::Pass, &[], None), &one)[0];
    assert_eq!(j.verdict, NodeVerdict::Passed);
    // Several nodes and no host tests: a failed job names no node.
    let j = judge_nodes(&outcome(Status::Fail, &fail, None), &placements());
    assert!(j.iter().all(|j| j.verdict == NodeVerdict::Held), "{j:?}");
}

#[test]
fn the_node_name_is_slurms_then_kubernetes_then_the_host_name() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
    };
    assert_eq!(
        node_name(env(&[("SLURMD_NODENAME", "n3"), ("NODE_NAME", "k")]), "h"),
        "n3"
    );
    assert_eq!(
        node_name(env(&[("NODE_NAME", "gke-a3-1")]), "pod-0"),
        "gke-a3-1"
    );
    assert_eq!(node_name(env(&[("NODE_NAME", "")]), "pod-0"), "pod-0");
}

/// A Slurm of nodes with their states, recording every update.
struct FakeSlurm {
    nodes: BTreeMap<&'static str, &'static str>,
    updates: RefCell<Vec<Vec<String>>>,
    shown: RefCell<Vec<String>>,
}

impl FakeSlurm {
    fn new(nodes: &[(&'static str, &'static str)]) -> FakeSlurm {
        FakeSlurm {
            nodes: nodes.iter().copied().collect(),
            updates: RefCell::new(Vec::new()),
            shown: RefCell::new(Vec::new()),
        }
    }
}

impl Scontrol for FakeSlurm {
    fn show_node(&self, node: &str) -> Result<String, SlurmError> {
        self.shown.borrow_mut().push(node.into());
        self.nodes
            .get(node)
            .map(|s| s.to_string())
            .ok_or(SlurmError::Failed {
                command: format!("scontrol show node {node}"),
                stderr: format!("Node {node} not found"),
            })
    }
    fn update(&self, args: &[String]) -> Result<(), SlurmError> {
        self.updates.borrow_mut().push(args.to_vec());
        Ok(())
    }
}

const IDLE: &str = "NodeName=n1 Arch=x86_64 CoresPerSocket=1\n   State=IDLE ThreadsPerCore=1 TmpDisk=0\n   Partitions=debug\n";
const OURS: &str = "NodeName=n4 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=collbench: host n4 0.10x the job median [root@2026-12-07T03:00:00]\n";
const ADMIN: &str = "NodeName=n3 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=replace DIMM 4 [admin@2026-12-06T10:00:00]\n";

fn judged(node: &str, verdict: NodeVerdict) -> NodeJudgement {
    NodeJudgement {
        node: node.into(),
        verdict,
        host: Some(node.into()),
        figure_gbps: Some(0.8),
        reference_gbps: Some(8.0),
        test: "sendrecv host pairs at 4M".into(),
        why: format!("host {node} 0.80 GB/s, 0.10x the job median 8.00 GB/s"),
    }
}

#[test]
fn scontrols_node_state_and_reason_are_read_without_slurms_suffix() {
    let s = parse_show_node(OURS).unwrap();
    assert_eq!(s.state, "IDLE+DRAIN");
    assert_eq!(
        s.reason.as_deref(),
        Some("collbench: host n4 0.10x the job median")
    );
    assert!(s.drained_by_collbench());
    let admin = parse_show_node(ADMIN).unwrap();
    assert!(admin.out_of_service() && !admin.drained_by_collbench());
    let idle = parse_show_node(IDLE).unwrap();
    assert!(!idle.out_of_service() && idle.reason.is_none());
    assert!(parse_show_node("garbage").is_none());
}

#[test]
fn slurm_drains_the_bad_resumes_only_its_own_and_never_touches_the_rest() {
    let fake = FakeSlurm::new(&[("n1", IDLE), ("n2", IDLE), ("n3", ADMIN), ("n4", OURS)]);
    let nodes = [
        judged("n1", NodeVerdict::Passed),
        judged("n2", NodeVerdict::Bad),
        judged("n3", NodeVerdict::Passed),
        judged("n4", NodeVerdict::Passed),
        judged("n5", NodeVerdict::Held),
    ];
    let plan = slurm::plan(&nodes, &fake, 1_796_615_200);
    // The held node is not even looked at.
    assert_eq!(*fake.shown.borrow(), ["n1", "n2", "n3", "n4"]);
    assert!(matches!(&plan[0], SlurmAction::Drain { node, reason }
        if node == "n2" && reason.starts_with("collbench: host n2 0.80 GB/s")));
    assert!(matches!(&plan[1], SlurmAction::NotOurs { node, reason }
        if node == "n3" && reason == "replace DIMM 4"));
    assert!(matches!(&plan[2], SlurmAction::Resume { node, .. } if node == "n4"));
    assert_eq!(plan.len(), 3, "{plan:?}");
    // A dry run says what it would run and runs nothing.
    let said = slurm::carry_out(plan.clone(), Act::DryRun, &fake);
    assert!(fake.updates.borrow().is_empty());
    assert!(
        said[0].2.starts_with(
            "slurm: would run: scontrol update NodeName=n2 State=DRAIN 'Reason=collbench: host n2"
        ),
        "{}",
        said[0].2
    );
    assert!(
        said[1]
            .2
            .contains("n3 passed but was drained by someone else (replace DIMM 4): left drained"),
        "{}",
        said[1].2
    );
    assert_eq!(
        said[2].2,
        "slurm: would run: scontrol update NodeName=n4 State=RESUME"
    );
    // Acting runs exactly the two updates.
    let done = slurm::carry_out(plan, Act::Apply, &fake);
    assert_eq!(fake.updates.borrow().len(), 2);
    assert_eq!(fake.updates.borrow()[1], ["NodeName=n4", "State=RESUME"]);
    assert!(matches!(done[0].1, Ok(true)) && matches!(done[1].1, Ok(false)));
}

#[test]
fn a_bad_node_already_out_of_service_and_an_unknown_node_are_left_alone() {
    let fake = FakeSlurm::new(&[("n3", ADMIN)]);
    let nodes = [
        judged("n3", NodeVerdict::Bad),
        judged("x9", NodeVerdict::Bad),
    ];
    let plan = slurm::plan(&nodes, &fake, 0);
    assert!(
        matches!(&plan[0], SlurmAction::AlreadyDrained { .. }),
        "{plan:?}"
    );
    assert!(matches!(&plan[1], SlurmAction::Unknown { .. }), "{plan:?}");
    slurm::carry_out(plan, Act::Apply, &fake);
    assert!(fake.updates.borrow().is_empty());
}

#[test]
fn shell_words_quote_what_the_shell_would_split() {
    let w = |v: &[&str]| slurm::shell_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        w(&["NodeName=n1", "State=RESUME"]),
        "NodeName=n1 State=RESUME"
    );
    assert_eq!(w(&["Reason=a b's"]), r"'Reason=a b'\''s'");
}

#[test]
fn events_are_one_json_line_per_node_finding_with_the_actions() {
    let nodes = [
        judged("n1", NodeVerdict::Passed),
        judged("n2", NodeVerdict::Bad),
    ];
    let acted = [(
        "n2".to_string(),
        events::Action {
            system: "slurm",
            action: "drain",
            done: true,
            detail: "ran: scontrol update ...".into(),
        },
    )];
    let list = events::events(&nodes, &acted, None, Status::Fail, F, 1_796_615_200);
    let text = events::render(&list).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // n1 passed and nothing was done to it: no event.
    assert_eq!(lines.len(), 1, "{text}");
    let e = &lines[0];
    assert_eq!(e["schema"], "collbench-event/1");
    assert_eq!(e["kind"], "node");
    assert_eq!(e["verdict"], "bad");
    assert_eq!(e["node"], "n2");
    assert_eq!(e["check_status"], "FAIL");
    assert_eq!(e["figure_gbps"], 0.8);
    assert_eq!(e["reference_gbps"], 8.0);
    assert_eq!(e["actions"][0]["action"], "drain");
    assert_eq!(e["actions"][0]["done"], true);
    assert!(e["time"].as_str().unwrap().starts_with("2026-12-07T"));
}

#[test]
fn kubernetes_patches_touch_only_collbenchs_condition_and_taint() {
    use super::k8s::{patches, CONDITION, TAINT_KEY};
    let other = serde_json::json!({"key": "maint", "effect": "NoExecute"});
    let bad = patches(
        &judged("n2", NodeVerdict::Bad),
        Some(std::slice::from_ref(&other)),
        0,
    );
    assert_eq!(bad.len(), 2);
    assert_eq!(bad[0].path, "/api/v1/nodes/n2/status");
    assert_eq!(bad[0].body["status"]["conditions"][0]["type"], CONDITION);
    assert_eq!(bad[1].body["spec"]["taints"][0], other);
    assert_eq!(bad[1].body["spec"]["taints"][1]["key"], TAINT_KEY);
    // A passed node without collbench's taint: the condition alone.
    let passed = patches(&judged("n1", NodeVerdict::Passed), Some(&[other]), 0);
    assert_eq!(passed.len(), 1);
    assert_eq!(passed[0].body["status"]["conditions"][0]["status"], "False");
    assert!(patches(&judged("n5", NodeVerdict::Held), None, 0).is_empty());
}
