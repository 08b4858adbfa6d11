//! `collbench gen k8s`: multi-document YAML for one of three workloads.
//!
//! - `jobset` and `indexed-job`: one pod per node, one collbench process per
//!   pod driving all of the node's GPUs (`-g G`), so the world is the nodes.
//!   Each pod learns its rank from JOB_COMPLETION_INDEX, the world size from
//!   COLLBENCH_WORLD_SIZE and rank 0's address from COLLBENCH_RENDEZVOUS, the
//!   DNS name of the index-0 pod through a headless Service written alongside.
//! - `mpijob`: Kubeflow mpi-operator's launcher runs `mpirun` over worker pods,
//!   one rank per GPU; the operator writes its own Service and hostfile.

mod indexed_job;
mod inject;
mod jobset;
mod kueue;
mod mpijob;
mod objects;
mod pod;
mod service;

use crate::error::{Error, Result};
use serde::Serialize;

use crate::{validate, CommonOptions};

pub use kueue::Topology;

/// Which workload object to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum K8sKind {
    /// JobSet (jobset.x-k8s.io/v1alpha2), as GKE's NCCL examples use.
    JobSet,
    /// batch/v1 Job with completionMode Indexed.
    IndexedJob,
    /// Kubeflow mpi-operator MPIJob (kubeflow.org/v2beta1).
    MpiJob,
}

/// `collbench gen k8s` arguments.
#[derive(Debug, Clone)]
pub struct K8sOptions {
    /// Workload kind.
    pub kind: K8sKind,
    /// Number of nodes (one pod per node).
    pub nodes: u32,
    /// GPUs per node (and per pod); `run` gets `-g G` unless the args set -g.
    pub gpus_per_node: u32,
    /// Container image holding collbench (and sshd + OpenMPI for mpijob);
    /// with `inject_into`, the image collbench is copied from.
    pub image: String,
    /// The user's image the pods run instead, collbench injected into it
    /// by an init container (`--inject-into`).
    pub inject_into: Option<String>,
    /// Kueue topology-aware scheduling of the GPU pods.
    pub topology: Option<Topology>,
    /// Name of the workload and of its Service.
    pub name: String,
    /// Namespace to create the objects in [default: the current one].
    pub namespace: Option<String>,
    /// Extended resource name of the GPUs.
    pub gpu_resource: String,
    /// Extra per-pod resource (repeatable), e.g. rdma/ib=1 or vpc.amazonaws.com/efa=4.
    pub resources: Vec<String>,
    /// Kueue LocalQueue to submit to (label kueue.x-k8s.io/queue-name).
    pub queue: Option<String>,
    /// TCP port rank 0 listens on for the other ranks.
    pub port: u16,
    pub common: CommonOptions,
}

/// Validated inputs, shared by every kind's builder.
pub(crate) struct Plan {
    pub name: String,
    pub namespace: Option<String>,
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// The image the pods run.
    pub image: String,
    /// With `--inject-into`: the collbench image the init container copies
    /// the binary from.
    pub inject_from: Option<String>,
    pub topology: Option<Topology>,
    /// GPUs first, then the extra resources, each with its per-pod count.
    pub resources: Vec<(String, u32)>,
    pub queue: Option<String>,
    pub port: u16,
    pub env: Vec<(String, String)>,
    pub collbench: String,
    pub args: Vec<String>,
}

impl Plan {
    fn from_args(a: &K8sOptions) -> Result<Plan> {
        validate::rfc1123_label("--name", &a.name)?;
        if let Some(ns) = &a.namespace {
            validate::rfc1123_label("--namespace", ns)?;
        }
        if let Some(q) = &a.queue {
            validate::rfc1123_label("--queue", q)?;
        }
        validate::positive("--nodes", a.nodes)?;
        validate::positive("--gpus-per-node", a.gpus_per_node)?;
        validate::port("--port", a.port)?;
        validate::image("--image", &a.image)?;
        if let Some(user_image) = &a.inject_into {
            validate::image("--inject-into", user_image)?;
        }
        if let Some(t) = &a.topology {
            validate::label_key(t.flag(), t.annotation().1)?;
        }
        validate::resource_name("--gpu-resource", &a.gpu_resource)?;
        if a.common.collbench.is_empty() {
            return Err(Error::Invalid(
                "invalid --collbench \"\": must name the collbench executable".into(),
            ));
        }
        let mut resources = vec![(a.gpu_resource.clone(), a.gpus_per_node)];
        for entry in &a.resources {
            let (name, count) = validate::resource(entry)?;
            if resources.iter().any(|(n, _)| *n == name) {
                return Err(Error::Invalid(format!(
                    "invalid --resource {entry:?}: {name} is already requested"
                )));
            }
            resources.push((name, count));
        }
        Ok(Plan {
            name: a.name.clone(),
            namespace: a.namespace.clone(),
            nodes: a.nodes,
            gpus_per_node: a.gpus_per_node,
            // Injected, the pods run the user's image and the copied binary
            // (a bare `collbench` would name whatever their PATH holds).
            image: a.inject_into.clone().unwrap_or_else(|| a.image.clone()),
            inject_from: a.inject_into.as_ref().map(|_| a.image.clone()),
            topology: a.topology.clone(),
            resources,
            queue: a.queue.clone(),
            port: a.port,
            env: validate::env_vars(&a.common.env)?,
            collbench: match (&a.inject_into, a.common.collbench.as_str()) {
                (Some(_), "collbench") => inject::PROGRAM.to_string(),
                _ => a.common.collbench.clone(),
            },
            args: a.common.collbench_args(),
        })
    }

    /// Whether the user set `name` with --env (theirs then wins over ours).
    fn user_sets(&self, name: &str) -> bool {
        self.env.iter().any(|(k, _)| k == name)
    }
}

/// A pod's host name is its DNS label under the Service: it must fit the
/// 63-character label limit, or Kubernetes truncates it and rank 0's address
/// no longer resolves.
fn check_hostname(flag_value: &str, longest_hostname: &str) -> Result<()> {
    if longest_hostname.len() > 63 {
        return Err(Error::Invalid(format!(
            "invalid --name {flag_value:?}: pod host names such as {longest_hostname:?} \
             would exceed 63 characters; choose a shorter name"
        )));
    }
    Ok(())
}

/// Renders the manifests as multi-document YAML.
pub fn render(args: &K8sOptions) -> Result<String> {
    let plan = Plan::from_args(args)?;
    let mut out = String::from(match args.kind {
        K8sKind::JobSet | K8sKind::IndexedJob => {
            "# Generated by `collbench gen k8s`: a headless Service, so that every pod can\n\
             # resolve rank 0, and the workload: one pod per node, one collbench per pod.\n"
        }
        K8sKind::MpiJob => {
            "# Generated by `collbench gen k8s --kind mpijob`: the mpi-operator launcher runs\n\
             # mpirun over the workers (sshd), one collbench rank per GPU.\n"
        }
    });
    let docs = match args.kind {
        K8sKind::JobSet => {
            check_hostname(&plan.name, &jobset::longest_hostname(&plan))?;
            vec![yaml(&service::build(&plan))?, yaml(&jobset::build(&plan))?]
        }
        K8sKind::IndexedJob => {
            check_hostname(&plan.name, &indexed_job::longest_hostname(&plan))?;
            vec![
                yaml(&service::build(&plan))?,
                yaml(&indexed_job::build(&plan))?,
            ]
        }
        K8sKind::MpiJob => {
            check_hostname(&plan.name, &mpijob::longest_hostname(&plan))?;
            vec![yaml(&mpijob::build(&plan))?]
        }
    };
    // `---` only between documents: one after the header comment would open
    // an empty document, which some tools refuse.
    out.push_str(&docs.join("---\n"));
    Ok(out)
}

fn yaml<T: Serialize>(doc: &T) -> Result<String> {
    Ok(serde_norway::to_string(doc)?)
}
