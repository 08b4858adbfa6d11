//! `collbench preflight` without the rest of collbench, for trying launchers
//! by hand: `srun -N2 -n4 target/debug/examples/preflight --timeout-s 10`.

use clap::Parser;
use collbench_launch::{preflight, PreflightArgs, RankInfo};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: PreflightArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let info = RankInfo {
        collbench_version: env!("CARGO_PKG_VERSION").into(),
        backend: "cpu".into(),
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
        ..RankInfo::default()
    };
    std::process::exit(preflight::run(&cli.args, info)?)
}
