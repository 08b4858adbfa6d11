//! Typed Kubernetes objects, only the fields collbench writes. serde_norway
//! turns them into YAML, so every user value is quoted correctly whatever it
//! contains; field names follow the API's camelCase spelling.

use std::collections::BTreeMap;

use serde::Serialize;

/// Labels, resource lists and other string maps, sorted for stable output.
pub type Map<V> = BTreeMap<String, V>;

/// Any top-level object: apiVersion, kind, metadata, spec.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Object<S> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: S,
}

#[derive(Serialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub labels: Map<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String>,
}

/// core/v1 ServiceSpec.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// "None" makes the Service headless: DNS names for each pod, no proxy.
    #[serde(rename = "clusterIP")]
    pub cluster_ip: &'static str,
    pub selector: Map<String>,
    pub ports: Vec<ServicePort>,
    /// Publish pod names before the pods are Ready, so ranks that start early
    /// can already resolve rank 0.
    pub publish_not_ready_addresses: bool,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    pub name: String,
    pub port: u16,
    pub target_port: u16,
}

/// batch/v1 JobSpec.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub parallelism: u32,
    pub completions: u32,
    pub completion_mode: &'static str,
    pub backoff_limit: u32,
    pub template: PodTemplateSpec,
}

/// batch/v1 JobTemplateSpec (inside a JobSet).
#[derive(Serialize, Debug)]
pub struct JobTemplateSpec {
    pub spec: JobSpec,
}

#[derive(Serialize, Debug)]
pub struct PodTemplateSpec {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub restart_policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: &'static str,
    pub image: String,
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Serialize, Debug)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    pub name: &'static str,
    pub container_port: u16,
}

/// Requests and limits; equal, as extended resources such as GPUs require.
#[derive(Serialize, Debug)]
pub struct Resources {
    pub requests: Map<u32>,
    pub limits: Map<u32>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: &'static str,
    pub empty_dir: EmptyDir,
}

#[derive(Serialize, Debug)]
pub struct EmptyDir {
    /// "Memory" for a tmpfs; none for the node's disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub medium: Option<&'static str>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: &'static str,
    pub mount_path: &'static str,
}

/// jobset.x-k8s.io/v1alpha2 JobSetSpec.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    pub network: JobSetNetwork,
    pub replicated_jobs: Vec<ReplicatedJob>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JobSetNetwork {
    #[serde(rename = "enableDNSHostnames")]
    pub enable_dns_hostnames: bool,
    pub subdomain: String,
    pub publish_not_ready_addresses: bool,
}

#[derive(Serialize, Debug)]
pub struct ReplicatedJob {
    pub name: &'static str,
    pub replicas: u32,
    pub template: JobTemplateSpec,
}

/// kubeflow.org/v2beta1 MPIJobSpec.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct MpiJobSpec {
    pub slots_per_worker: u32,
    pub run_policy: RunPolicy,
    pub mpi_implementation: &'static str,
    /// Keyed "Launcher" and "Worker".
    pub mpi_replica_specs: BTreeMap<&'static str, ReplicaSpec>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    pub clean_pod_policy: &'static str,
    pub backoff_limit: u32,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    pub replicas: u32,
    pub restart_policy: &'static str,
    pub template: PodTemplateSpec,
}
