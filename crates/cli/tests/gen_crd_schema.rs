//! The project's own schema for the two CRDs kubernetes-validate does not
//! know: typed mirrors, with `deny_unknown_fields`, of the JobSet v1alpha2
//! (kubernetes-sigs/jobset `api/jobset/v1alpha2/jobset_types.go`) and MPIJob
//! v2beta1 (kubeflow/mpi-operator `pkg/apis/kubeflow/v2beta1/types.go`)
//! fields, written from those API types and independent of the generator's
//! own structs. Optional CRD fields collbench does not write are accepted as
//! any value; the embedded pod spec mirrors only the fields collbench writes
//! (kubernetes_validate.rs checks it against the real core schema).
//!
//! Deserialising the generated YAML must succeed; a misspelt field must fail.
//! Also checks the wiring between objects: rank 0's address resolves through
//! the Service that selects the pods.

mod gen_common;
use gen_common::gen_line;

use serde::Deserialize;
use serde_norway::Value;
use std::collections::BTreeMap;

// ---- shared core/v1 and batch/v1 subset ----

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ObjectMeta {
    name: Option<String>,
    namespace: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[allow(dead_code)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobSpec {
    parallelism: Option<i32>,
    completions: Option<i32>,
    completion_mode: Option<CompletionMode>,
    backoff_limit: Option<i32>,
    template: PodTemplateSpec,
}

#[derive(Deserialize, Debug, PartialEq)]
enum CompletionMode {
    NonIndexed,
    Indexed,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct PodTemplateSpec {
    metadata: Option<ObjectMeta>,
    spec: PodSpec,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodSpec {
    restart_policy: Option<RestartPolicy>,
    subdomain: Option<String>,
    containers: Vec<Container>,
    #[serde(default)]
    volumes: Vec<Volume>,
}

#[derive(Deserialize, Debug, PartialEq)]
enum RestartPolicy {
    Always,
    OnFailure,
    Never,
    ExitCode,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Container {
    #[allow(dead_code)]
    name: String,
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<EnvVar>,
    #[serde(default)]
    #[allow(dead_code)]
    ports: Vec<ContainerPort>,
    resources: Option<Resources>,
    #[serde(default)]
    volume_mounts: Vec<VolumeMount>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct EnvVar {
    name: String,
    value: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContainerPort {
    #[allow(dead_code)]
    name: Option<String>,
    #[allow(dead_code)]
    container_port: u16,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Resources {
    requests: BTreeMap<String, u32>,
    limits: BTreeMap<String, u32>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Volume {
    name: String,
    empty_dir: EmptyDir,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EmptyDir {
    medium: Option<String>,
    #[allow(dead_code)]
    size_limit: Option<Value>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VolumeMount {
    name: String,
    mount_path: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Service {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: ServiceSpec,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceSpec {
    #[serde(rename = "clusterIP")]
    cluster_ip: String,
    selector: BTreeMap<String, String>,
    #[allow(dead_code)]
    ports: Vec<Value>,
    publish_not_ready_addresses: Option<bool>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Job {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: JobSpec,
}

// ---- jobset.x-k8s.io/v1alpha2 ----

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobSet {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: JobSetSpec,
}

#[allow(dead_code)]
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JobSetSpec {
    replicated_jobs: Vec<ReplicatedJob>,
    network: Option<Network>,
    success_policy: Option<Value>,
    failure_policy: Option<Value>,
    startup_policy: Option<Value>,
    suspend: Option<bool>,
    coordinator: Option<Value>,
    managed_by: Option<String>,
    #[serde(rename = "ttlSecondsAfterFinished")]
    ttl_seconds_after_finished: Option<i32>,
    volume_claim_policies: Option<Value>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Network {
    #[serde(rename = "enableDNSHostnames")]
    enable_dns_hostnames: Option<bool>,
    subdomain: Option<String>,
    publish_not_ready_addresses: Option<bool>,
}

#[allow(dead_code)]
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplicatedJob {
    name: String,
    group_name: Option<String>,
    template: JobTemplateSpec,
    replicas: Option<i32>,
    depends_on: Option<Value>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct JobTemplateSpec {
    #[allow(dead_code)]
    metadata: Option<ObjectMeta>,
    spec: JobSpec,
}

// ---- kubeflow.org/v2beta1 ----

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MpiJob {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: MpiJobSpec,
}

#[allow(dead_code)]
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MpiJobSpec {
    slots_per_worker: Option<i32>,
    run_policy: Option<RunPolicy>,
    mpi_replica_specs: BTreeMap<MpiReplicaType, ReplicaSpec>,
    ssh_auth_mount_path: Option<String>,
    launcher_creation_policy: Option<String>,
    mpi_implementation: Option<MpiImplementation>,
}

#[derive(Deserialize, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum MpiReplicaType {
    Launcher,
    Worker,
}

#[derive(Deserialize, Debug, PartialEq)]
enum MpiImplementation {
    OpenMPI,
    Intel,
    #[serde(rename = "MPICH")]
    Mpich,
}

#[allow(dead_code)]
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RunPolicy {
    clean_pod_policy: Option<CleanPodPolicy>,
    #[serde(rename = "ttlSecondsAfterFinished")]
    ttl_seconds_after_finished: Option<i32>,
    active_deadline_seconds: Option<i64>,
    backoff_limit: Option<i32>,
    scheduling_policy: Option<Value>,
    suspend: Option<bool>,
    managed_by: Option<String>,
}

#[derive(Deserialize, Debug, PartialEq)]
enum CleanPodPolicy {
    None,
    Running,
    All,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplicaSpec {
    replicas: Option<i32>,
    restart_policy: Option<RestartPolicy>,
    template: PodTemplateSpec,
}

// ---- helpers ----

const NODES: i32 = 3;

fn generate(kind: &str) -> String {
    gen_line(&format!(
        "k8s --kind {kind} --nodes {NODES} --gpus-per-node 8 \
         --image reg.example/collbench:1 --name nccl --resource rdma/ib=1 \
         --queue q --env NCCL_NVLS_ENABLE=0"
    ))
    .unwrap()
}

/// Splits the multi-document YAML and deserialises each document as `T`.
fn docs(text: &str) -> Vec<serde_norway::Deserializer<'_>> {
    serde_norway::Deserializer::from_str(text).collect()
}

fn env<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.value.as_str())
}

/// Common checks of the one-pod-per-node pod template.
fn check_pod(t: &PodTemplateSpec, svc: &Service, rank0_host: &str) {
    let labels = &t.metadata.as_ref().expect("pod labels").labels;
    for (k, v) in &svc.spec.selector {
        assert_eq!(labels.get(k), Some(v), "the Service must select the pods");
    }
    assert_eq!(t.spec.restart_policy, Some(RestartPolicy::Never));
    let c = &t.spec.containers[0];
    assert_eq!(c.image, "reg.example/collbench:1");
    assert_eq!(c.command, ["collbench"]);
    assert_eq!(
        c.args.last().map(String::as_str),
        Some("8"),
        "run gets -g 8"
    );
    assert_eq!(
        env(c, "COLLBENCH_WORLD_SIZE"),
        Some(NODES.to_string().as_str())
    );
    assert_eq!(
        env(c, "COLLBENCH_RENDEZVOUS"),
        Some(format!("{rank0_host}:29517").as_str())
    );
    assert_eq!(env(c, "NCCL_NVLS_ENABLE"), Some("0"));
    let res = c.resources.as_ref().unwrap();
    for list in [&res.requests, &res.limits] {
        assert_eq!(list.get("nvidia.com/gpu"), Some(&8));
        assert_eq!(list.get("rdma/ib"), Some(&1));
    }
    check_shm(t);
}

fn check_shm(t: &PodTemplateSpec) {
    let shm = t.spec.containers[0]
        .volume_mounts
        .iter()
        .find(|m| m.mount_path == "/dev/shm")
        .expect("/dev/shm mounted");
    let vol = t.spec.volumes.iter().find(|v| v.name == shm.name).unwrap();
    assert_eq!(vol.empty_dir.medium.as_deref(), Some("Memory"));
}

/// The two documents of a `--kind` that comes with a Service: the Service,
/// then the workload.
fn service_and_workload<T: serde::de::DeserializeOwned>(kind: &str) -> (Service, T) {
    let text = generate(kind);
    let mut it = docs(&text).into_iter();
    let svc = Service::deserialize(it.next().unwrap()).unwrap();
    let workload = T::deserialize(it.next().unwrap()).unwrap();
    assert!(it.next().is_none());
    (svc, workload)
}

/// One pod per node, all at once, indexed, never retried.
fn check_indexed(job: &JobSpec) {
    assert_eq!(
        (job.parallelism, job.completions),
        (Some(NODES), Some(NODES))
    );
    assert_eq!(job.completion_mode, Some(CompletionMode::Indexed));
    assert_eq!(job.backoff_limit, Some(0));
}

fn check_service(svc: &Service, name: &str) {
    assert_eq!(
        (svc.api_version.as_str(), svc.kind.as_str()),
        ("v1", "Service")
    );
    assert_eq!(svc.metadata.name.as_deref(), Some(name));
    assert_eq!(svc.spec.cluster_ip, "None", "headless");
    assert_eq!(svc.spec.publish_not_ready_addresses, Some(true));
}

// ---- tests ----

#[test]
fn jobset_matches_the_crd_and_wires_rank0_through_the_service() {
    let (svc, js): (_, JobSet) = service_and_workload("jobset");

    assert_eq!(js.api_version, "jobset.x-k8s.io/v1alpha2");
    assert_eq!(js.kind, "JobSet");
    assert_eq!(
        js.metadata
            .labels
            .get("kueue.x-k8s.io/queue-name")
            .map(String::as_str),
        Some("q")
    );
    check_service(&svc, "nccl");
    let net = js.spec.network.as_ref().unwrap();
    assert_eq!(net.enable_dns_hostnames, Some(true));
    assert_eq!(net.publish_not_ready_addresses, Some(true));
    assert_eq!(net.subdomain.as_deref(), svc.metadata.name.as_deref());

    let [rj] = &js.spec.replicated_jobs[..] else {
        panic!("one replicatedJob")
    };
    assert_eq!(rj.replicas, Some(1));
    let job = &rj.template.spec;
    check_indexed(job);
    // JobSet pod host names: <jobset>-<replicatedJob>-<job index>-<pod index>.
    let rank0 = format!("nccl-{}-0-0.{}", rj.name, net.subdomain.as_deref().unwrap());
    check_pod(&job.template, &svc, &rank0);
}

#[test]
fn indexed_job_wires_rank0_through_the_service() {
    let (svc, job): (_, Job) = service_and_workload("indexed-job");
    assert_eq!(
        (job.api_version.as_str(), job.kind.as_str()),
        ("batch/v1", "Job")
    );
    check_service(&svc, "nccl");
    let spec = &job.spec;
    check_indexed(spec);
    assert_eq!(spec.template.spec.subdomain.as_deref(), Some("nccl"));
    assert_eq!(
        job.metadata
            .labels
            .get("kueue.x-k8s.io/queue-name")
            .map(String::as_str),
        Some("q")
    );
    check_pod(&spec.template, &svc, "nccl-0.nccl");
}

#[test]
fn mpijob_matches_the_crd() {
    let text = generate("mpijob");
    let mut it = docs(&text).into_iter();
    let job = MpiJob::deserialize(it.next().unwrap()).unwrap();
    assert!(it.next().is_none());
    assert_eq!(job.api_version, "kubeflow.org/v2beta1");
    assert_eq!(job.kind, "MPIJob");
    assert_eq!(job.metadata.namespace, None);
    assert_eq!(job.spec.slots_per_worker, Some(8));
    assert_eq!(
        job.spec.mpi_implementation,
        Some(MpiImplementation::OpenMPI)
    );
    let run = job.spec.run_policy.as_ref().unwrap();
    assert_eq!(run.backoff_limit, Some(0));
    assert_eq!(run.clean_pod_policy, Some(CleanPodPolicy::Running));

    let launcher = &job.spec.mpi_replica_specs[&MpiReplicaType::Launcher];
    assert_eq!(launcher.replicas, Some(1));
    assert_eq!(launcher.restart_policy, Some(RestartPolicy::Never));
    let script = &launcher.template.spec.containers[0].command[2];
    assert!(
        script.contains("mpirun --allow-run-as-root -np 24 --bind-to none"),
        "{script}"
    );
    assert!(script.contains("-x NCCL_NVLS_ENABLE"), "{script}");

    let worker = &job.spec.mpi_replica_specs[&MpiReplicaType::Worker];
    assert_eq!(worker.replicas, Some(NODES));
    assert_eq!(worker.restart_policy, Some(RestartPolicy::Never));
    let c = &worker.template.spec.containers[0];
    assert_eq!(
        c.resources.as_ref().unwrap().limits.get("nvidia.com/gpu"),
        Some(&8)
    );
    check_shm(&worker.template);
}

#[test]
fn misspelt_fields_are_refused() {
    // Each case: generated text with one field misspelt, and how to read it.
    let jobset = generate("jobset");
    let mpijob = generate("mpijob");
    let cases: [(&str, &str, &str); 5] = [
        ("jobset", "enableDNSHostnames", "enableDnsHostnames"),
        ("jobset", "replicatedJobs", "replicatedJob"),
        (
            "jobset",
            "completionMode: Indexed",
            "completionMode: indexed",
        ),
        ("mpijob", "slotsPerWorker", "slotPerWorker"),
        ("mpijob", "Launcher:", "launcher:"),
    ];
    for (kind, good, bad) in cases {
        let text = if kind == "jobset" { &jobset } else { &mpijob };
        assert!(text.contains(good), "{good}");
        let broken = text.replacen(good, bad, 1);
        let result = match kind {
            "jobset" => {
                let doc = docs(&broken).into_iter().nth(1).unwrap();
                JobSet::deserialize(doc).map(|_| ())
            }
            _ => MpiJob::deserialize(docs(&broken).into_iter().next().unwrap()).map(|_| ()),
        };
        assert!(result.is_err(), "{kind}: {bad} was accepted");
    }
}
