//! Kubeflow mpi-operator MPIJob (kubeflow.org/v2beta1): N Worker pods run
//! sshd and hold the GPUs; one Launcher pod runs `mpirun`, one collbench rank
//! per GPU. The operator creates the workers' headless Service and the
//! hostfile itself, so no Service is written for this kind.

use std::collections::BTreeMap;

use super::objects::{Container, EnvVar, MpiJobSpec, Object, ReplicaSpec, RunPolicy};
use super::{pod, Plan};
use crate::quote::sh_join;

/// Where mpi-operator mounts the hostfile it writes, worker 0 first.
const HOSTFILE: &str = "/etc/mpi/hostfile";

/// The longest worker pod name (`<job>-worker-<i>`), which is also its host name.
pub fn longest_hostname(plan: &Plan) -> String {
    format!("{}-worker-{}", plan.name, plan.nodes - 1)
}

/// The launcher's shell script. mpirun places rank 0 on the first hostfile
/// entry, so rank 0 listens there; `-x NAME` forwards the launcher's own
/// value of each variable, so values are written once, in the YAML env.
fn launcher_script(plan: &Plan) -> String {
    let mut lines = vec!["set -eu".to_string()];
    let mut mpirun: Vec<String> = [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        &(plan.nodes * plan.gpus_per_node).to_string(),
        "--bind-to",
        "none",
    ]
    .map(String::from)
    .to_vec();
    if !plan.user_sets("COLLBENCH_RENDEZVOUS") {
        lines.push(format!("read -r rank0_host _ < {HOSTFILE}"));
        lines.push(format!(
            "export COLLBENCH_RENDEZVOUS=\"$rank0_host:{}\"",
            plan.port
        ));
        mpirun.extend(["-x".to_string(), "COLLBENCH_RENDEZVOUS".to_string()]);
    }
    for (name, _) in &plan.env {
        mpirun.extend(["-x".to_string(), name.clone()]);
    }
    let mut command = vec![plan.collbench.clone()];
    command.extend(plan.args.iter().cloned());
    lines.push(format!(
        "exec {} \\\n  {}",
        sh_join(&mpirun),
        sh_join(&command)
    ));
    lines.join("\n") + "\n"
}

pub fn build(plan: &Plan) -> Object<MpiJobSpec> {
    let launcher = Container {
        name: "launcher",
        image: plan.image.clone(),
        command: vec!["/bin/sh".into(), "-c".into(), launcher_script(plan)],
        args: Vec::new(),
        env: plan
            .env
            .iter()
            .map(|(k, v)| EnvVar {
                name: k.clone(),
                value: v.clone(),
            })
            .collect(),
        ports: Vec::new(),
        resources: None,
        volume_mounts: Vec::new(),
    };
    let worker = Container {
        name: "worker",
        image: plan.image.clone(),
        // mpirun reaches the workers over ssh; the operator provides the keys.
        command: vec!["/usr/sbin/sshd".into(), "-De".into()],
        args: Vec::new(),
        env: Vec::new(),
        ports: Vec::new(),
        resources: Some(pod::resources(plan)),
        volume_mounts: vec![pod::shm_mount()],
    };
    let replica_specs = BTreeMap::from([
        (
            "Launcher",
            ReplicaSpec {
                replicas: 1,
                restart_policy: "Never",
                template: pod::template(plan, None, vec![launcher], Vec::new()),
            },
        ),
        (
            "Worker",
            ReplicaSpec {
                replicas: plan.nodes,
                restart_policy: "Never",
                template: pod::gpu_template(plan, None, vec![worker], vec![pod::shm_volume()]),
            },
        ),
    ]);
    Object {
        api_version: "kubeflow.org/v2beta1",
        kind: "MPIJob",
        metadata: pod::workload_meta(plan),
        spec: MpiJobSpec {
            slots_per_worker: plan.gpus_per_node,
            run_policy: RunPolicy {
                // Stop the sshd workers once the launcher has finished.
                clean_pod_policy: "Running",
                backoff_limit: 0,
            },
            mpi_implementation: "OpenMPI",
            mpi_replica_specs: replica_specs,
        },
    }
}
