//! `collbench gen` flags, converted into [`collbench_gen::GenOptions`].
//!
//! Self-contained (clap, collbench-gen and std only): the CLI's tests of
//! the launch files include this file to parse command lines exactly as
//! the CLI does.

use collbench_gen::{self as gen, ContainerRuntime as ContainerRuntimeLib, K8sKind as K8sKindLib};
use collbench_gen::{DEFAULT_IMAGE, DEFAULT_RENDEZVOUS_PORT};
use std::path::PathBuf;

/// `collbench gen ...` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// Write the launch file here instead of to standard output.
    #[arg(short, long, value_name = "FILE", global = true)]
    pub output: Option<PathBuf>,

    /// Replace an existing --output file.
    #[arg(long, global = true)]
    pub force: bool,

    #[command(subcommand)]
    pub target: GenTarget,
}

/// What to generate.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum GenTarget {
    /// An sbatch script: one task per GPU through srun, no MPI needed.
    Slurm(SlurmArgs),
    /// Kubernetes manifests: headless Service plus a JobSet, Indexed Job or MPIJob.
    K8s(K8sArgs),
    /// An OpenMPI `mpirun` command line.
    Mpirun(MpirunArgs),
}

/// Options every target shares: the collbench command and extra environment.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Environment variable for every rank (repeatable), e.g. NCCL_DEBUG=INFO.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,

    /// The collbench executable as the launched ranks see it (a path inside the
    /// image for containers).
    #[arg(long, value_name = "PATH", default_value = "collbench")]
    pub collbench: String,

    /// collbench arguments for every rank [default: run all -b 8 -e 8G -f 2].
    #[arg(last = true, value_name = "COLLBENCH ARGS")]
    pub args: Vec<String>,
}

value_enum! {
    /// How each srun task enters the container image, if any.
    pub enum ContainerRuntime => ContainerRuntimeLib {
        /// NVIDIA pyxis/enroot: `srun --container-image=IMAGE`.
        Pyxis,
        /// NERSC podman-hpc: `podman-hpc run --gpu ... IMAGE`.
        PodmanHpc,
        /// Apptainer (Singularity): `apptainer exec --nv IMAGE`.
        Apptainer,
        /// Run collbench directly on the node.
        None,
    }
}

/// `collbench gen slurm` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct SlurmArgs {
    /// Number of nodes.
    #[arg(long, value_name = "N")]
    pub nodes: u32,
    /// GPUs per node; also the tasks per node (one task per GPU).
    #[arg(long, value_name = "G")]
    pub gpus_per_node: u32,
    /// Slurm partition.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Slurm account to charge.
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// Time limit, e.g. 00:30:00.
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// Slurm job name.
    #[arg(long, value_name = "NAME", default_value = "collbench")]
    pub job_name: String,
    /// Container image the tasks run in; alone, or with only
    /// --container-runtime, collbench's image (ghcr.io/collbench/collbench:VERSION,
    /// built from dist/Containerfile: build and push it, or name yours).
    #[arg(long, value_name = "IMAGE", num_args = 0..=1)]
    pub container: Option<Option<String>>,
    /// How tasks enter the container [default: pyxis with --container, else none].
    #[arg(long, value_enum, value_name = "RUNTIME")]
    pub container_runtime: Option<ContainerRuntime>,
    /// Folder under which each job writes its own `<job-name>-<job-id>/` folder.
    #[arg(long, value_name = "DIR", default_value = "collbench-results")]
    pub output_dir: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

value_enum! {
    /// Which workload object to write.
    pub enum K8sKind => K8sKindLib {
        /// JobSet (jobset.x-k8s.io/v1alpha2), as GKE's NCCL examples use.
        #[value(name = "jobset")]
        JobSet,
        /// batch/v1 Job with completionMode Indexed.
        #[value(name = "indexed-job")]
        IndexedJob,
        /// Kubeflow mpi-operator MPIJob (kubeflow.org/v2beta1).
        #[value(name = "mpijob")]
        MpiJob,
    }
}

/// `collbench gen k8s` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct K8sArgs {
    /// Workload kind.
    #[arg(long, value_enum)]
    pub kind: K8sKind,
    /// Number of nodes (one pod per node).
    #[arg(long, value_name = "N")]
    pub nodes: u32,
    /// GPUs per node (and per pod); `run` gets `-g G` unless the args set -g.
    #[arg(long, value_name = "G")]
    pub gpus_per_node: u32,
    /// Container image holding collbench (and sshd + OpenMPI for mpijob); the
    /// default is built from dist/Containerfile: build and push it, or name yours.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Run the pods in this image (your training image, with its NCCL); an init
    /// container copies collbench from --image into a volume they share.
    #[arg(long, value_name = "IMAGE")]
    pub inject_into: Option<String>,
    /// Kueue topology-aware scheduling: every pod within one domain of this node
    /// label, e.g. cloud.google.com/gce-topology-block or kubernetes.io/hostname.
    #[arg(long, value_name = "LEVEL", conflicts_with = "topology_preferred")]
    pub topology_required: Option<String>,
    /// Kueue topology-aware scheduling: within one domain of this node label
    /// where it fits, else as close as Kueue can.
    #[arg(long, value_name = "LEVEL")]
    pub topology_preferred: Option<String>,
    /// Name of the workload and of its Service.
    #[arg(long, value_name = "NAME", default_value = "collbench")]
    pub name: String,
    /// Namespace to create the objects in [default: the current one].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Extended resource name of the GPUs.
    #[arg(long, value_name = "NAME", default_value = "nvidia.com/gpu")]
    pub gpu_resource: String,
    /// Extra per-pod resource (repeatable), e.g. rdma/ib=1 or vpc.amazonaws.com/efa=4.
    #[arg(long = "resource", value_name = "NAME=COUNT")]
    pub resources: Vec<String>,
    /// Kueue LocalQueue to submit to (label kueue.x-k8s.io/queue-name).
    #[arg(long, value_name = "NAME")]
    pub queue: Option<String>,
    /// TCP port rank 0 listens on for the other ranks.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_RENDEZVOUS_PORT)]
    pub port: u16,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `collbench gen mpirun` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct MpirunArgs {
    /// Hosts and their slots (GPUs), e.g. h1:8,h2:8.
    #[arg(long, value_name = "HOST:SLOTS,...")]
    pub hosts: String,
    /// TCP port rank 0 listens on for the other ranks.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_RENDEZVOUS_PORT)]
    pub port: u16,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl From<&GenArgs> for gen::GenOptions {
    fn from(a: &GenArgs) -> gen::GenOptions {
        gen::GenOptions {
            output: a.output.clone(),
            target: match &a.target {
                GenTarget::Slurm(s) => gen::GenTarget::Slurm(s.into()),
                GenTarget::K8s(k) => gen::GenTarget::K8s(k.into()),
                GenTarget::Mpirun(m) => gen::GenTarget::Mpirun(m.into()),
            },
        }
    }
}

impl From<&CommonArgs> for gen::CommonOptions {
    fn from(a: &CommonArgs) -> gen::CommonOptions {
        gen::CommonOptions {
            env: a.env.clone(),
            collbench: a.collbench.clone(),
            args: a.args.clone(),
        }
    }
}

impl From<&SlurmArgs> for gen::SlurmOptions {
    fn from(a: &SlurmArgs) -> gen::SlurmOptions {
        gen::SlurmOptions {
            nodes: a.nodes,
            gpus_per_node: a.gpus_per_node,
            partition: a.partition.clone(),
            account: a.account.clone(),
            time: a.time.clone(),
            job_name: a.job_name.clone(),
            container: a.container.clone().flatten(),
            // `--container` alone: collbench's image, entered with pyxis
            // unless a runtime is named.
            container_runtime: a.container_runtime.map(Into::into).or(match a.container {
                Some(None) => Some(ContainerRuntimeLib::Pyxis),
                _ => None,
            }),
            output_dir: a.output_dir.clone(),
            common: (&a.common).into(),
        }
    }
}

impl From<&K8sArgs> for gen::K8sOptions {
    fn from(a: &K8sArgs) -> gen::K8sOptions {
        gen::K8sOptions {
            kind: a.kind.into(),
            nodes: a.nodes,
            gpus_per_node: a.gpus_per_node,
            image: a.image.clone(),
            inject_into: a.inject_into.clone(),
            topology: match (&a.topology_required, &a.topology_preferred) {
                (Some(level), _) => Some(gen::Topology::Required(level.clone())),
                (None, Some(level)) => Some(gen::Topology::Preferred(level.clone())),
                (None, None) => None,
            },
            name: a.name.clone(),
            namespace: a.namespace.clone(),
            gpu_resource: a.gpu_resource.clone(),
            resources: a.resources.clone(),
            queue: a.queue.clone(),
            port: a.port,
            common: (&a.common).into(),
        }
    }
}

impl From<&MpirunArgs> for gen::MpirunOptions {
    fn from(a: &MpirunArgs) -> gen::MpirunOptions {
        gen::MpirunOptions {
            hosts: a.hosts.clone(),
            port: a.port,
            common: (&a.common).into(),
        }
    }
}
