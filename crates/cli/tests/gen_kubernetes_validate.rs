//! The generated core objects pass the Kubernetes 1.33 OpenAPI schemas,
//! checked offline by `kubernetes-validate --strict` (PyPI), which also
//! refuses unknown fields. JobSet and MPIJob are CRDs the tool does not know,
//! so their embedded Job and pod templates are wrapped into a batch/v1 Job and
//! a v1 PodTemplate and checked the same way (the CRD fields themselves are
//! checked in `crd_schema.rs`).
//!
//! Gated on COLLBENCH_K8S_TESTS=1 (`pip install kubernetes-validate`); when it
//! is set and the command is missing, the test fails rather than skipping.

mod gen_common;
use gen_common::gen;

use serde::Deserialize;
use serde_norway::{Mapping, Value};
use std::path::PathBuf;
use std::process::Command;

const VERSION: &str = "1.33.0";

fn enabled() -> bool {
    std::env::var("COLLBENCH_K8S_TESTS").as_deref() == Ok("1")
}

fn docs(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

fn generate(kind: &str) -> String {
    generate_with(kind, &[])
}

/// [`generate`] with more flags.
fn generate_with(kind: &str, extra: &[&str]) -> String {
    let mut argv = vec![
        "k8s",
        "--kind",
        kind,
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--image",
        "reg.example/collbench:1",
        "--name",
        "nccl",
        "--namespace",
        "bench",
        "--resource",
        "vpc.amazonaws.com/efa=4",
        "--queue",
        "q",
        "--env",
        "NCCL_DEBUG=INFO",
        "--env",
        "QUOTED='$(x)'\n---",
    ];
    argv.extend_from_slice(extra);
    gen(&argv).unwrap()
}

/// Wraps a value into a top-level object of the given kind.
fn object(api_version: &str, kind: &str, name: &str, field: &str, body: &Value) -> Value {
    let mut m = Mapping::new();
    m.insert("apiVersion".into(), api_version.into());
    m.insert("kind".into(), kind.into());
    let mut meta = Mapping::new();
    meta.insert("name".into(), name.into());
    m.insert("metadata".into(), Value::Mapping(meta));
    m.insert(field.into(), body.clone());
    Value::Mapping(m)
}

/// Runs kubernetes-validate on `docs`; Ok(()) when every one passes.
fn validate(name: &str, docs: &[Value]) -> Result<(), String> {
    let text = docs
        .iter()
        .map(|d| serde_norway::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n");
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("kv-{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["-k", VERSION, "--strict"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!("COLLBENCH_K8S_TESTS=1 but kubernetes-validate cannot run ({e}); pip install kubernetes-validate")
        });
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A kind without a schema is only a warning; that must not pass silently.
    if out.status.success() && !log.contains("WARN") && log.matches("passed").count() == docs.len()
    {
        Ok(())
    } else {
        Err(log)
    }
}

#[test]
fn manifests_pass_kubernetes_validate_strict() {
    if !enabled() {
        eprintln!("skipped: set COLLBENCH_K8S_TESTS=1 to run kubernetes-validate");
        return;
    }

    // Service + Indexed Job as generated.
    let indexed = docs(&generate("indexed-job"));
    assert_eq!(indexed[1]["kind"], "Job");
    validate("indexed-job", &indexed).unwrap();

    // Service + the JobSet's Job template as a Job of its own.
    let jobset = docs(&generate("jobset"));
    let job_template = &jobset[1]["spec"]["replicatedJobs"][0]["template"]["spec"];
    let job = object("batch/v1", "Job", "nccl-worker-0", "spec", job_template);
    validate("jobset", &[jobset[0].clone(), job]).unwrap();

    // The MPIJob's launcher and worker pod templates as PodTemplates.
    let mpijob = docs(&generate("mpijob"));
    let specs = &mpijob[0]["spec"]["mpiReplicaSpecs"];
    let templates: Vec<Value> = ["Launcher", "Worker"]
        .iter()
        .map(|r| {
            object(
                "v1",
                "PodTemplate",
                &r.to_lowercase(),
                "template",
                &specs[*r]["template"],
            )
        })
        .collect();
    validate("mpijob", &templates).unwrap();
}

/// `--inject-into` (an init container, a shared emptyDir) and Kueue's
/// topology annotation keep the objects valid.
#[test]
fn injected_pods_with_topology_pass_kubernetes_validate_strict() {
    if !enabled() {
        eprintln!("skipped: set COLLBENCH_K8S_TESTS=1 to run kubernetes-validate");
        return;
    }
    let extra = [
        "--inject-into",
        "nvcr.io/nvidia/pytorch:25.01-py3",
        "--topology-required",
        "cloud.google.com/gce-topology-block",
    ];
    let indexed = docs(&generate_with("indexed-job", &extra));
    let pod = &indexed[1]["spec"]["template"];
    assert_eq!(pod["spec"]["initContainers"][0]["name"], "collbench-inject");
    assert_eq!(
        pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"],
        "cloud.google.com/gce-topology-block"
    );
    validate("indexed-job-injected", &indexed).unwrap();

    let jobset = docs(&generate_with("jobset", &extra));
    let job_template = &jobset[1]["spec"]["replicatedJobs"][0]["template"]["spec"];
    let job = object("batch/v1", "Job", "nccl-worker-0", "spec", job_template);
    validate("jobset-injected", &[jobset[0].clone(), job]).unwrap();

    let mpijob = docs(&generate_with("mpijob", &extra));
    let worker = &mpijob[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"];
    let template = object("v1", "PodTemplate", "worker", "template", worker);
    validate("mpijob-injected", &[template]).unwrap();
}

#[test]
fn kubernetes_validate_refuses_a_misspelt_field() {
    if !enabled() {
        eprintln!("skipped: set COLLBENCH_K8S_TESTS=1 to run kubernetes-validate");
        return;
    }
    // Proves the check above can fail: the same Job with one field misspelt.
    let mut indexed = docs(&generate("indexed-job"));
    let spec = indexed[1]["spec"].as_mapping_mut().unwrap();
    let limit = spec.remove("backoffLimit").unwrap();
    spec.insert("backofLimit".into(), limit);
    let err = validate("misspelt", &indexed).unwrap_err();
    assert!(err.contains("backofLimit"), "{err}");
}
