//! batch/v1 Job with completionMode Indexed: pod i has JOB_COMPLETION_INDEX=i
//! and host name `<job>-<i>`; with `subdomain` set to the Service, rank 0 is
//! `<job>-0.<service>`.

use super::objects::{JobSpec, Object};
use super::{pod, Plan};

/// The pod host name of completion index `index`.
fn hostname(plan: &Plan, index: u32) -> String {
    format!("{}-{index}", plan.name)
}

/// The longest pod host name, which must fit in a DNS label.
pub fn longest_hostname(plan: &Plan) -> String {
    hostname(plan, plan.nodes - 1)
}

pub fn build(plan: &Plan) -> Object<JobSpec> {
    let rank0 = format!("{}.{}", hostname(plan, 0), plan.name);
    Object {
        api_version: "batch/v1",
        kind: "Job",
        metadata: pod::workload_meta(plan),
        spec: JobSpec {
            parallelism: plan.nodes,
            completions: plan.nodes,
            completion_mode: "Indexed",
            // A failed rank fails the whole measurement; retrying one pod
            // alone cannot rejoin the others.
            backoff_limit: 0,
            template: pod::template(
                plan,
                Some(plan.name.clone()),
                vec![pod::collbench_container(plan, &rank0)],
                vec![pod::shm_volume()],
            ),
        },
    }
}
