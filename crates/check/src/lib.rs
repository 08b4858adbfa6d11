//! collbench-check: health verdicts against baselines, localisation of
//! slow ranks and links, and local `doctor` checks (stub: being written).

use collbench_launch::Control;
use collbench_runner::Backend;

/// `collbench check` flags (backend and launch flags are added by the CLI).
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {}

/// `collbench doctor` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {}

/// `collbench baselines` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct BaselinesArgs {}

/// Runs the battery and prints the verdict; returns the exit code
/// (0 pass, 1 warn, 2 fail).
pub fn check_main(
    _args: &CheckArgs,
    _backend: &mut dyn Backend,
    _control: &Control,
    _argv: &[String],
) -> anyhow::Result<i32> {
    anyhow::bail!("collbench check is not implemented yet")
}

/// Runs the local checks; returns the exit code.
pub fn doctor_main(_args: &DoctorArgs) -> anyhow::Result<i32> {
    anyhow::bail!("collbench doctor is not implemented yet")
}

/// Lists or shows built-in baselines.
pub fn baselines_main(_args: &BaselinesArgs) -> anyhow::Result<i32> {
    anyhow::bail!("collbench baselines is not implemented yet")
}
