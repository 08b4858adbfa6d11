//! collbench-gen: launch files for Slurm, Kubernetes and mpirun (stub).

/// `collbench gen ...` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {}

/// Writes the requested launch file.
pub fn run(_args: &GenArgs) -> anyhow::Result<()> {
    anyhow::bail!("collbench gen is not implemented yet")
}
