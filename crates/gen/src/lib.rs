//! collbench-gen: writes ready-to-run launch files for collbench: an sbatch
//! script for Slurm, Kubernetes manifests (JobSet, Indexed Job, MPIJob) and an
//! OpenMPI command line.
//!
//! It only writes text; it never submits anything. Every user value that
//! lands in a shell script is shell-quoted (`quote`), every manifest is built
//! from typed structs and serialised by serde_norway, and names Kubernetes or a
//! shell would reject or misread are refused up front (`validate`).

#![forbid(unsafe_code)]

mod error;
mod k8s;
mod mpirun;
mod quote;
mod slurm;
mod validate;

use std::path::PathBuf;

pub use error::Error;
pub use k8s::{K8sKind, K8sOptions, Topology};
pub use mpirun::MpirunOptions;
pub use quote::{sh_join, sh_quote};
pub use slurm::{ContainerRuntime, SlurmOptions};

/// What `collbench gen ...` writes, and where (the CLI fills it from its
/// flags).
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Write the launch file here instead of to standard output.
    pub output: Option<PathBuf>,
    /// What to write.
    pub target: GenTarget,
}

/// What to generate.
#[derive(Debug, Clone)]
pub enum GenTarget {
    /// An sbatch script: one task per GPU through srun, no MPI needed.
    Slurm(SlurmOptions),
    /// Kubernetes manifests: headless Service plus a JobSet, Indexed Job or MPIJob.
    K8s(K8sOptions),
    /// An OpenMPI `mpirun` command line.
    Mpirun(MpirunOptions),
}

impl GenTarget {
    /// The collbench arguments every rank will run (the user's after `--`,
    /// or [`DEFAULT_ARGS`]), for the CLI to check with its own parser.
    pub fn collbench_args(&self) -> Vec<String> {
        self.common().collbench_args()
    }

    /// The executable every rank starts (`--collbench`: `collbench`, a path,
    /// or an `<op>_perf` alias).
    pub fn collbench_program(&self) -> &str {
        &self.common().collbench
    }

    fn common(&self) -> &CommonOptions {
        match self {
            GenTarget::Slurm(a) => &a.common,
            GenTarget::K8s(a) => &a.common,
            GenTarget::Mpirun(a) => &a.common,
        }
    }
}

/// Options every target shares: the collbench command and extra environment.
#[derive(Debug, Clone)]
pub struct CommonOptions {
    /// Environment variable for every rank (repeatable), e.g. NCCL_DEBUG=INFO.
    pub env: Vec<String>,

    /// The collbench executable as the launched ranks see it (a path inside the
    /// image for containers).
    pub collbench: String,

    /// collbench arguments for every rank [default: run all -b 8 -e 8G -f 2].
    pub args: Vec<String>,
}

/// The image `dist/Containerfile` builds (its `runtime` stage), under the
/// name launch files use when none is given. Nothing publishes it: build
/// it and push it to this name, or pass your own (`--image`, `--container`).
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/collbench/collbench:", env!("CARGO_PKG_VERSION"));

/// The collbench arguments used when none follow `--`.
pub const DEFAULT_ARGS: &[&str] = &["run", "all", "-b", "8", "-e", "8G", "-f", "2"];

/// The TCP port rank 0 listens on where the launcher does not pick one; the
/// same default as collbench-launch's, so a hand-written COLLBENCH_RENDEZVOUS
/// without a port agrees with the generated files.
pub const DEFAULT_RENDEZVOUS_PORT: u16 = 29517;

impl CommonOptions {
    /// The collbench arguments: the user's, or [`DEFAULT_ARGS`].
    fn collbench_args(&self) -> Vec<String> {
        if self.args.is_empty() {
            DEFAULT_ARGS.iter().map(|s| s.to_string()).collect()
        } else {
            self.args.clone()
        }
    }
}

/// Renders the requested launch file as text, validating every input first.
pub fn render(args: &GenOptions) -> Result<String, Error> {
    match &args.target {
        GenTarget::Slurm(a) => slurm::render(a),
        GenTarget::K8s(a) => k8s::render(a),
        GenTarget::Mpirun(a) => mpirun::render(a),
    }
}

/// Writes the requested launch file to `--output` (a Slurm script there is
/// made executable), or returns it for standard output when there is none.
pub fn run(args: &GenOptions) -> Result<Option<String>, Error> {
    let text = render(args)?;
    match &args.output {
        None => return Ok(Some(text)),
        Some(path) => {
            std::fs::write(path, &text).map_err(|error| Error::Write {
                path: path.clone(),
                error,
            })?;
            if matches!(args.target, GenTarget::Slurm(_)) {
                make_executable(path)?;
            }
        }
    }
    Ok(None)
}

#[cfg(unix)]
fn make_executable(path: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|error| {
        Error::Executable {
            path: path.to_path_buf(),
            error,
        }
    })
}

#[cfg(not(unix))]
fn make_executable(_path: &std::path::Path) -> Result<(), Error> {
    Ok(())
}
