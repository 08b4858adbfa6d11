//! The candidate plan from what the job runs on: the facts the transport
//! is decided from (hosts, `NCCL_NET`, `NCCL_IB_DISABLE`, IB devices in
//! `/sys/class/infiniband`) are read here, the decision and the
//! candidates are [`crate::plan`]'s.

use super::options::{PlanOptions, TransportChoice};
use crate::plan::{decide_transport, Job, Plan, TransportDecision, TransportFacts};

/// Where this process's environment and /sys say the transport comes
/// from, for a job of `hosts` hosts.
fn facts(hosts: usize) -> TransportFacts {
    let var = |k: &str| std::env::var(k).ok();
    let ib_devices = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.count())
        .unwrap_or(0);
    TransportFacts {
        hosts,
        nccl_net: var("NCCL_NET"),
        ib_disable: var("NCCL_IB_DISABLE"),
        ib_devices,
    }
}

/// The transport: `--transport` when given, else decided from the facts.
fn transport(choice: &TransportChoice, hosts: usize) -> TransportDecision {
    match choice {
        TransportChoice::Auto => decide_transport(&facts(hosts)),
        TransportChoice::Given(transport) => TransportDecision {
            transport: transport.clone(),
            why: "--transport".into(),
        },
    }
}

/// The plan for a job of `hosts` hosts and `ranks` ranks.
pub fn plan(o: &PlanOptions, hosts: usize, ranks: usize) -> Plan {
    let job = Job {
        hosts,
        ranks,
        transport: transport(&o.transport, hosts),
    };
    Plan::new(job, &o.env)
}
