//! The headless Service that gives each pod a DNS name (`<pod-host>.<service>`)
//! so that every rank can reach rank 0.

use super::objects::{Object, ObjectMeta, ServicePort, ServiceSpec};
use super::{pod, Plan};

/// A headless Service named like the workload, selecting its pods.
pub fn build(plan: &Plan) -> Object<ServiceSpec> {
    Object {
        api_version: "v1",
        kind: "Service",
        metadata: ObjectMeta {
            name: Some(plan.name.clone()),
            namespace: plan.namespace.clone(),
            labels: pod::labels(plan),
            ..ObjectMeta::default()
        },
        spec: ServiceSpec {
            cluster_ip: "None",
            selector: pod::labels(plan),
            ports: vec![ServicePort {
                name: "rendezvous".to_string(),
                port: plan.port,
                target_port: plan.port,
            }],
            publish_not_ready_addresses: true,
        },
    }
}
