//! collbench-report: parsers of benchmark logs, reports, comparisons (stub).

/// `collbench report` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {}

/// `collbench compare` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {}

/// Runs `collbench report`; returns the exit code.
pub fn report_main(_args: &ReportArgs) -> anyhow::Result<i32> {
    anyhow::bail!("collbench report is not implemented yet")
}

/// Runs `collbench compare`; returns the exit code (1 on regression).
pub fn compare_main(_args: &CompareArgs) -> anyhow::Result<i32> {
    anyhow::bail!("collbench compare is not implemented yet")
}
