//! The pieces every kind's pods share: labels, GPU and extra resources, the
//! memory-backed /dev/shm, and the collbench container of one-pod-per-node
//! workloads.

use super::objects::{
    Container, ContainerPort, EmptyDir, EnvVar, Map, ObjectMeta, PodSpec, PodTemplateSpec,
    Resources, Volume, VolumeMount,
};
use super::{inject, Plan};

/// The label Kueue reads to admit a workload into a LocalQueue.
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Labels on every pod; the headless Service selects pods by them.
pub fn labels(plan: &Plan) -> Map<String> {
    Map::from([
        (
            "app.kubernetes.io/name".to_string(),
            "collbench".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), plan.name.clone()),
    ])
}

/// Metadata of the workload object: name, namespace, Kueue queue label.
pub fn workload_meta(plan: &Plan) -> ObjectMeta {
    let mut labels = labels(plan);
    if let Some(q) = &plan.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_string(), q.clone());
    }
    ObjectMeta {
        name: Some(plan.name.clone()),
        namespace: plan.namespace.clone(),
        labels,
        ..ObjectMeta::default()
    }
}

/// GPUs and extra resources, requests equal to limits.
pub fn resources(plan: &Plan) -> Resources {
    let list: Map<u32> = plan.resources.iter().cloned().collect();
    Resources {
        requests: list.clone(),
        limits: list,
    }
}

/// The default /dev/shm of a container is 64 MiB, far too small for NCCL's
/// shared-memory transport; a memory-backed emptyDir lifts that limit.
pub fn shm_volume() -> Volume {
    Volume {
        name: "dshm",
        empty_dir: EmptyDir {
            medium: Some("Memory"),
        },
    }
}

pub fn shm_mount() -> VolumeMount {
    VolumeMount {
        name: "dshm",
        mount_path: "/dev/shm",
    }
}

/// A pod template with the collbench labels and restartPolicy Never (a rank
/// that restarts on its own would join a world that has moved on).
pub fn template(
    plan: &Plan,
    subdomain: Option<String>,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: ObjectMeta {
            labels: labels(plan),
            ..ObjectMeta::default()
        },
        spec: PodSpec {
            restart_policy: "Never",
            subdomain,
            init_containers: Vec::new(),
            containers,
            volumes,
        },
    }
}

/// The template of the pods that hold the GPUs and run collbench: Kueue's
/// topology annotation (`--topology-*`) and, with `--inject-into`, the
/// init container that copies collbench into them.
pub fn gpu_template(
    plan: &Plan,
    subdomain: Option<String>,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
) -> PodTemplateSpec {
    let mut t = template(plan, subdomain, containers, volumes);
    if let Some(topology) = &plan.topology {
        let (key, level) = topology.annotation();
        t.metadata
            .annotations
            .insert(key.to_string(), level.to_string());
    }
    if let Some(from) = &plan.inject_from {
        inject::add(&mut t.spec, from);
    }
    t
}

/// The one collbench process of a pod that drives all the node's GPUs.
/// `rendezvous_host` is rank 0's DNS name.
pub fn collbench_container(plan: &Plan, rendezvous_host: &str) -> Container {
    let mut env = Vec::new();
    for (name, value) in [
        ("COLLBENCH_WORLD_SIZE", plan.nodes.to_string()),
        (
            "COLLBENCH_RENDEZVOUS",
            format!("{rendezvous_host}:{}", plan.port),
        ),
    ] {
        if !plan.user_sets(name) {
            env.push(EnvVar {
                name: name.to_string(),
                value,
            });
        }
    }
    env.extend(plan.env.iter().map(|(k, v)| EnvVar {
        name: k.clone(),
        value: v.clone(),
    }));
    Container {
        name: "collbench",
        image: plan.image.clone(),
        command: vec![plan.collbench.clone()],
        args: args_with_gpus(&plan.args, plan.gpus_per_node),
        env,
        ports: vec![ContainerPort {
            name: "rendezvous",
            container_port: plan.port,
        }],
        resources: Some(resources(plan)),
        volume_mounts: vec![shm_mount()],
    }
}

/// One process per pod drives every GPU of the node, so `run` gets `-g G`
/// unless the user already chose a GPU count.
pub fn args_with_gpus(args: &[String], gpus: u32) -> Vec<String> {
    let mut out = args.to_vec();
    let sets_gpus = args
        .iter()
        .any(|a| a.starts_with("-g") || a.starts_with("--ngpus"));
    if args.first().map(String::as_str) == Some("run") && !sets_gpus {
        out.push("-g".to_string());
        out.push(gpus.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::args_with_gpus;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn run_gets_the_node_gpu_count() {
        assert_eq!(
            args_with_gpus(&v(&["run", "all"]), 8),
            v(&["run", "all", "-g", "8"])
        );
        assert_eq!(
            args_with_gpus(&v(&["run", "-g", "2"]), 8),
            v(&["run", "-g", "2"])
        );
        assert_eq!(
            args_with_gpus(&v(&["run", "--ngpus=2"]), 8),
            v(&["run", "--ngpus=2"])
        );
        assert_eq!(args_with_gpus(&v(&["preflight"]), 8), v(&["preflight"]));
    }
}
