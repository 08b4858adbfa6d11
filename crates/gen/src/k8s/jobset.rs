//! JobSet (jobset.x-k8s.io/v1alpha2) with one replicatedJob of one Indexed Job,
//! parallelism = completions = nodes, as in GKE's NCCL examples. With
//! `network.subdomain` set to our Service, pod i is reachable as
//! `<jobset>-<replicatedJob>-0-<i>.<service>`.

use super::objects::{JobSetNetwork, JobSetSpec, JobTemplateSpec, Object, ReplicatedJob};
use super::{indexed_job, pod, Plan};

/// The replicatedJob's name; part of every pod host name, so kept short.
const REPLICATED_JOB: &str = "worker";

/// The name of the only child Job, which starts every pod host name.
fn child_job(plan: &Plan) -> String {
    format!("{}-{REPLICATED_JOB}-0", plan.name)
}

/// The longest pod host name, which must fit in a DNS label.
pub fn longest_hostname(plan: &Plan) -> String {
    indexed_job::hostname(&child_job(plan), plan.nodes - 1)
}

pub fn build(plan: &Plan) -> Object<JobSetSpec> {
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
                    spec: indexed_job::spec(plan, &child_job(plan), None),
                },
            }],
        },
    }
}
