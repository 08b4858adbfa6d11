//! JobSet (jobset.x-k8s.io/v1alpha2) with one replicatedJob of one Indexed Job,
//! parallelism = completions = nodes, as in GKE's NCCL examples. With
//! `network.subdomain` set to our Service, pod i is reachable as
//! `<jobset>-<replicatedJob>-0-<i>.<service>`.

use super::objects::{JobSetNetwork, JobSetSpec, JobSpec, JobTemplateSpec, Object, ReplicatedJob};
use super::{pod, Plan};

/// The replicatedJob's name; part of every pod host name, so kept short.
const REPLICATED_JOB: &str = "worker";

/// The pod host name of completion index `index` in the only child Job.
fn hostname(plan: &Plan, index: u32) -> String {
    format!("{}-{REPLICATED_JOB}-0-{index}", plan.name)
}

/// The longest pod host name, which must fit in a DNS label.
pub fn longest_hostname(plan: &Plan) -> String {
    hostname(plan, plan.nodes - 1)
}

pub fn build(plan: &Plan) -> Object<JobSetSpec> {
    let rank0 = format!("{}.{}", hostname(plan, 0), plan.name);
    Object {
        api_version: "jobset.x-k8s.io/v1alpha2",
        kind: "JobSet",
        metadata: pod::workload_meta(plan),
        spec: JobSetSpec {
            // The JobSet controller uses an existing Service of this name
            // (ours, with the rendezvous port) instead of creating its own.
            network: JobSetNetwork {
                enable_dns_hostnames: true,
                subdomain: plan.name.clone(),
                publish_not_ready_addresses: true,
            },
            replicated_jobs: vec![ReplicatedJob {
                name: REPLICATED_JOB,
                replicas: 1,
                template: JobTemplateSpec {
                    spec: JobSpec {
                        parallelism: plan.nodes,
                        completions: plan.nodes,
                        completion_mode: "Indexed",
                        backoff_limit: 0,
                        template: pod::template(
                            plan,
                            None,
                            vec![pod::collbench_container(plan, &rank0)],
                            vec![pod::shm_volume()],
                        ),
                    },
                },
            }],
        },
    }
}
