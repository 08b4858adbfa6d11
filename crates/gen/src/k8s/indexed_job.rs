//! batch/v1 Job with completionMode Indexed: pod i has JOB_COMPLETION_INDEX=i
//! and host name `<job>-<i>`; with `subdomain` set to the Service, rank 0 is
//! `<job>-0.<service>`.

use super::objects::{JobSpec, Object};
use super::{pod, Plan};

/// The host name of the pod with completion index `index` in Indexed Job
/// `job`.
pub(super) fn hostname(job: &str, index: u32) -> String {
    format!("{job}-{index}")
}

/// The longest pod host name, which must fit in a DNS label.
pub fn longest_hostname(plan: &Plan) -> String {
    hostname(&plan.name, plan.nodes - 1)
}

/// The spec of Indexed Job `job`: one pod per node, all at once, rank 0
/// reached at `<job>-0.<service>`. `subdomain` is set on the pods where the
/// Job stands alone (a JobSet sets it itself).
pub(super) fn spec(plan: &Plan, job: &str, subdomain: Option<String>) -> JobSpec {
    let rank0 = format!("{}.{}", hostname(job, 0), plan.name);
    JobSpec {
        parallelism: plan.nodes,
        completions: plan.nodes,
        completion_mode: "Indexed",
        // A failed rank fails the whole measurement; retrying one pod
        // alone cannot rejoin the others.
        backoff_limit: 0,
        template: pod::gpu_template(
            plan,
            subdomain,
            vec![pod::collbench_container(plan, &rank0)],
            vec![pod::shm_volume()],
        ),
    }
}

pub fn build(plan: &Plan) -> Object<JobSpec> {
    Object {
        api_version: "batch/v1",
        kind: "Job",
        metadata: pod::workload_meta(plan),
        spec: spec(plan, &plan.name, Some(plan.name.clone())),
    }
}
