//! The explain pass: the runner asks the backend once per placement, only
//! when the plan says so, and puts the answer in the record.

use collbench_core::SingleProcess;
use collbench_core::{Collective, Explanation, KernelChoice};
use collbench_runner::cpu::CpuBackend;
use collbench_runner::run::NoObserver;
use collbench_runner::{
    Backend, BackendError, BackendInfo, CaseSpec, Measurement, Plan, Runner, Timing,
};

/// The CPU backend plus an `explain` that reports one ring kernel per
/// case, its channel count the case's size, and records its calls.
struct Explaining {
    cpu: CpuBackend,
    calls: Vec<(u64, bool)>,
}

impl Backend for Explaining {
    fn info(&self) -> BackendInfo {
        self.cpu.info()
    }
    fn local_ranks(&self) -> usize {
        self.cpu.local_ranks()
    }
    fn world_size(&self) -> usize {
        self.cpu.world_size()
    }
    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        self.cpu.supports(case)
    }
    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        self.cpu.time(case, timing)
    }
    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        self.cpu.check(case, seed, corrupt)
    }
    fn explain(&mut self, case: &CaseSpec) -> Result<Option<Explanation>, BackendError> {
        self.calls.push((case.size_bytes(), case.in_place));
        let kernel = KernelChoice {
            func: "AllReduce".into(),
            algo: "RING".into(),
            proto: if case.in_place { "LL" } else { "SIMPLE" }.into(),
            channels: case.size_bytes(),
        };
        Ok(Some(Explanation::from_kernels([kernel], [], 0)))
    }
}

fn run(explain: bool) -> (collbench_core::Record, Vec<(u64, bool)>) {
    let control = SingleProcess;
    let mut backend = Explaining {
        cpu: CpuBackend::new(2, "h"),
        calls: Vec::new(),
    };
    let plan = Plan {
        collectives: vec![Collective::AllReduce],
        min_bytes: 64,
        max_bytes: 128,
        step: collbench_core::size::Step::Factor(2),
        timing: Timing {
            iters: 2,
            ..Timing::default()
        },
        explain,
        ..Plan::default()
    };
    let record = Runner::new(&mut backend, &control, plan)
        .run(collbench_core::Record::new("collbench"), &mut NoObserver)
        .unwrap()
        .unwrap();
    (record, backend.calls)
}

#[test]
fn every_placement_is_explained_when_the_plan_asks() {
    let (record, calls) = run(true);
    assert_eq!(
        calls,
        vec![(64, false), (64, true), (128, false), (128, true)]
    );
    assert_eq!(record.results.len(), 2);
    for row in &record.results {
        let oop = row.out_of_place.as_ref().unwrap().explain.as_ref().unwrap();
        let ip = row.in_place.as_ref().unwrap().explain.as_ref().unwrap();
        assert_eq!(oop.proto_text(), "SIMPLE");
        assert_eq!(ip.proto_text(), "LL");
        assert_eq!(oop.channels_text(), row.size_bytes.to_string());
    }
}

#[test]
fn nothing_is_asked_without_explain() {
    let (record, calls) = run(false);
    assert!(calls.is_empty());
    assert!(record
        .results
        .iter()
        .flat_map(|r| r.placements())
        .all(|(_, p)| p.explain.is_none()));
}

#[test]
fn the_cpu_backend_cannot_explain() {
    let mut cpu = CpuBackend::new(1, "h");
    let case = CaseSpec {
        collective: Collective::AllReduce,
        dtype: collbench_core::DataType::Float,
        redop: collbench_core::ReduceOp::Sum,
        root: 0,
        counts: Collective::AllReduce.counts(64, 4, 1),
        in_place: false,
        world_size: 1,
    };
    assert_eq!(cpu.explain(&case).unwrap(), None);
}
